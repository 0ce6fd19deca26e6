package inferscale

import (
	"bufio"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const demoQuestion = "What is the name of Maya's cat?"

// engineSetup loads SmolLM2 and MiniLM, builds a host engine with f16 KV,
// prepares an f16 store and encodes the first n facts of the example memory
// after the engine's header (each fact's rendered text run after the
// header, its own rows of the KV kept; the embedding of the bare text).
func engineSetup(t *testing.T, n int) (*Model, *Embedder, *Engine, *Store, []uint64) {
	t.Helper()
	m, err := LoadModel(cachePath(t, "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	emb, err := LoadEmbedder(cachePath(t, "minilm"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { emb.Close() })
	eng, err := NewEngine(m, EngineOptions{Ctx: 1024, KVDType: F16})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	g, err := m.Geometry(F16)
	if err != nil {
		t.Fatal(err)
	}
	g.EmbedDim = uint32(emb.Dim())
	ident, err := m.Identity(F16)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(filepath.Join(t.TempDir(), "maya.infs"), &Options{Create: true, Geometry: &g, Identity: ident, Sync: SyncOff})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	_, err = eng.Ask(s, emb, "maya", demoQuestion, nil)
	wantCode(t, err, ErrInvalid)
	if !strings.Contains(err.Error(), "infs_engine_prepare on this store first") {
		t.Fatalf("Ask before Prepare: %v", err)
	}
	for i := 0; i < 2; i++ { // once per store
		if err := eng.Prepare(s); err != nil {
			t.Fatal(err)
		}
		if c, err := s.Count(SegmentNamespace); err != nil || c != 2 {
			t.Fatalf("%d segments, %v", c, err)
		}
	}

	f, err := os.Open(filepath.Join("..", "..", "examples", "memory", "facts.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tok, err := m.Tokenizer()
	if err != nil {
		t.Fatal(err)
	}
	header := eng.Header()
	row := int(g.KVHeads*g.HeadDim) * F16.Size()
	var ids []uint64
	for sc := bufio.NewScanner(f); sc.Scan() && len(ids) < n; {
		var line struct{ Text string }
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatal(err)
		}
		rendered, err := RenderFact(line.Text, "")
		if err != nil {
			t.Fatal(err)
		}
		ft, err := tok.Tokenize(rendered, 0)
		if err != nil {
			t.Fatal(err)
		}
		all := append(slices.Clone(header), ft...)
		kv := len(all) * int(g.Layers) * row
		out := &ForwardOutput{K: make([]byte, kv), V: make([]byte, kv)}
		if err := m.Forward(out, all, nil, &ForwardOptions{KVDType: F16}); err != nil {
			t.Fatal(err)
		}
		fact := &Fact{Tokens: ft, Text: rendered}
		for l := 0; l < int(g.Layers); l++ {
			from, to := (l*len(all)+len(header))*row, (l+1)*len(all)*row
			fact.K = append(fact.K, out.K[from:to]...)
			fact.V = append(fact.V, out.V[from:to]...)
		}
		if fact.Embedding, err = emb.Embed([]string{line.Text}, nil); err != nil {
			t.Fatal(err)
		}
		id, err := s.Put("maya", fact)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if len(ids) != n {
		t.Fatalf("%d facts read", len(ids))
	}
	return m, emb, eng, s, ids
}

// The attention calibration reaches the library: the default is 1 and 1;
// FactScaleAuto (1 / sqrt(4 facts)) equals an explicit 0.5 and differs from
// it; a temperature of -1 is refused.
func TestEngineCalibration(t *testing.T) {
	_, _, eng, s, ids := engineSetup(t, 12)
	facts := []uint64{ids[4], ids[1], ids[7], ids[2]}
	ask := func(temp, scale float32) *Answer {
		a, err := eng.Ask(s, nil, "maya", demoQuestion, &AskOptions{FactIDs: facts, MaxTokens: 1,
			FactTemperature: temp, FactScale: scale})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	off, def, half, auto := ask(1, 1), ask(0, 0), ask(1, 0.5), ask(0, FactScaleAuto)
	if !slices.Equal(def.FirstLogits, off.FirstLogits) || !slices.Equal(auto.FirstLogits, half.FirstLogits) ||
		slices.Equal(off.FirstLogits, auto.FirstLogits) {
		t.Fatal("the calibration did not reach the library")
	}
	_, err := eng.Ask(s, nil, "maya", demoQuestion, &AskOptions{FactIDs: facts, FactTemperature: -1})
	if !errors.Is(err, ErrRange) {
		t.Fatalf("a temperature of -1: %v", err)
	}
}

// The demo question on the example memory, by injection and by full
// recompute; a batch equals the questions asked one by one; the options
// reach the library.
func TestEngineSmolLM2(t *testing.T) {
	m, emb, eng, s, ids := engineSetup(t, 12)
	opts := &AskOptions{K: 4, MaxTokens: 24}
	inj, err := eng.Ask(s, emb, "maya", demoQuestion, opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.FullRecompute = true
	full, err := eng.Ask(s, emb, "maya", demoQuestion, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("injection %q (TTFT %.1f ms), full recompute %q (TTFT %.1f ms)", inj.Text, inj.TTFTMs, full.Text, full.TTFTMs)
	if !strings.Contains(inj.Text, "Biscuit") || !strings.Contains(full.Text, "Biscuit") {
		t.Fatalf("answers %q and %q do not name the cat", inj.Text, full.Text)
	}
	// The cat is the fifth line of the memory, the best hit.
	if len(inj.FactIDs) != 4 || inj.FactIDs[0] != ids[4] || !slices.Equal(inj.FactIDs, full.FactIDs) {
		t.Fatalf("facts %v and %v, want 4 starting with %d", inj.FactIDs, full.FactIDs, ids[4])
	}
	if !slices.IsSortedFunc(inj.Scores, func(a, b float32) int { return -cmpFloat(a, b) }) || len(inj.Scores) != 4 {
		t.Fatalf("scores %v", inj.Scores)
	}
	if inj.Prompt != full.Prompt || inj.Prefilled >= 25 || full.Prefilled != full.Prompt { // footer + question
		t.Fatalf("prompt %d/%d, prefilled %d/%d", inj.Prompt, full.Prompt, inj.Prefilled, full.Prefilled)
	}
	if inj.Tokens < 1 || inj.Tokens > 24 || len(inj.FirstLogits) != int(m.Info().Vocab) {
		t.Fatalf("%d tokens, %d logits", inj.Tokens, len(inj.FirstLogits))
	}
	sum := inj.EmbedMs + inj.RetrieveMs + inj.InjectMs + inj.PrefillMs
	if inj.PrefillMs <= 0 || math.Abs(inj.TTFTMs-sum) > 1e-6*sum || inj.DecodeMs < 0 || inj.Recomputable != 0 {
		t.Fatalf("times %+v", inj)
	}

	// Given facts, no embedder: the budget holds, the stop string is cut.
	a, err := eng.Ask(s, nil, "maya", demoQuestion, &AskOptions{FactIDs: ids[4:5], MaxTokens: 3})
	if err != nil || a.Tokens > 3 || !slices.Equal(a.FactIDs, ids[4:5]) || a.Scores[0] != 0 || a.EmbedMs != 0 {
		t.Fatalf("given facts: %+v, %v", a, err)
	}
	a, err = eng.Ask(s, nil, "maya", demoQuestion, &AskOptions{FactIDs: ids[4:5], Stop: "Biscuit"})
	if err != nil || strings.Contains(a.Text, "Biscuit") {
		t.Fatalf("stop: %q, %v", a.Text, err)
	}
	none, err := eng.Ask(s, nil, "maya", demoQuestion, &AskOptions{FactIDs: []uint64{}, MaxTokens: 2})
	if err != nil || len(none.FactIDs) != 0 || none.Prompt >= a.Prompt {
		t.Fatalf("no facts: %+v, %v", none, err)
	}
	a, err = eng.Ask(s, emb, "maya", demoQuestion, &AskOptions{K: 2, MaxTokens: 30, IgnoreEOS: true})
	if err != nil || a.Tokens != 30 {
		t.Fatalf("ignore EOS: %+v, %v", a, err)
	}
	r, err := eng.Ask(s, emb, "maya", demoQuestion, &AskOptions{K: 4, MaxTokens: 1, RecomputeRatio: 0.5, CheckLayer: 2})
	if err != nil || r.Recomputable == 0 || r.Recomputed == 0 || r.Recomputed >= r.Recomputable {
		t.Fatalf("recovery: %+v, %v", r, err)
	}
	sample := &AskOptions{FactIDs: ids[4:5], Temperature: 1, TopP: 0.9, Seed: 5, MaxTokens: 12}
	s1, err1 := eng.Ask(s, nil, "maya", demoQuestion, sample)
	s2, err2 := eng.Ask(s, nil, "maya", demoQuestion, sample)
	if err1 != nil || err2 != nil || s1.Text != s2.Text {
		t.Fatalf("one seed, two answers: %q %q (%v %v)", s1.Text, s2.Text, err1, err2)
	}

	// A batch on the host: as asked one by one.
	qs := []string{demoQuestion, "Where does Maya live?"}
	bopts := &AskOptions{K: 4, MaxTokens: 8}
	many, err := eng.AskBatch(s, emb, "maya", qs, bopts)
	if err != nil || len(many) != 2 {
		t.Fatalf("AskBatch: %d answers, %v", len(many), err)
	}
	for i, q := range qs {
		one, err := eng.Ask(s, emb, "maya", q, bopts)
		if err != nil {
			t.Fatal(err)
		}
		if many[i].Text != one.Text || many[i].Prompt != one.Prompt || !slices.Equal(many[i].FactIDs, one.FactIDs) ||
			!slices.Equal(many[i].FirstLogits, one.FirstLogits) {
			t.Fatalf("question %d: batch %q, alone %q", i, many[i].Text, one.Text)
		}
	}
	if many[0].Text == many[1].Text {
		t.Fatalf("both questions answered %q", many[0].Text)
	}
	if zero, err := eng.AskBatch(s, emb, "maya", nil, nil); err != nil || len(zero) != 0 {
		t.Fatalf("no questions: %v, %v", zero, err)
	}

	// Errors.
	for _, c := range []struct {
		opts *AskOptions
		code Code
		msg  string
	}{
		{&AskOptions{K: 5000}, ErrRange, "k 5000 is above 4096"},
		{&AskOptions{K: -1}, ErrRange, "K -1 is out of range"},
		{&AskOptions{TopP: 2}, ErrRange, "top_p"},
		{&AskOptions{CheckLayer: 30}, ErrRange, "check_layer 30"},
		{&AskOptions{Stop: "a\x00"}, ErrInvalid, "NUL"},
	} {
		_, err := eng.Ask(s, emb, "maya", demoQuestion, c.opts)
		wantCode(t, err, c.code)
		if !strings.Contains(err.Error(), c.msg) {
			t.Fatalf("%+v: %v, want %q", c.opts, err, c.msg)
		}
	}
	_, err = eng.Ask(s, nil, "maya", demoQuestion, nil)
	wantCode(t, err, ErrInvalid) // no embedder to retrieve with
	_, err = eng.AskBatch(s, emb, "maya", []string{"ok", "a\x00b"}, nil)
	wantCode(t, err, ErrInvalid)
	other, _ := createStore(t, testGeometry())
	_, err = eng.Ask(other, emb, "maya", demoQuestion, nil)
	wantCode(t, err, ErrInvalid) // not prepared on this store
	other.Close()
	_, err = eng.Ask(other, emb, "maya", demoQuestion, nil)
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("closed store: %v", err)
	}

	// The system prompt changes the header.
	fr, err := NewEngine(m, EngineOptions{Ctx: 256, System: "Answer in French."})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(fr.Header(), eng.Header()) {
		t.Fatal("the system prompt did not change the header")
	}
	fr.Close()
	fr.Close()
	if err := fr.Prepare(s); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed engine: %v", err)
	}
}

func cmpFloat(a, b float32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// RenderFact is the prompt's fact template.
func TestRenderFact(t *testing.T) {
	for _, c := range []struct{ text, meta, want string }{
		{"Maya has a cat.", "", "- Maya has a cat.\n"},
		{"Maya has a cat.", `{"speaker": "Maya", "date": "5 March 2026", "x": "y"}`, "- (5 March 2026) Maya: Maya has a cat.\n"},
		{"t", `{"speaker": "Tomas"}`, "- Tomas: t\n"},
	} {
		if got, err := RenderFact(c.text, c.meta); err != nil || got != c.want {
			t.Fatalf("RenderFact(%q, %q) = %q, %v; want %q", c.text, c.meta, got, err, c.want)
		}
	}
	_, err := RenderFact("a\x00b", "")
	wantCode(t, err, ErrInvalid)
}

// An engine keeps its model's memory: the model closed first still answers
// through the engine, and is released with the engine. Device 0 without a
// GPU (or without CUDA) is the library's error.
func TestEngineLifetimeAndDevice(t *testing.T) {
	m := tinyModel(t)
	if _, err := NewEngine(m, EngineOptions{Ctx: 64}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("a model without a tokenizer: %v", err) // the tiny model has none
	}
	sm, err := LoadModel(cachePath(t, "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"), &ModelOptions{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewEngine(sm, EngineOptions{Ctx: 256})
	if err != nil {
		t.Fatal(err)
	}
	g, err := sm.Geometry(F32)
	if err != nil {
		t.Fatal(err)
	}
	g.EmbedDim = 4
	ident, err := sm.Identity(F32)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(filepath.Join(t.TempDir(), "s.infs"), &Options{Create: true, Geometry: &g, Identity: ident, Sync: SyncOff})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sm.Close()
	if _, err := NewEngine(sm, EngineOptions{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("NewEngine on a closed model: %v", err)
	}
	if _, err := sm.Geometry(F32); !errors.Is(err, ErrClosed) {
		t.Fatalf("Geometry on a closed model: %v", err)
	}
	// The engine still runs its model: segments encoded, a question answered.
	if err := e.Prepare(s); err != nil {
		t.Fatal(err)
	}
	a, err := e.Ask(s, nil, "nobody", "Hello?", &AskOptions{FactIDs: []uint64{}, MaxTokens: 2})
	if err != nil || a.Tokens == 0 || a.Prompt <= uint32(len(e.Header())) {
		t.Fatalf("after the model's Close: %+v, %v", a, err)
	}
	e.Close()
	wrong, _ := createStore(t, testGeometry())
	if err := e.Prepare(wrong); !errors.Is(err, ErrClosed) {
		t.Fatalf("Prepare on a closed engine: %v", err)
	}

	dm, err := LoadModel(cachePath(t, "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"), &ModelOptions{UseDevice: true, Device: 0})
	if err == nil {
		dm.Close()
		t.Skip("a CUDA device is present: the device engine is tested by the C gpu suite")
	}
	var ie *Error
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "device") {
		t.Fatalf("device 0: %v", err)
	}
	if !LibraryFeatures().CUDA {
		wantCode(t, err, ErrUnsupported)
	}
	sm2, err := LoadModel(cachePath(t, "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sm2.Close()
	_, err = NewEngine(sm2, EngineOptions{UseDevice: true, Device: 0})
	if err == nil || !strings.Contains(err.Error(), "device 0") {
		t.Fatalf("a device engine over a host model: %v", err)
	}
}
