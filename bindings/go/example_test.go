package inferscale_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	inferscale "github.com/inferscale/inferscale/bindings/go"
)

// A store for a 2-layer model with 3-float embeddings: put a user's facts,
// retrieve the best one for a question, and inject it into a paged KV cache.
func Example() {
	dir, err := os.MkdirTemp("", "inferscale-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	g := inferscale.DefaultGeometry()
	g.Layers, g.KVHeads, g.HeadDim, g.RotaryDim = 2, 1, 4, 4
	g.KVDType, g.EmbedDim = inferscale.F32, 3
	s, err := inferscale.Open(filepath.Join(dir, "memory.infs"),
		&inferscale.Options{Create: true, Geometry: &g, Identity: "example-model"})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	facts := []struct {
		text string
		emb  []float32
	}{
		{"Alice has a dog named Rex.", []float32{1, 0, 0}},
		{"Alice works as a nurse.", []float32{0, 1, 0}},
	}
	for i, f := range facts {
		tokens := []int32{int32(10 + i), int32(20 + i)}
		kv := make([]float32, len(tokens)*g.KVTokenBytes()/4) // the model's pre-RoPE K and V
		for j := range kv {
			kv[j] = float32(j%7) / 7
		}
		if _, err := s.Put("alice", &inferscale.Fact{Tokens: tokens, Embedding: f.emb,
			K: inferscale.Float32Bytes(kv), V: inferscale.Float32Bytes(kv), Text: f.text}); err != nil {
			log.Fatal(err)
		}
	}

	hits, err := s.Retrieve("alice", []float32{0.2, 0.9, 0}, 1, nil)
	if err != nil {
		log.Fatal(err)
	}
	best, err := s.Get("alice", hits[0].ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("best fact: %q (score %.3f)\n", best.Text, hits[0].Score)

	cache, err := inferscale.NewHostCache(inferscale.FormatVLLM, inferscale.F16, g.Layers, g.KVHeads, g.HeadDim, 4, 16)
	if err != nil {
		log.Fatal(err)
	}
	defer cache.Close()
	next, err := s.Inject("alice", []uint64{hits[0].ID}, 0, []int32{2}, cache.Layout(), nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("the question starts at position", next)

	_, err = s.Get("bob", hits[0].ID)
	fmt.Println("bob sees it:", err)
	// Output:
	// best fact: "Alice works as a nurse." (score 0.976)
	// the question starts at position 2
	// bob sees it: inferscale: infs_fact_get: no fact 2 in namespace "bob"
}
