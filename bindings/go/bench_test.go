package inferscale

import (
	"fmt"
	"math/rand"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/inferscale/inferscale/bindings/go/internal/cbench"
)

// benchStore writes a store of n one-token facts with 384-float embeddings
// (MiniLM's size) in namespace "u", closes it, and returns its path.
func benchStore(b *testing.B, n int) (path string, query []float32) {
	b.Helper()
	g := testGeometry()
	g.EmbedDim = 384
	path = filepath.Join(b.TempDir(), "bench.infs")
	s, err := Open(path, &Options{Create: true, Geometry: &g, Identity: testIdentity, Sync: SyncOff})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewSource(11))
	for i := 0; i < n; i++ {
		if _, err := s.Put("u", randomFact(rng, g, 1)); err != nil {
			b.Fatal(err)
		}
	}
	s.Close()
	return path, randomFact(rng, g, 1).Embedding
}

// BenchmarkRetrieve compares a top-8 retrieval through the binding with the
// same infs_retrieve call made from a C loop: the difference is what Go adds
// (the cgo transition, the OS thread lock, the namespace string, the store
// lock, and for Retrieve the result slice). With 0 facts the namespace is
// unknown and C returns right after checking its arguments, which leaves the
// per-call cost alone.
func BenchmarkRetrieve(b *testing.B) {
	const k = 8
	for _, n := range []int{0, 16, 1024} {
		path, query := benchStore(b, n)
		b.Run(fmt.Sprintf("facts=%d/go", n), func(b *testing.B) {
			s, err := Open(path, &Options{ReadOnly: true})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := s.Retrieve("u", query, k, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("facts=%d/go-into", n), func(b *testing.B) {
			s, err := Open(path, &Options{ReadOnly: true})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			dst := make([]Hit, k)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := s.RetrieveInto(dst, "u", query, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("facts=%d/c", n), func(b *testing.B) {
			s, err := cbench.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			b.ResetTimer()
			if _, err := s.RetrieveLoop("u", query, k, b.N); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkRetrieveOverhead alternates batches of calls through Go and from
// C on the same store and reports each side's CPU time per call (the
// thread's CPU time, with the goroutine locked to it: on a shared machine,
// wall time mostly measures the other processes) and their difference.
func BenchmarkRetrieveOverhead(b *testing.B) {
	const k, batch = 8, 200
	for _, n := range []int{0, 16, 1024} {
		path, query := benchStore(b, n)
		b.Run(fmt.Sprintf("facts=%d", n), func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			s, err := Open(path, &Options{ReadOnly: true})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			cs, err := cbench.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			defer cs.Close()
			dst := make([]Hit, k)
			var goTime, cTime time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := cbench.ThreadCPU()
				for j := 0; j < batch; j++ {
					if _, err := s.RetrieveInto(dst, "u", query, nil); err != nil {
						b.Fatal(err)
					}
				}
				goTime += cbench.ThreadCPU() - t0
				d, err := cs.RetrieveLoop("u", query, k, batch)
				if err != nil {
					b.Fatal(err)
				}
				cTime += d
			}
			calls := float64(b.N) * batch
			b.ReportMetric(float64(goTime.Nanoseconds())/calls, "go-ns/call")
			b.ReportMetric(float64(cTime.Nanoseconds())/calls, "c-ns/call")
			b.ReportMetric(float64((goTime-cTime).Nanoseconds())/calls, "overhead-ns/call")
		})
	}
}
