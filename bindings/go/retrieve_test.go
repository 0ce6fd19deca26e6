package inferscale

import (
	"math"
	"math/rand"
	"reflect"
	"sort"
	"testing"
)

// bruteForce is the reference top-k: scores in float64, best first, ties by
// increasing id.
func bruteForce(ids []uint64, embs [][]float32, q []float32, k int, metric Metric) []Hit {
	norm := func(x []float32) float64 {
		var s float64
		for _, v := range x {
			s += float64(v) * float64(v)
		}
		return math.Sqrt(s)
	}
	hits := make([]Hit, len(ids))
	for i, e := range embs {
		var dot float64
		for j := range e {
			dot += float64(e[j]) * float64(q[j])
		}
		if metric == Cosine {
			dot /= norm(e) * norm(q)
		}
		hits[i] = Hit{ID: ids[i], Score: float32(dot)}
	}
	sort.Slice(hits, func(a, b int) bool {
		if hits[a].Score != hits[b].Score {
			return hits[a].Score > hits[b].Score
		}
		return hits[a].ID < hits[b].ID
	})
	return hits[:min(k, len(hits))]
}

func sameHits(t *testing.T, what string, got, want []Hit) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d hits, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i].ID != want[i].ID || math.Abs(float64(got[i].Score-want[i].Score)) > 1e-4 {
			t.Fatalf("%s: hit %d = %+v, want %+v", what, i, got[i], want[i])
		}
	}
}

func TestRetrieveAgainstBruteForce(t *testing.T) {
	g := testGeometry()
	g.EmbedDim = 16
	s, _ := createStore(t, g)
	rng := rand.New(rand.NewSource(5))
	var ids []uint64
	var embs [][]float32
	for i := 0; i < 60; i++ {
		f := randomFact(rng, g, 1)
		id, err := s.Put("u", f)
		if err != nil {
			t.Fatal(err)
		}
		ids, embs = append(ids, id), append(embs, f.Embedding)
	}
	// Noise in another namespace, and a segment in this one: never returned.
	for i := 0; i < 10; i++ {
		if _, err := s.Put("other", randomFact(rng, g, 1)); err != nil {
			t.Fatal(err)
		}
	}
	seg := randomFact(rng, g, 1)
	seg.Segment, seg.Embedding = true, nil
	if _, err := s.Put("u", seg); err != nil {
		t.Fatal(err)
	}

	const nq = 5
	queries := make([]float32, nq*int(g.EmbedDim))
	for i := range queries {
		queries[i] = float32(rng.NormFloat64())
	}
	for _, metric := range []Metric{Cosine, InnerProduct} {
		opts := &RetrieveOptions{Metric: metric, Backend: BackendExact}
		for _, k := range []int{1, 7, 60, 100} {
			batch, err := s.RetrieveBatch("u", queries, k, opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(batch) != nq {
				t.Fatalf("%d result lists for %d queries", len(batch), nq)
			}
			for q := 0; q < nq; q++ {
				query := queries[q*int(g.EmbedDim) : (q+1)*int(g.EmbedDim)]
				want := bruteForce(ids, embs, query, k, metric)
				got, err := s.Retrieve("u", query, k, opts)
				if err != nil {
					t.Fatal(err)
				}
				sameHits(t, "Retrieve", got, want)
				sameHits(t, "RetrieveBatch", batch[q], want)
				dst := make([]Hit, k)
				n, err := s.RetrieveInto(dst, "u", query, opts)
				if err != nil || n != len(want) {
					t.Fatalf("RetrieveInto = %d, %v", n, err)
				}
				sameHits(t, "RetrieveInto", dst[:n], want)
			}
		}
	}
}

func TestRetrieveTiesByID(t *testing.T) {
	g := testGeometry()
	s, _ := createStore(t, g)
	rng := rand.New(rand.NewSource(6))
	f := randomFact(rng, g, 1)
	var ids []uint64
	for i := 0; i < 5; i++ {
		id, err := s.Put("u", f)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	hits, err := s.Retrieve("u", f.Embedding, 5, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for _, h := range hits {
		got = append(got, h.ID)
	}
	sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
	if !reflect.DeepEqual(got, ids) {
		t.Fatalf("equal scores in order %v, want increasing ids %v", got, ids)
	}
}

// The FAISS backend through the binding: a Flat index returns exactly what
// the exact search returns; without an index (or without FAISS in the
// build) it is ErrUnsupported.
func TestRetrieveFAISS(t *testing.T) {
	g := testGeometry()
	g.EmbedDim = 8
	s, path := createStore(t, g)
	rng := rand.New(rand.NewSource(12))
	for i := 0; i < 40; i++ {
		if _, err := s.Put("u", randomFact(rng, g, 1)); err != nil {
			t.Fatal(err)
		}
	}
	q := randomFact(rng, g, 1).Embedding
	_, err := s.Retrieve("u", q, 5, &RetrieveOptions{Backend: BackendFAISS})
	wantCode(t, err, ErrUnsupported)
	s.Close()

	s, err = Open(path, &Options{FaissIndex: "Flat", FaissMinFacts: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, metric := range []Metric{Cosine, InnerProduct} {
		exact, err := s.Retrieve("u", q, 10, &RetrieveOptions{Metric: metric, Backend: BackendExact})
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Retrieve("u", q, 10, &RetrieveOptions{Metric: metric, Backend: BackendFAISS})
		if !LibraryFeatures().FAISS {
			wantCode(t, err, ErrUnsupported)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		sameHits(t, "FAISS Flat", got, exact)
	}
}
