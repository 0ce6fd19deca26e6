package inferscale

import (
	"errors"
	"math"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
)

// tinyModel is the tiny random Llama of the C tests' fixtures (2 layers, 2
// KV heads of 16 dims, 128 tokens of vocabulary).
func tinyModel(t *testing.T) *Model {
	t.Helper()
	m, err := LoadModel(filepath.Join("..", "..", "tests", "fixtures", "model", "llama"), &ModelOptions{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// Facts computed by the model through Go, stored, injected into a paged
// cache and attended to give the logits of running the whole text at once:
// the library's promise, end to end through the binding.
func TestModelForwardWithInjectedFacts(t *testing.T) {
	m := tinyModel(t)
	info := m.Info()
	if info.Architecture != "llama" || info.Layers != 2 || info.KVHeads != 2 || info.HeadDim != 16 || info.Vocab != 128 {
		t.Fatalf("Info = %+v", info)
	}
	g, err := m.Geometry(F32)
	if err != nil {
		t.Fatal(err)
	}
	if g.Layers != 2 || g.KVHeads != 2 || g.HeadDim != 16 || g.KVDType != F32 || g.EmbedDim != 0 {
		t.Fatalf("Geometry = %+v", g)
	}
	ident, err := m.Identity(F32)
	if err != nil || ident == "" {
		t.Fatalf("Identity = %q, %v", ident, err)
	}
	g.EmbedDim = 4
	path := filepath.Join(t.TempDir(), "m.infs")
	s, err := Open(path, &Options{Create: true, Geometry: &g, Identity: ident, Sync: SyncOff})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	text := []int32{5, 17, 99, 3, 42, 7, 64, 11, 23}
	full := make([]float32, info.Vocab)
	if err := m.Forward(&ForwardOutput{Logits: full}, text, nil, nil); err != nil {
		t.Fatal(err)
	}

	// The first five tokens become a fact: their pre-RoPE KV from Forward,
	// stored, then injected into a paged cache with a scattered block table.
	fact := text[:5]
	kvBytes := len(fact) * g.KVTokenBytes()
	out := &ForwardOutput{K: make([]byte, kvBytes), V: make([]byte, kvBytes)}
	if err := m.Forward(out, fact, nil, nil); err != nil {
		t.Fatal(err)
	}
	id, err := s.Put("u", &Fact{Tokens: fact, Embedding: []float32{1, 0, 0, 0}, K: out.K, V: out.V})
	if err != nil {
		t.Fatal(err)
	}
	cache, err := NewHostCache(FormatNHD, F32, g.Layers, g.KVHeads, g.HeadDim, 8, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	table := []int32{6, 1, 3}
	next, err := s.Inject("u", []uint64{id}, 0, table, cache.Layout(), nil)
	if err != nil || next != uint32(len(fact)) {
		t.Fatalf("Inject = %d, %v", next, err)
	}

	// The question alone, attending to the injected fact, gives the logits
	// of the whole text.
	question := text[len(fact):]
	pos := make([]int32, len(question))
	for i := range pos {
		pos[i] = int32(next) + int32(i)
	}
	got := make([]float32, info.Vocab)
	err = m.Forward(&ForwardOutput{Logits: got}, question, pos,
		&ForwardOptions{Cache: cache.Layout(), BlockTable: table, Past: next})
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if math.Abs(float64(got[i]-full[i])) > 1e-4*(1+math.Abs(float64(full[i]))) {
			t.Fatalf("logit %d: %v with the injected fact, %v for the whole text", i, got[i], full[i])
		}
	}
}

// DeviceWeights reaches the library: fp8 is the device copy's dtype, so
// without UseDevice the library refuses it (before reading the path), as it
// does a dtype other than bf16 and fp8; BF16, and the zero value, load the
// host model as before.
func TestModelDeviceWeights(t *testing.T) {
	tiny := filepath.Join("..", "..", "tests", "fixtures", "model", "llama")
	_, err := LoadModel(tiny, &ModelOptions{DeviceWeights: FP8E4M3})
	wantCode(t, err, ErrInvalid)
	if !strings.Contains(err.Error(), "device_weights fp8") {
		t.Fatalf("fp8 without a device: %v", err)
	}
	_, err = LoadModel(filepath.Join(t.TempDir(), "missing"), &ModelOptions{DeviceWeights: FP8E4M3})
	wantCode(t, err, ErrInvalid)
	_, err = LoadModel(tiny, &ModelOptions{DeviceWeights: F16})
	wantCode(t, err, ErrInvalid)
	if !strings.Contains(err.Error(), "device_weights 1 is not") {
		t.Fatalf("f16 device weights: %v", err)
	}
	for _, w := range []DType{BF16, F32} {
		m, err := LoadModel(tiny, &ModelOptions{Threads: 1, DeviceWeights: w})
		if err != nil {
			t.Fatalf("DeviceWeights %v on the host: %v", w, err)
		}
		m.Close()
	}
}

func TestModelBadInputs(t *testing.T) {
	_, err := LoadModel(filepath.Join(t.TempDir(), "missing"), nil)
	wantCode(t, err, ErrNotFound)
	m := tinyModel(t)
	tokens := []int32{1, 2, 3}
	err = m.Forward(&ForwardOutput{Logits: make([]float32, 5)}, tokens, nil, nil)
	wantCode(t, err, ErrInvalid)
	err = m.Forward(&ForwardOutput{Logits: make([]float32, 128)}, tokens, nil, &ForwardOptions{AllLogits: true})
	wantCode(t, err, ErrInvalid)
	err = m.Forward(&ForwardOutput{K: make([]byte, 8)}, tokens, nil, nil)
	wantCode(t, err, ErrInvalid)
	err = m.Forward(nil, tokens, []int32{0, 1}, nil)
	wantCode(t, err, ErrInvalid)
	err = m.Forward(nil, []int32{1, 500}, nil, nil)
	wantCode(t, err, ErrRange) // a token id beyond the vocabulary
	err = m.Forward(nil, nil, nil, nil)
	wantCode(t, err, ErrInvalid) // no tokens
	all := make([]float32, 3*128)
	if err := m.Forward(&ForwardOutput{Logits: all}, tokens, nil, &ForwardOptions{AllLogits: true}); err != nil {
		t.Fatal(err)
	}
	m.Close()
	m.Close()
	if err := m.Forward(nil, tokens, nil, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Forward after Close: %v", err)
	}
	if _, err := m.Geometry(F16); !errors.Is(err, ErrClosed) {
		t.Fatalf("Geometry after Close: %v", err)
	}
}

// Two facts encoded in one call as independent sequences give the KV of two
// calls of their own.
func TestModelForwardSequences(t *testing.T) {
	m := tinyModel(t)
	g, err := m.Geometry(F32)
	if err != nil {
		t.Fatal(err)
	}
	a, b := []int32{4, 8, 15}, []int32{16, 23, 42, 99}
	single := func(toks []int32) *ForwardOutput {
		n := len(toks) * g.KVTokenBytes()
		out := &ForwardOutput{K: make([]byte, n), V: make([]byte, n)}
		if err := m.Forward(out, toks, nil, nil); err != nil {
			t.Fatal(err)
		}
		return out
	}
	wa, wb := single(a), single(b)
	toks := append(append([]int32{}, a...), b...)
	pos := []int32{0, 1, 2, 0, 1, 2, 3}
	seq := []int32{0, 0, 0, 1, 1, 1, 1}
	n := len(toks) * g.KVTokenBytes()
	out := &ForwardOutput{K: make([]byte, n), V: make([]byte, n)}
	if err := m.Forward(out, toks, pos, &ForwardOptions{SeqIDs: seq}); err != nil {
		t.Fatal(err)
	}
	// Both layouts are [layers][tokens][heads][dim]: compare layer by layer.
	row := int(g.KVHeads*g.HeadDim) * 4
	for l := 0; l < int(g.Layers); l++ {
		for _, c := range []struct {
			got, want []byte
			off, n    int
		}{{out.K, wa.K, 0, len(a)}, {out.K, wb.K, len(a), len(b)}, {out.V, wa.V, 0, len(a)}, {out.V, wb.V, len(a), len(b)}} {
			got := c.got[(l*len(toks)+c.off)*row : (l*len(toks)+c.off+c.n)*row]
			want := c.want[l*c.n*row : (l+1)*c.n*row]
			if !closeF32(got, want) {
				t.Fatalf("layer %d: a sequence's KV differs from its own call's", l)
			}
		}
	}
	err = m.Forward(out, toks, pos, &ForwardOptions{SeqIDs: seq[:3]})
	wantCode(t, err, ErrInvalid)
}

// Forward on one model from many goroutines at once, and Close racing them.
func TestModelConcurrentForward(t *testing.T) {
	m := tinyModel(t)
	tokens := []int32{3, 1, 4, 1, 5, 9, 2, 6}
	want := make([]float32, m.Info().Vocab)
	if err := m.Forward(&ForwardOutput{Logits: want}, tokens, nil, nil); err != nil {
		t.Fatal(err)
	}
	const workers = 6
	var calls atomic.Int64
	errc := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func() {
			got := make([]float32, len(want))
			for {
				err := m.Forward(&ForwardOutput{Logits: got}, tokens, nil, nil)
				if errors.Is(err, ErrClosed) {
					errc <- nil
					return
				}
				if err != nil {
					errc <- err
					return
				}
				for j := range got {
					if got[j] != want[j] {
						errc <- errors.New("concurrent Forward calls disagree")
						return
					}
				}
				calls.Add(1)
			}
		}()
	}
	for calls.Load() < 4*workers && len(errc) == 0 {
		runtime.Gosched()
	}
	m.Close()
	for w := 0; w < workers; w++ {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
}
