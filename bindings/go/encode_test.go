package inferscale

import (
	"bytes"
	"path/filepath"
	"slices"
	"testing"
)

// encodeSetup loads SmolLM2 and MiniLM and creates an f16 store for them.
func encodeSetup(t *testing.T) (*Model, *Embedder, *Store) {
	t.Helper()
	m, err := LoadModel(cachePath(t, "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	e, err := LoadEmbedder(cachePath(t, "minilm"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	g, err := m.Geometry(F16)
	if err != nil {
		t.Fatal(err)
	}
	g.EmbedDim = uint32(e.Dim())
	ident, err := m.Identity(F16)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(filepath.Join(t.TempDir(), "encode.infs"), &Options{Create: true, Geometry: &g, Identity: ident, Sync: SyncOff})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return m, e, s
}

// Encode stores each fact with the model's own KV and the embedder's
// embedding, and reports its progress after every fact stored.
func TestEncodeProgress(t *testing.T) {
	m, e, s := encodeSetup(t)
	texts := []string{"Alice has a dog.", "Bob plays chess.", "Carol lives in Oslo."}
	facts := make([]FactInput, len(texts))
	for i, text := range texts {
		facts[i] = FactInput{Text: text, Metadata: `{"turn":1}`, SourceID: uint64(7 + i)}
	}
	var calls [][2]int
	ids, err := s.Encode("alice", m, facts, &EncodeOptions{Embedder: e, Progress: func(done, total int) bool {
		calls = append(calls, [2]int{done, total})
		return true
	}})
	if err != nil {
		t.Fatal(err)
	}
	if want := [][2]int{{1, 3}, {2, 3}, {3, 3}}; !slices.Equal(calls, want) {
		t.Fatalf("progress calls %v, want %v", calls, want)
	}
	if len(ids) != 3 || ids[0] == 0 || ids[0] == ids[1] || ids[1] == ids[2] {
		t.Fatalf("ids %v", ids)
	}

	// The stored KV is the model's (no context: Forward of the text alone),
	// the embedding the embedder's of the text.
	tok, err := m.Tokenizer()
	if err != nil {
		t.Fatal(err)
	}
	toks, err := tok.Tokenize(texts[1], 0)
	if err != nil {
		t.Fatal(err)
	}
	g := s.Geometry()
	kv := len(toks) * g.KVTokenBytes()
	out := &ForwardOutput{K: make([]byte, kv), V: make([]byte, kv)}
	if err := m.Forward(out, toks, nil, &ForwardOptions{KVDType: F16}); err != nil {
		t.Fatal(err)
	}
	emb, err := e.Embed(texts[1:2], nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := s.Get("alice", ids[1])
	if err != nil {
		t.Fatal(err)
	}
	if f.Text != texts[1] || f.Metadata != `{"turn":1}` || f.SourceID != 8 || !slices.Equal(f.Tokens, toks) ||
		!bytes.Equal(f.K, out.K) || !bytes.Equal(f.V, out.V) || cosine(f.Embedding, emb) < 0.9999 {
		t.Fatalf("fact %d stored as text %q, metadata %q, source %d, tokens %v (want %v), same K %v, same V %v",
			ids[1], f.Text, f.Metadata, f.SourceID, f.Tokens, toks, bytes.Equal(f.K, out.K), bytes.Equal(f.V, out.V))
	}

	// Returning false stops after that fact: it stays stored, the rest
	// are not.
	ids, err = s.Encode("bob", m, facts, &EncodeOptions{Embedder: e, Progress: func(done, total int) bool { return done < 1 }})
	wantCode(t, err, ErrCanceled)
	if len(ids) != 3 || ids[0] == 0 || ids[1] != 0 || ids[2] != 0 {
		t.Fatalf("ids after cancel %v", ids)
	}
	if n, err := s.Count("bob"); err != nil || n != 1 {
		t.Fatalf("bob has %d facts after cancel (%v)", n, err)
	}

	// A panic in the callback stops the encoding and comes out of Encode.
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v, want the callback's panic", r)
			}
		}()
		s.Encode("carol", m, facts[:2], &EncodeOptions{Embedder: e, Progress: func(int, int) bool { panic("boom") }})
		t.Fatal("Encode returned after the callback panicked")
	}()
	if n, err := s.Count("carol"); err != nil || n != 1 {
		t.Fatalf("carol has %d facts after the panic (%v)", n, err)
	}
}

// Bad input is refused before anything is stored.
func TestEncodeErrors(t *testing.T) {
	m, e, s := encodeSetup(t)
	_, err := s.Encode("u", m, []FactInput{{Text: "a", Embedding: []float32{1, 2}}}, nil)
	wantCode(t, err, ErrInvalid)
	_, err = s.Encode("u", m, []FactInput{{Text: "a\x00b"}}, &EncodeOptions{Embedder: e})
	wantCode(t, err, ErrInvalid)
	// No embedder and no embedding: the library's error.
	_, err = s.Encode("u", m, []FactInput{{Text: "a"}}, nil)
	wantCode(t, err, ErrInvalid)
	_, err = s.Encode(ReservedPrefix+"x", m, []FactInput{{Text: "a"}}, &EncodeOptions{Embedder: e})
	wantCode(t, err, ErrInvalid)
	if n, err := s.Count("u"); err != nil || n != 0 {
		t.Fatalf("%d facts stored by failed calls (%v)", n, err)
	}
	m.Close()
	_, err = s.Encode("u", m, []FactInput{{Text: "a"}}, &EncodeOptions{Embedder: e})
	wantCode(t, err, ErrInvalid)
}
