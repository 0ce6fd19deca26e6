package inferscale

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"
)

func TestVersion(t *testing.T) {
	if got := VersionNumber(); got != HeaderVersion {
		t.Fatalf("library version %d, headers %d (the tests run against the library of this tree)", got, HeaderVersion)
	}
	if err := CheckVersion(); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%d.%d.%d", HeaderVersion/10000, HeaderVersion/100%100, HeaderVersion%100); Version() != want {
		t.Fatalf("Version() = %q, want %q", Version(), want)
	}
	if err := checkVersion(HeaderVersion + 10000); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("a library of the next major version was accepted: %v", err)
	}
	if HeaderVersion > 0 {
		if err := checkVersion(HeaderVersion - 1); !errors.Is(err, ErrUnsupported) {
			t.Fatalf("a library older than the headers was accepted: %v", err)
		}
	}
	if err := checkVersion(HeaderVersion + 1); err != nil {
		t.Fatalf("a newer patch release was refused: %v", err)
	}
}

// The codes are ABI: they must never change.
func TestCodesMatchABI(t *testing.T) {
	codes := []Code{OK, ErrInvalid, ErrNoMem, ErrIO, ErrNotFound, ErrMismatch, ErrCorrupt, ErrBusy, ErrRange,
		ErrUnsupported, ErrDevice, ErrExists, ErrFormat, ErrBudget, ErrCanceled, ErrReadOnly, ErrNotResident}
	for i, c := range codes {
		if int(c) != -i {
			t.Errorf("code %d is %d, want %d", i, int(c), -i)
		}
		if msg := c.Error(); !strings.HasPrefix(msg, "inferscale: ") || strings.Contains(msg, "unknown") {
			t.Errorf("code %d: message %q", int(c), msg)
		}
	}
	if F32.Size() != 4 || F16.Size() != 2 || BF16.Size() != 2 || DType(7).Size() != 0 {
		t.Errorf("dtype sizes %d %d %d %d", F32.Size(), F16.Size(), BF16.Size(), DType(7).Size())
	}
}

func TestGeometry(t *testing.T) {
	d := DefaultGeometry()
	if d.RopeTheta != 10000 || d.KVDType != F16 || d.RopeScaling != RopeScalingNone || d.Layers != 0 {
		t.Fatalf("DefaultGeometry = %+v", d)
	}
	wantCode(t, d.Validate(), ErrInvalid) // no layers yet
	if err := d.Validate(); !strings.Contains(err.Error(), "n_layers") {
		t.Fatalf("the message does not name the field: %v", err)
	}
	g := testGeometry()
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	if got, want := g.KVTokenBytes(), 2*2*8*4; got != want {
		t.Fatalf("KVTokenBytes = %d, want %d", got, want)
	}
	g.RotaryDim = 7
	wantCode(t, g.Validate(), ErrInvalid)
}

func TestRoundTrip(t *testing.T) {
	g := testGeometry()
	s, path := createStore(t, g)
	if !reflect.DeepEqual(s.Geometry(), g) || s.Identity() != testIdentity {
		t.Fatalf("store geometry %+v identity %q", s.Geometry(), s.Identity())
	}
	rng := rand.New(rand.NewSource(1))
	f := randomFact(rng, g, 5)
	f.Text = "Alice has a dog named Rex."
	f.Metadata = `{"turn": 3}`
	f.SourceID, f.Timestamp = 42, 1700000000
	id, err := s.Put("alice", f)
	if err != nil {
		t.Fatal(err)
	}
	seg := randomFact(rng, g, 2)
	seg.Segment, seg.Embedding = true, nil
	segID, err := s.Put("alice", seg)
	if err != nil {
		t.Fatal(err)
	}
	if segID == id {
		t.Fatalf("two records got id %d", id)
	}
	check := func(s *Store) {
		got, err := s.Get("alice", id)
		if err != nil {
			t.Fatal(err)
		}
		want := *f
		want.ID = id
		if !reflect.DeepEqual(got, &want) {
			t.Fatalf("Get = %+v\nwant %+v", got, &want)
		}
		gs, err := s.Get("alice", segID)
		if err != nil {
			t.Fatal(err)
		}
		if !gs.Segment || gs.Embedding != nil || !bytes.Equal(gs.K, seg.K) || !bytes.Equal(gs.V, seg.V) || gs.Text != "" {
			t.Fatalf("segment = %+v", gs)
		}
		ids, err := s.List("alice")
		if err != nil || !reflect.DeepEqual(ids, []uint64{min(id, segID), max(id, segID)}) {
			t.Fatalf("List = %v, %v", ids, err)
		}
		if n, err := s.Count("alice"); err != nil || n != 2 {
			t.Fatalf("Count = %d, %v", n, err)
		}
		st, err := s.Stats()
		if err != nil || st.Facts != 1 || st.Segments != 1 || st.Namespaces != 1 || st.LiveBytes == 0 ||
			st.FileBytes < st.LiveBytes {
			t.Fatalf("Stats = %+v, %v", st, err)
		}
	}
	check(s)
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// Reopened without geometry or identity: both come from the file.
	s, err = Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !reflect.DeepEqual(s.Geometry(), g) || s.Identity() != testIdentity {
		t.Fatalf("reopened geometry %+v identity %q", s.Geometry(), s.Identity())
	}
	check(s)

	if err := s.Delete("alice", id); err != nil {
		t.Fatal(err)
	}
	_, err = s.Get("alice", id)
	wantCode(t, err, ErrNotFound)
	wantCode(t, s.Delete("alice", id), ErrNotFound)
	if err := s.Compact(); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get("alice", segID); err != nil || !bytes.Equal(got.K, seg.K) {
		t.Fatalf("segment lost by compaction: %v", err)
	}
}

func TestNamespaces(t *testing.T) {
	g := testGeometry()
	s, _ := createStore(t, g)
	rng := rand.New(rand.NewSource(2))
	ids := map[string][]uint64{}
	for _, ns := range []string{"carol", "alice", "bob", "alice"} {
		id, err := s.Put(ns, randomFact(rng, g, 3))
		if err != nil {
			t.Fatal(err)
		}
		ids[ns] = append(ids[ns], id)
	}
	names, err := s.Namespaces()
	if err != nil || !reflect.DeepEqual(names, []string{"alice", "bob", "carol"}) {
		t.Fatalf("Namespaces = %q, %v", names, err)
	}

	// A fact is invisible from every other namespace, whatever is asked.
	bobID := ids["bob"][0]
	for _, ns := range []string{"alice", "carol", "dave", "Bob", "bob "} {
		_, err := s.Get(ns, bobID)
		wantCode(t, err, ErrNotFound)
		wantCode(t, s.Delete(ns, bobID), ErrNotFound)
	}
	q := make([]float32, g.EmbedDim)
	q[0] = 1
	hits, err := s.Retrieve("alice", q, 10, nil)
	if err != nil || len(hits) != 2 {
		t.Fatalf("Retrieve(alice) = %v, %v", hits, err)
	}
	for _, h := range hits {
		if h.ID != ids["alice"][0] && h.ID != ids["alice"][1] {
			t.Fatalf("alice's retrieval returned %d, not one of hers", h.ID)
		}
	}
	if hits, err := s.Retrieve("dave", q, 10, nil); err != nil || len(hits) != 0 {
		t.Fatalf("Retrieve(unknown) = %v, %v", hits, err)
	}
	if n, err := s.Count("dave"); err != nil || n != 0 {
		t.Fatalf("Count(unknown) = %d, %v", n, err)
	}
	if l, err := s.List("dave"); err != nil || len(l) != 0 {
		t.Fatalf("List(unknown) = %v, %v", l, err)
	}

	if err := s.DropNamespace("alice"); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.Count("alice"); n != 0 {
		t.Fatalf("alice still has %d records", n)
	}
	if _, err := s.Get("bob", bobID); err != nil {
		t.Fatalf("dropping alice lost bob's fact: %v", err)
	}
	names, _ = s.Namespaces()
	if !reflect.DeepEqual(names, []string{"bob", "carol"}) {
		t.Fatalf("Namespaces after drop = %q", names)
	}
}

func TestBadInputs(t *testing.T) {
	g := testGeometry()
	s, path := createStore(t, g)
	rng := rand.New(rand.NewSource(3))
	good := randomFact(rng, g, 4)
	if _, err := s.Put("u", good); err != nil {
		t.Fatal(err)
	}
	put := func(ns string, edit func(f *Fact)) error {
		f := *good
		edit(&f)
		_, err := s.Put(ns, &f)
		return err
	}
	nop := func(*Fact) {}

	_, err := s.Put("u", nil)
	wantCode(t, err, ErrInvalid)
	wantCode(t, put("a\x00b", nop), ErrInvalid)
	wantCode(t, put("", nop), ErrInvalid)
	wantCode(t, put(strings.Repeat("n", NamespaceMax+1), nop), ErrInvalid)
	wantCode(t, put("u", func(f *Fact) { f.K = f.K[:len(f.K)-4] }), ErrInvalid)
	wantCode(t, put("u", func(f *Fact) { f.V = append(f.V[:len(f.V):len(f.V)], 0, 0, 0, 0) }), ErrInvalid)
	wantCode(t, put("u", func(f *Fact) { f.Embedding = f.Embedding[:3] }), ErrInvalid)
	wantCode(t, put("u", func(f *Fact) { f.Embedding = nil }), ErrInvalid)
	wantCode(t, put("u", func(f *Fact) { f.Tokens, f.K, f.V = nil, nil, nil }), ErrRange)
	wantCode(t, put("u", func(f *Fact) { f.Tokens = []int32{1, -2, 3, 4} }), ErrInvalid)
	wantCode(t, put("u", func(f *Fact) { f.Segment = true }), ErrInvalid) // a segment has no embedding
	wantCode(t, put("u", func(f *Fact) { f.Text = "a\x00b" }), ErrInvalid)
	wantCode(t, put("u", func(f *Fact) { f.Metadata = strings.Repeat("m", MetadataMax+1) }), ErrRange)
	wantCode(t, put("u", func(f *Fact) { f.Text = strings.Repeat("t", TextMax) }), ErrRange)
	wantCode(t, put("u", func(f *Fact) { f.Tokens = make([]int32, FactTokensMax+1) }), ErrRange)
	if n, _ := s.Count("u"); n != 1 {
		t.Fatalf("rejected puts changed the store: %d records", n)
	}

	_, err = s.Get("u", 1<<60)
	wantCode(t, err, ErrNotFound)
	q := make([]float32, g.EmbedDim)
	for _, k := range []int{0, -1, RetrieveKMax + 1} {
		_, err = s.Retrieve("u", q, k, nil)
		wantCode(t, err, ErrRange)
	}
	_, err = s.Retrieve("u", q[:3], 1, nil)
	wantCode(t, err, ErrInvalid)
	_, err = s.RetrieveBatch("u", make([]float32, 7), 1, nil)
	wantCode(t, err, ErrInvalid)
	_, err = s.Retrieve("u", q, 1, &RetrieveOptions{Metric: Metric(9)})
	wantCode(t, err, ErrInvalid)
	_, err = s.Retrieve("u", q, 1, &RetrieveOptions{Backend: Backend(9)})
	wantCode(t, err, ErrInvalid)
	_, err = s.Retrieve("u", q, 1, nil) // all zeros: its cosine is undefined
	wantCode(t, err, ErrInvalid)
	_, err = s.Retrieve("u", []float32{1, float32(math.NaN()), 0, 0}, 1, nil)
	wantCode(t, err, ErrInvalid)

	// Opening: missing file, wrong geometry or identity, second writer.
	_, err = Open(filepath.Join(t.TempDir(), "missing.infs"), nil)
	wantCode(t, err, ErrNotFound)
	other := g
	other.HeadDim, other.RotaryDim = 16, 16
	// (read-only: the store is open for writing here already)
	_, err = Open(path, &Options{ReadOnly: true, Geometry: &other})
	wantCode(t, err, ErrMismatch)
	_, err = Open(path, &Options{ReadOnly: true, Identity: "another-model"})
	wantCode(t, err, ErrMismatch)
	_, err = Open(path, nil)
	wantCode(t, err, ErrBusy)
	_, err = Open(path, &Options{ReadOnly: true, UseDevice: true, Device: -2})
	wantCode(t, err, ErrInvalid)
	_, err = Open(path+"\x00x", nil)
	wantCode(t, err, ErrInvalid)
	_, err = Open(filepath.Join(t.TempDir(), "new.infs"), &Options{Create: true})
	wantCode(t, err, ErrInvalid) // creating needs a geometry and an identity

	ro, err := Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	_, err = ro.Put("u", good)
	wantCode(t, err, ErrReadOnly)
	if n, err := ro.Count("u"); err != nil || n != 1 {
		t.Fatalf("read-only Count = %d, %v", n, err)
	}
}

func TestErrorValues(t *testing.T) {
	s, _ := createStore(t, testGeometry())
	_, err := s.Get("alice", 12345)
	var e *Error
	if !errors.As(err, &e) || e.Code != ErrNotFound || !strings.Contains(e.Message, "12345") {
		t.Fatalf("error %#v does not carry the code and a message naming the id", err)
	}
	if !errors.Is(err, ErrNotFound) || errors.Is(err, ErrInvalid) || errors.Is(err, ErrClosed) {
		t.Fatalf("errors.Is does not tell the code of %v", err)
	}
	var c Code
	if !errors.As(err, &c) || c != ErrNotFound {
		t.Fatalf("errors.As(Code) = %v", c)
	}
	if !strings.HasPrefix(err.Error(), "inferscale: ") {
		t.Fatalf("message %q", err)
	}
}

// The per-thread C message is read with the OS thread locked: many
// goroutines failing at once each get the message of their own call.
func TestErrorMessagePerCall(t *testing.T) {
	s, _ := createStore(t, testGeometry())
	const workers, rounds = 16, 200
	errc := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func(w int) {
			for i := 0; i < rounds; i++ {
				id := uint64(w*100000 + i + 1)
				_, err := s.Get("ns", id)
				if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), fmt.Sprint(id)) {
					errc <- fmt.Errorf("Get(%d) gave %v", id, err)
					return
				}
				runtime.Gosched()
			}
			errc <- nil
		}(w)
	}
	for w := 0; w < workers; w++ {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
}

func TestCloseAndUseAfterClose(t *testing.T) {
	g := testGeometry()
	s, path := createStore(t, g)
	f := randomFact(rand.New(rand.NewSource(4)), g, 2)
	id, err := s.Put("u", f)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	q := make([]float32, g.EmbedDim)
	cache, err := NewHostCache(FormatVLLM, F32, g.Layers, g.KVHeads, g.HeadDim, 4, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	var nilStore *Store
	for _, st := range []*Store{s, nilStore} {
		calls := map[string]error{}
		_, calls["Put"] = st.Put("u", f)
		_, calls["Get"] = st.Get("u", id)
		calls["Delete"] = st.Delete("u", id)
		_, calls["Count"] = st.Count("u")
		_, calls["List"] = st.List("u")
		_, calls["Namespaces"] = st.Namespaces()
		calls["DropNamespace"] = st.DropNamespace("u")
		_, calls["Retrieve"] = st.Retrieve("u", q, 1, nil)
		_, calls["RetrieveBatch"] = st.RetrieveBatch("u", q, 1, nil)
		_, calls["Inject"] = st.Inject("u", []uint64{id}, 0, []int32{0}, cache.Layout(), nil)
		calls["Sync"] = st.Sync()
		calls["Compact"] = st.Compact()
		_, calls["Stats"] = st.Stats()
		for name, err := range calls {
			if !errors.Is(err, ErrClosed) || !errors.Is(err, ErrInvalid) {
				t.Errorf("%s after Close: %v", name, err)
			}
		}
	}
	if err := nilStore.Close(); err != nil {
		t.Fatal(err)
	}
	// The handle was released: the file can be opened for writing again.
	s2, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	s2.Close()
}

// A store dropped without Close is closed by its finalizer, which releases
// the writer lock.
func TestFinalizerCloses(t *testing.T) {
	g := testGeometry()
	path := filepath.Join(t.TempDir(), "f.infs")
	func() {
		s, err := Open(path, &Options{Create: true, Geometry: &g, Identity: testIdentity})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Count("u"); err != nil {
			t.Fatal(err)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		s, err := Open(path, nil)
		if err == nil {
			s.Close()
			return
		}
		if !errors.Is(err, ErrBusy) || time.Now().After(deadline) {
			t.Fatalf("the unreachable store was not closed: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestLostRecordsAndVerify(t *testing.T) {
	g := testGeometry()
	s, path := createStore(t, g)
	rng := rand.New(rand.NewSource(11))
	if _, err := s.Put("alice", randomFact(rng, g, 3)); err != nil {
		t.Fatal(err)
	}
	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	boundary := st.FileBytes
	if _, err := s.Put("alice", randomFact(rng, g, 3)); err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(); err != nil {
		t.Fatalf("Verify of a sound store: %v", err)
	}
	s.Close()
	// Cut at a record boundary: the commit slot still counts the lost record.
	if err := os.Truncate(path, int64(boundary)); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if st, err = r.Stats(); err != nil || st.LostRecords != 1 || st.DroppedTailBytes != 0 || st.Facts != 1 {
		t.Fatalf("Stats = %+v, %v; want 1 lost record, 1 fact", st, err)
	}
	// Bytes rewritten under the open handle.
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xff, 0xff, 0xff, 0xff}, int64(boundary)-40); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := r.Verify(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Verify after damage = %v, want ErrCorrupt", err)
	}
}

// An fp8 store keeps what ConvertKV quantizes, and dequantizing it gives
// every element within half an e4m3 step (1/16 of itself, or 2^-10 of its
// row's scale near zero) of the float32 it came from.
func TestFP8Store(t *testing.T) {
	g := testGeometry()
	g.KVDType = FP8E4M3
	if FP8E4M3.String() != "fp8_e4m3" || FP8E4M3.Size() != 1 || g.KVTokenBytes() != 2*2*(8+4) {
		t.Fatalf("fp8: %s, size %d, token bytes %d", FP8E4M3, FP8E4M3.Size(), g.KVTokenBytes())
	}
	s, _ := createStore(t, g)
	const n = 3
	f := g
	f.KVDType = F32
	x := make([]float32, n*f.KVTokenBytes()/4)
	for i := range x {
		x[i] = float32(math.Sin(float64(i)*0.7)) * float32(1+i%5)
	}
	src := unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*len(x))
	q := make([]byte, n*g.KVTokenBytes())
	if err := ConvertKV(q, FP8E4M3, src, F32, g, n); err != nil {
		t.Fatal(err)
	}
	id, err := s.Put("a", &Fact{Tokens: []int32{1, 2, 3}, Embedding: []float32{1, 0, 0, 0}, K: q, V: q})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Get("a", id)
	if err != nil || !bytes.Equal(got.K, q) || !bytes.Equal(got.V, q) {
		t.Fatalf("Get: %v", err)
	}
	back := make([]float32, len(x))
	if err := ConvertKV(unsafe.Slice((*byte)(unsafe.Pointer(&back[0])), 4*len(back)), F32, got.K, FP8E4M3, g, n); err != nil {
		t.Fatal(err)
	}
	rows := len(x) / int(g.HeadDim)
	for r := 0; r < rows; r++ {
		scale := math.Float32frombits(binary.LittleEndian.Uint32(q[len(x)+4*r:]))
		for i := r * int(g.HeadDim); i < (r+1)*int(g.HeadDim); i++ {
			bound := math.Max(math.Abs(float64(x[i]))/16, float64(scale)/1024)
			if d := math.Abs(float64(back[i] - x[i])); d > bound*1.0001 {
				t.Fatalf("element %d: %g back as %g (scale %g)", i, x[i], back[i], scale)
			}
		}
	}
	wantCode(t, ConvertKV(q[:5], FP8E4M3, src, F32, g, n), ErrInvalid)
	x[7] = float32(math.NaN())
	wantCode(t, ConvertKV(q, FP8E4M3, src, F32, g, n), ErrInvalid)
}

// Without a device copy the file is the only tier: Prefetch and TierWait do
// nothing, every namespace is TierFile, the tier counters are 0.
func TestTiersWithoutDevice(t *testing.T) {
	g := testGeometry()
	s, _ := createStore(t, g)
	rng := rand.New(rand.NewSource(9))
	if _, err := s.Put("alice", randomFact(rng, g, 3)); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"alice", "nobody"} {
		if err := s.Prefetch(ns); err != nil {
			t.Fatal(err)
		}
		if tier, err := s.NamespaceTier(ns); err != nil || tier != TierFile {
			t.Fatalf("NamespaceTier(%q) = %d, %v; want TierFile", ns, tier, err)
		}
	}
	if err := s.TierWait(); err != nil {
		t.Fatal(err)
	}
	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Facts != 1 || st.HostBytes != 0 || st.KVDeviceBytes != 0 || st.KVHostBytes != 0 ||
		st.DeviceEvictions != 0 || st.HostEvictions != 0 || st.Promotions != 0 {
		t.Fatalf("stats %+v", st)
	}
	if err := s.Prefetch(""); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "infs_prefetch") {
		t.Fatalf("Prefetch(\"\") = %v", err)
	}
	if _, err := s.NamespaceTier("a\x00b"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("NamespaceTier with a NUL = %v", err)
	}
	if TierDevice != 0 || TierHost != 1 || TierFile != 2 {
		t.Fatal("tier values changed")
	}
	s.Close()
	if err := s.TierWait(); !errors.Is(err, ErrClosed) {
		t.Fatalf("TierWait after Close = %v", err)
	}
}
