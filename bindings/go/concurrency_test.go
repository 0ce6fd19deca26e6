package inferscale

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// Many goroutines put, get, retrieve and inject at once, each in its own
// namespace and all in a shared one; every result is checked.
func TestConcurrentUse(t *testing.T) {
	g := testGeometry()
	s, _ := createStore(t, g)
	const workers, rounds = 12, 25
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			errc <- worker(s, g, w, rounds)
		}(w)
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.Count("shared"); err != nil || n != workers*rounds {
		t.Fatalf("shared namespace has %d records, want %d (%v)", n, workers*rounds, err)
	}
	names, err := s.Namespaces()
	if err != nil || len(names) != workers+1 {
		t.Fatalf("%d namespaces, want %d (%v)", len(names), workers+1, err)
	}
}

func worker(s *Store, g Geometry, w, rounds int) error {
	rng := rand.New(rand.NewSource(int64(w)))
	ns := fmt.Sprintf("user-%d", w)
	cache, err := NewHostCache(FormatNHD, F32, g.Layers, g.KVHeads, g.HeadDim, 4, 4)
	if err != nil {
		return err
	}
	defer cache.Close()
	var mine []uint64
	for i := 0; i < rounds; i++ {
		f := randomFact(rng, g, 1+rng.Intn(4))
		id, err := s.Put(ns, f)
		if err != nil {
			return err
		}
		mine = append(mine, id)
		if _, err := s.Put("shared", f); err != nil {
			return err
		}
		got, err := s.Get(ns, id)
		if err != nil {
			return err
		}
		if !bytes.Equal(got.K, f.K) || !bytes.Equal(got.V, f.V) {
			return fmt.Errorf("%s: fact %d read back differently", ns, id)
		}
		hits, err := s.Retrieve(ns, f.Embedding, 1, &RetrieveOptions{Metric: Cosine})
		if err != nil {
			return err
		}
		if len(hits) != 1 || hits[0].Score < 0.999 {
			return fmt.Errorf("%s: its own embedding retrieved %+v", ns, hits)
		}
		for _, h := range hits {
			if !contains(mine, h.ID) {
				return fmt.Errorf("%s: retrieved %d of another namespace", ns, h.ID)
			}
		}
		next, err := s.Inject(ns, []uint64{id}, 0, []int32{3}, cache.Layout(), nil)
		if err != nil {
			return err
		}
		if next != uint32(len(f.Tokens)) {
			return fmt.Errorf("%s: next position %d after %d tokens", ns, next, len(f.Tokens))
		}
		if !bytes.Equal(cache.V(0, 3, 0, 0), f.V[:g.HeadDim*4]) {
			return fmt.Errorf("%s: injected V differs", ns)
		}
		if _, err := s.Stats(); err != nil {
			return err
		}
		if i%5 == 4 {
			if err := s.Delete(ns, mine[0]); err != nil {
				return err
			}
			mine = mine[1:]
		}
	}
	ids, err := s.List(ns)
	if err != nil {
		return err
	}
	if len(ids) != len(mine) {
		return fmt.Errorf("%s lists %d ids, want %d", ns, len(ids), len(mine))
	}
	return nil
}

func contains(ids []uint64, id uint64) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// Close while other goroutines are calling: Close waits for the calls in
// flight, and every later call gets ErrClosed, never a freed handle.
func TestCloseWhileInUse(t *testing.T) {
	g := testGeometry()
	s, _ := createStore(t, g)
	f := randomFact(rand.New(rand.NewSource(10)), g, 2)
	if _, err := s.Put("u", f); err != nil {
		t.Fatal(err)
	}
	const workers = 8
	var calls atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for {
				var err error
				if w%2 == 0 {
					_, err = s.Retrieve("u", f.Embedding, 4, nil)
				} else {
					_, err = s.Put("u", f)
				}
				if err != nil {
					if !errors.Is(err, ErrClosed) {
						err = fmt.Errorf("unexpected error: %w", err)
					} else {
						err = nil
					}
					errc <- err
					return
				}
				calls.Add(1)
			}
		}(w)
	}
	for calls.Load() < 200 && len(errc) == 0 {
		runtime.Gosched()
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			t.Fatal(err)
		}
	}
}
