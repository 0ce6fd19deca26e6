package inferscale

import (
	"fmt"
	"math/rand"
	"path/filepath"
	"testing"

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
// lock, and for Retrieve the result slice).
func BenchmarkRetrieve(b *testing.B) {
	const k = 8
	for _, n := range []int{16, 1024} {
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
