package inferscale

import (
	"errors"
	"math/rand"
	"path/filepath"
	"testing"
)

// testGeometry is a small f32 model: 2 layers, 2 KV heads of 8 dims with
// partial rotary (6 of 8), 4-float embeddings.
func testGeometry() Geometry {
	g := DefaultGeometry()
	g.Layers, g.KVHeads, g.HeadDim, g.RotaryDim = 2, 2, 8, 6
	g.KVDType = F32
	g.EmbedDim = 4
	return g
}

const testIdentity = "test-model/tokenizer-v1/template-v1"

func createStore(t testing.TB, g Geometry) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "facts.infs")
	s, err := Open(path, &Options{Create: true, Geometry: &g, Identity: testIdentity, Sync: SyncOff})
	if err != nil {
		t.Fatalf("Open(create): %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

// randomFact is a fact of n tokens with random KV (f32) and embedding.
func randomFact(rng *rand.Rand, g Geometry, n int) *Fact {
	f := &Fact{Tokens: make([]int32, n), Embedding: make([]float32, g.EmbedDim)}
	for i := range f.Tokens {
		f.Tokens[i] = rng.Int31n(50000)
	}
	for i := range f.Embedding {
		f.Embedding[i] = float32(rng.NormFloat64())
	}
	per := n * g.KVTokenBytes() / 4
	k, v := make([]float32, per), make([]float32, per)
	for i := range k {
		k[i] = float32(rng.NormFloat64())
		v[i] = float32(rng.NormFloat64())
	}
	f.K, f.V = Float32Bytes(k), Float32Bytes(v)
	return f
}

// wantCode fails unless err is an *Error of code want.
func wantCode(t testing.TB, err error, want Code) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v", want)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *Error", err, err)
	}
	if !errors.Is(err, want) || e.Code != want {
		t.Fatalf("error %q has code %d, want %d (%v)", err, e.Code, want, want)
	}
	if e.Message == "" {
		t.Fatalf("error of code %d has no message", e.Code)
	}
}
