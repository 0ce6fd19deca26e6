package inferscale

import (
	"math/rand"
	"strings"
	"testing"
)

// Nobody can poison the shared prompt from Go: writes to a namespace under
// ReservedPrefix, where the engine keeps its header and footer, are refused
// and leave the store as it was; reads are allowed.
func TestReservedNamespacesRefuseWrites(t *testing.T) {
	g := testGeometry()
	s, _ := createStore(t, g)
	rng := rand.New(rand.NewSource(11))
	if _, err := s.Put("alice", randomFact(rng, g, 2)); err != nil {
		t.Fatal(err)
	}
	before, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"inferscale.segments", ReservedPrefix, ReservedPrefix + "other"} {
		header := randomFact(rng, g, 3)
		header.Segment, header.Embedding, header.Metadata = true, nil, `{"segment":"header"}`
		for _, f := range []*Fact{header, randomFact(rng, g, 3)} {
			_, err := s.Put(ns, f)
			wantCode(t, err, ErrInvalid)
			if !strings.Contains(err.Error(), "reserved") {
				t.Errorf("Put(%q): %v does not say the name is reserved", ns, err)
			}
		}
		wantCode(t, s.Delete(ns, 1), ErrInvalid)
		wantCode(t, s.DropNamespace(ns), ErrInvalid)
		if n, err := s.Count(ns); err != nil || n != 0 {
			t.Errorf("Count(%q) = %d, %v", ns, n, err)
		}
		if ids, err := s.List(ns); err != nil || len(ids) != 0 {
			t.Errorf("List(%q) = %v, %v", ns, ids, err)
		}
	}
	after, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if after.FileBytes != before.FileBytes {
		t.Errorf("refused writes changed the file: %d -> %d bytes", before.FileBytes, after.FileBytes)
	}
	// Names that only look alike are ordinary.
	for _, ns := range []string{"inferscale", "Inferscale.segments"} {
		id, err := s.Put(ns, randomFact(rng, g, 2))
		if err != nil {
			t.Fatalf("Put(%q): %v", ns, err)
		}
		if err := s.Delete(ns, id); err != nil {
			t.Fatalf("Delete(%q): %v", ns, err)
		}
	}
}
