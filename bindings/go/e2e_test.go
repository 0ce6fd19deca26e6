package inferscale

import (
	"math"
	"path/filepath"
	"testing"
)

// The whole path through the binding with the real models: SmolLM2 encodes
// each fact's KV, MiniLM its embedding; the question retrieves the right
// fact, which is injected into a paged cache, and the question run against
// that cache gives the logits of running fact and question as one text.
func TestEndToEndSmolLM2(t *testing.T) {
	m, err := LoadModel(cachePath(t, "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tok, err := m.Tokenizer()
	if err != nil {
		t.Fatal(err)
	}
	e, err := LoadEmbedder(cachePath(t, "minilm"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()

	g, err := m.Geometry(F32)
	if err != nil {
		t.Fatal(err)
	}
	if g.Layers != 30 || g.KVHeads != 3 || g.HeadDim != 64 {
		t.Fatalf("SmolLM2 geometry %+v", g)
	}
	g.EmbedDim = uint32(e.Dim())
	ident, err := m.Identity(F32)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(filepath.Join(t.TempDir(), "e2e.infs"), &Options{Create: true, Geometry: &g, Identity: ident, Sync: SyncOff})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	facts := []string{
		"Alice adopted a beagle named Biscuit last spring.",
		"Alice works night shifts as a nurse in Lisbon.",
		"Alice is learning to play the cello.",
	}
	embs, err := e.Embed(facts, nil)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]uint64, len(facts))
	tokens := make([][]int32, len(facts))
	for i, text := range facts {
		if tokens[i], err = tok.Tokenize(text, 0); err != nil {
			t.Fatal(err)
		}
		kv := len(tokens[i]) * g.KVTokenBytes()
		out := &ForwardOutput{K: make([]byte, kv), V: make([]byte, kv)}
		if err := m.Forward(out, tokens[i], nil, nil); err != nil {
			t.Fatal(err)
		}
		if ids[i], err = s.Put("alice", &Fact{Tokens: tokens[i], Embedding: embs[i*e.Dim() : (i+1)*e.Dim()],
			K: out.K, V: out.V, Text: text}); err != nil {
			t.Fatal(err)
		}
	}

	question := " What is the name of Alice's dog?"
	q, err := e.Embed([]string{question}, nil)
	if err != nil {
		t.Fatal(err)
	}
	hits, err := s.Retrieve("alice", q, 1, nil)
	if err != nil || len(hits) != 1 || hits[0].ID != ids[0] {
		t.Fatalf("Retrieve = %+v, %v; want fact %d", hits, err, ids[0])
	}

	cache, err := NewHostCache(FormatVLLM, F32, g.Layers, g.KVHeads, g.HeadDim, 16, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	table := []int32{9, 4}
	next, err := s.Inject("alice", []uint64{hits[0].ID}, 0, table, cache.Layout(), nil)
	if err != nil || int(next) != len(tokens[0]) {
		t.Fatalf("Inject = %d, %v", next, err)
	}
	qtok, err := tok.Tokenize(question, 0)
	if err != nil {
		t.Fatal(err)
	}
	pos := make([]int32, len(qtok))
	for i := range pos {
		pos[i] = int32(next) + int32(i)
	}
	vocab := m.Info().Vocab
	got := make([]float32, vocab)
	if err := m.Forward(&ForwardOutput{Logits: got}, qtok, pos,
		&ForwardOptions{Cache: cache.Layout(), BlockTable: table, Past: next}); err != nil {
		t.Fatal(err)
	}
	want := make([]float32, vocab)
	whole := append(append([]int32{}, tokens[0]...), qtok...)
	if err := m.Forward(&ForwardOutput{Logits: want}, whole, nil, nil); err != nil {
		t.Fatal(err)
	}
	worst, argGot, argWant := 0.0, 0, 0
	for i := range got {
		worst = math.Max(worst, math.Abs(float64(got[i]-want[i])))
		if got[i] > got[argGot] {
			argGot = i
		}
		if want[i] > want[argWant] {
			argWant = i
		}
	}
	t.Logf("largest logit difference %g", worst)
	if worst > 1e-3 || argGot != argWant {
		t.Fatalf("logits with the injected fact differ from the whole text's by up to %g (argmax %d vs %d)",
			worst, argGot, argWant)
	}
}

// Int8Activations reaches the library: one-token calls on SmolLM2 (Q4_1
// matrices) give logits moved from the default's, within llama.cpp's
// criterion for quantized products (NMSE <= 4e-3, as the C test bounds it).
func TestInt8ActivationsSmolLM2(t *testing.T) {
	path := cachePath(t, "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
	f32, err := LoadModel(path, &ModelOptions{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer f32.Close()
	q8, err := LoadModel(path, &ModelOptions{Threads: 2, Int8Activations: true})
	if err != nil {
		t.Fatal(err)
	}
	defer q8.Close()
	n := f32.Info().Vocab
	for _, tok := range []int32{28, 1234, 9907} {
		want, got := make([]float32, n), make([]float32, n)
		if err := f32.Forward(&ForwardOutput{Logits: want}, []int32{tok}, nil, nil); err != nil {
			t.Fatal(err)
		}
		if err := q8.Forward(&ForwardOutput{Logits: got}, []int32{tok}, nil, nil); err != nil {
			t.Fatal(err)
		}
		var num, den float64
		for i := range want {
			d := float64(got[i] - want[i])
			num += d * d
			den += float64(want[i]) * float64(want[i])
		}
		if nmse := num / den; !(nmse > 0 && nmse <= 4e-3) {
			t.Fatalf("token %d: NMSE %g between 8-bit and f32 activations", tok, nmse)
		}
	}
}
