package inferscale

import (
	"encoding/hex"
	"errors"
	"math"
	"path/filepath"
	"sync"
	"testing"
)

func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return dot / math.Sqrt(na*nb)
}

// all-MiniLM-L6-v2 through the binding against sentence-transformers'
// embeddings of the hand-written cases (tests/fixtures/embed/cases.json).
func TestEmbedderGoldens(t *testing.T) {
	e, err := LoadEmbedder(cachePath(t, "minilm"), &EmbedderOptions{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var gold struct {
		Dim          int `json:"dim"`
		MaxSeqLength int `json:"max_seq_length"`
		Cases        []struct {
			Text  string
			Scale float64
			Q     string
		}
	}
	fixture(t, "embed/cases.json", &gold)
	if e.Dim() != gold.Dim || e.MaxSeqLength() != gold.MaxSeqLength {
		t.Fatalf("dim %d max_seq_length %d, want %d %d", e.Dim(), e.MaxSeqLength(), gold.Dim, gold.MaxSeqLength)
	}
	texts := make([]string, len(gold.Cases))
	for i, c := range gold.Cases {
		texts[i] = c.Text
	}
	got, err := e.Embed(texts, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range gold.Cases {
		q, err := hex.DecodeString(c.Q)
		if err != nil || len(q) != e.Dim() {
			t.Fatalf("case %d: bad golden", i)
		}
		want := make([]float32, len(q))
		for k, b := range q {
			want[k] = float32(float64(int8(b)) * c.Scale)
		}
		if cs := cosine(got[i*e.Dim():(i+1)*e.Dim()], want); cs < 0.999 {
			t.Errorf("case %d (%q): cosine %.5f with sentence-transformers", i, c.Text, cs)
		}
	}

	// Concurrent calls on one embedder give the same embeddings.
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			dst := make([]float32, e.Dim())
			if err := e.EmbedInto(dst, texts[w:w+1], nil); err != nil {
				errc <- err
				return
			}
			if cs := cosine(dst, got[w*e.Dim():(w+1)*e.Dim()]); cs < 0.99999 {
				errc <- errors.New("a concurrent embedding differs")
			}
		}(w)
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
}

func TestEmbedderBadInputs(t *testing.T) {
	_, err := LoadEmbedder(filepath.Join(t.TempDir(), "missing"), nil)
	wantCode(t, err, ErrNotFound)
	_, err = LoadEmbedder(cachePath(t, "minilm"), &EmbedderOptions{MaxSeqLength: 1})
	wantCode(t, err, ErrRange)
	e, err := LoadEmbedder(cachePath(t, "minilm"), nil)
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, e.EmbedInto(make([]float32, 3), []string{"a"}, nil), ErrInvalid)
	_, err = e.Embed([]string{"a\x00b"}, nil)
	wantCode(t, err, ErrInvalid)
	// The prompt reaches the library: embedding "a" with the prompt
	// "query: " is embedding "query: a".
	withPrompt, err := e.Embed([]string{"a"}, &EmbedOptions{Prompt: "query: "})
	if err != nil {
		t.Fatal(err)
	}
	joined, err := e.Embed([]string{"query: a", "a"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cosine(withPrompt, joined[:e.Dim()]) < 0.99999 || cosine(withPrompt, joined[e.Dim():]) > 0.999 {
		t.Fatal("the prompt was not prepended")
	}
	e.Close()
	e.Close()
	if _, err := e.Embed([]string{"a"}, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Embed after Close: %v", err)
	}
}
