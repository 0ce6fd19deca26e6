package inferscale_test

// The examples of docs/go.md, compiled here; TestDocsExamples checks that
// the document shows exactly these bodies. They have no Output comment, so
// go test compiles them without running them (they need the models).

import (
	"errors"
	"fmt"
	"log"
	"os"

	inferscale "github.com/inferscale/inferscale/bindings/go"
	"github.com/inferscale/inferscale/bindings/go/memory"
)

func ExampleStore_Put() {
	g := inferscale.DefaultGeometry()
	g.Layers, g.KVHeads, g.HeadDim, g.RotaryDim, g.EmbedDim = 30, 3, 64, 64, 384
	s, err := inferscale.Open("memory.infs", &inferscale.Options{Create: true, Geometry: &g, Identity: "my-model/f16"})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	// A fact: its tokens, embedding (EmbedDim floats), and pre-RoPE K and V
	// in the store's KV dtype, [layers][tokens][kv heads][head dim].
	toks := []int32{3, 1, 4}
	emb := make([]float32, g.EmbedDim)
	emb[0] = 1
	k := make([]byte, len(toks)*g.KVTokenBytes())
	v := make([]byte, len(toks)*g.KVTokenBytes())
	id, err := s.Put("alice", &inferscale.Fact{Tokens: toks, Embedding: emb, K: k, V: v, Text: "Alice has a dog."})
	if err != nil {
		log.Fatal(err)
	}
	hits, err := s.Retrieve("alice", emb, 4, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("fact", id, "best hit", hits[0].ID)

	// 64 blocks of 16 tokens; the fact's 3 tokens go to block 5.
	cache, err := inferscale.NewHostCache(inferscale.FormatVLLM, inferscale.F16, g.Layers, g.KVHeads, g.HeadDim, 64, 16)
	if err != nil {
		log.Fatal(err)
	}
	defer cache.Close()
	next, err := s.Inject("alice", []uint64{hits[0].ID}, 0, []int32{5}, cache.Layout(), nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("the question starts at position", next)
}

func ExampleModel_Forward() {
	m, err := inferscale.LoadModel(os.ExpandEnv("$HOME/.cache/inferscale/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	e, err := inferscale.LoadEmbedder(os.ExpandEnv("$HOME/.cache/inferscale/minilm"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()
	g, err := m.Geometry(inferscale.F16)
	if err != nil {
		log.Fatal(err)
	}
	g.EmbedDim = uint32(e.Dim()) // Dim is an int, EmbedDim a uint32
	ident, err := m.Identity(inferscale.F16)
	if err != nil {
		log.Fatal(err)
	}
	s, err := inferscale.Open("memory.infs", &inferscale.Options{Create: true, Geometry: &g, Identity: ident})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	text := "Alice has a dog named Rex."
	tok, err := m.Tokenizer()
	if err != nil {
		log.Fatal(err)
	}
	ids, err := tok.Tokenize(text, 0)
	if err != nil {
		log.Fatal(err)
	}
	kv := len(ids) * g.KVTokenBytes()
	out := &inferscale.ForwardOutput{K: make([]byte, kv), V: make([]byte, kv)}
	if err := m.Forward(out, ids, nil, &inferscale.ForwardOptions{KVDType: inferscale.F16}); err != nil {
		log.Fatal(err)
	}
	emb, err := e.Embed([]string{text}, nil)
	if err != nil {
		log.Fatal(err)
	}
	id, err := s.Put("alice", &inferscale.Fact{Tokens: ids, Embedding: emb, K: out.K, V: out.V, Text: text})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("stored fact", id)
}

func ExampleEngine_Ask() {
	m, err := inferscale.LoadModel(os.ExpandEnv("$HOME/.cache/inferscale/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	e, err := inferscale.LoadEmbedder(os.ExpandEnv("$HOME/.cache/inferscale/minilm"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()
	g, err := m.Geometry(inferscale.F16)
	if err != nil {
		log.Fatal(err)
	}
	g.EmbedDim = uint32(e.Dim())
	ident, err := m.Identity(inferscale.F16)
	if err != nil {
		log.Fatal(err)
	}
	s, err := inferscale.Open("memory.infs", &inferscale.Options{Create: true, Geometry: &g, Identity: ident})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	eng, err := inferscale.NewEngine(m, inferscale.EngineOptions{KVDType: inferscale.F16})
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	if err := eng.Prepare(s); err != nil { // the header and footer segments, once per store
		log.Fatal(err)
	}

	// Facts encoded as the engine reads them: rendered, after its header.
	tok, err := m.Tokenizer()
	if err != nil {
		log.Fatal(err)
	}
	var facts []inferscale.FactInput
	for _, text := range []string{"Maya has a cat named Biscuit.", "Maya works as a nurse."} {
		rendered, err := inferscale.RenderFact(text, "")
		if err != nil {
			log.Fatal(err)
		}
		toks, err := tok.Tokenize(rendered, 0)
		if err != nil {
			log.Fatal(err)
		}
		facts = append(facts, inferscale.FactInput{Text: text, Tokens: toks})
	}
	ids, err := s.Encode("maya", m, facts, &inferscale.EncodeOptions{
		Context:  eng.Header(),
		Embedder: e,
		Progress: func(done, total int) bool {
			fmt.Printf("\rencoded %d/%d", done, total)
			return true // false stops: ErrCanceled
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("\nfacts", ids)

	a, err := eng.Ask(s, e, "maya", "What is the name of Maya's cat?", &inferscale.AskOptions{K: 4})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(a.Text, a.FactIDs, a.TTFTMs) // "Maya's cat is Biscuit." [3 4] ...
	full, err := eng.Ask(s, e, "maya", "Where does Maya work?", &inferscale.AskOptions{K: 4, FullRecompute: true})
	if err != nil {
		log.Fatal(err)
	}
	answers, err := eng.AskBatch(s, e, "maya", []string{"Who is Biscuit?", "What is Maya's job?"}, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(full.Text, answers[0].Text, answers[1].Text)
}

func ExampleEngine_AskBatch() {
	// On a GPU: the model loaded on device 0, the engine's cache there.
	m, err := inferscale.LoadModel(os.ExpandEnv("$HOME/.cache/inferscale/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),
		&inferscale.ModelOptions{UseDevice: true, Device: 0})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	e, err := inferscale.LoadEmbedder(os.ExpandEnv("$HOME/.cache/inferscale/minilm"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()
	s, err := inferscale.Open("memory.infs", nil) // made for this model, facts encoded
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	eng, err := inferscale.NewEngine(m, inferscale.EngineOptions{KVDType: s.Geometry().KVDType, UseDevice: true, Device: 0, MaxSeqs: 32})
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	if err := eng.Prepare(s); err != nil {
		log.Fatal(err)
	}
	questions := []string{"What is the name of Maya's cat?", "Where does Maya work?"}
	answers, err := eng.AskBatch(s, e, "maya", questions, &inferscale.AskOptions{K: 10})
	if err != nil {
		log.Fatal(err)
	}
	for i, a := range answers {
		fmt.Println(questions[i], a.Text)
	}
}

func ExampleError() {
	s, err := inferscale.Open("memory.infs", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	_, err = s.Get("bob", 42)
	if errors.Is(err, inferscale.ErrNotFound) { // ErrInvalid, ErrMismatch, ErrBusy, ErrRange, ErrReadOnly, ...
		fmt.Println("no such fact")
	}
	var e *inferscale.Error
	if errors.As(err, &e) {
		log.Printf("code %d: %s", e.Code, e.Message)
	}
}

func Example_memory() {
	m, err := memory.Open("alice.infs", nil) // created if absent; SmolLM2 and MiniLM from the cache
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Add("Maya has a cat named Biscuit.", "Maya lives in Lisbon."); err != nil {
		log.Fatal(err)
	}
	hits, err := m.Search("What pet does Maya have?", 3)
	if err != nil {
		log.Fatal(err)
	}
	a, err := m.Ask("What is the name of Maya's cat?", nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(hits[0].Text, "/", a.Text) // Maya has a cat named Biscuit. / Maya's cat is named Biscuit.
}
