package inferscale

/*
#include <inferscale/inferscale.h>
*/
import "C"

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"
)

// ModelOptions are how LoadModel loads a model; nil or the zero value uses
// every core of the machine, on the host only.
type ModelOptions struct {
	Threads int // threads of the forward pass; 0: the machine's cores

	// Int8Activations runs products of few tokens (decoding, calls of 2-4
	// tokens) over Q4_0 / Q4_1 / Q8_0 matrices on activations rounded to 8
	// bits, as llama.cpp does: faster, the logits moved by an NMSE of about
	// 1e-3 (docs/model-runtime.md).
	Int8Activations bool

	// UseDevice also uploads the weights to CUDA device Device in bf16, for
	// an Engine there, using at most DeviceBudget bytes of its memory (0: no
	// limit), with a workspace for DeviceMaxTokens tokens per forward call
	// (0: 512). A build without CUDA fails with ErrUnsupported.
	UseDevice       bool
	Device          int
	DeviceBudget    uint64
	DeviceMaxTokens uint32

	// DeviceWeights is the dtype of the device copy's matrices: BF16 (the
	// default; the zero value, F32, means it too) or FP8E4M3 (e4m3 with a
	// scale per row, half the bytes, Hopper's fp8 GEMMs;
	// docs/model-runtime.md). FP8E4M3 needs UseDevice (ErrInvalid without)
	// and a device of compute capability 8.9 or above (ErrUnsupported).
	DeviceWeights DType
}

// ModelInfo describes a loaded model.
type ModelInfo struct {
	Architecture  string // "llama", "mistral", "qwen2", "qwen3"
	Vocab         uint32
	Embd          uint32
	Layers        uint32
	Heads         uint32
	KVHeads       uint32
	HeadDim       uint32
	FF            uint32
	CtxTrain      uint32 // context length the model was trained for
	SlidingWindow uint32 // 0: none
	Params        uint64 // weights held, in elements
}

// Model is a Llama-family decoder loaded from a GGUF file or a Hugging Face
// directory, run on the CPU. It is read-only after loading: Forward may run
// on any number of goroutines at once. Close releases it.
type Model struct {
	mu   sync.RWMutex // shared by calls, exclusive for Close (see Store)
	c    *C.infs_model
	info ModelInfo

	// Engines open on the model (guarded by mu, written under its write
	// lock). Close with engines open leaves the C model in pending, freed
	// by the last engine's Close: an engine is freed before its model.
	engines int
	pending *C.infs_model
}

// LoadModel loads path: a .gguf file, or a directory holding config.json
// and model.safetensors. opts may be nil.
func LoadModel(path string, opts *ModelOptions) (*Model, error) {
	const op = "LoadModel"
	if versionErr != nil {
		return nil, versionErr
	}
	cpath, err := cstring(op, "path", path)
	if err != nil {
		return nil, err
	}
	var co C.infs_model_options
	C.infs_model_options_init(&co, C.INFS_MODEL_OPTIONS_VERSION)
	if opts != nil {
		if opts.Threads < 0 {
			return nil, newError(ErrInvalid, fmt.Sprintf("%s: %d threads", op, opts.Threads))
		}
		co.n_threads = C.uint32_t(opts.Threads)
		if opts.Int8Activations {
			co.int8_activations = 1
		}
		if opts.DeviceWeights != F32 {
			co.device_weights = C.int(opts.DeviceWeights)
		}
		if opts.UseDevice {
			co.device = C.int(opts.Device)
			co.device_budget_bytes = C.uint64_t(opts.DeviceBudget)
			co.device_max_tokens = C.uint32_t(opts.DeviceMaxTokens)
		}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var c *C.infs_model
	if rc := C.infs_model_load(&c, charp(cpath), &co); rc != 0 {
		return nil, lastError(rc)
	}
	ci := C.infs_model_info{version: C.INFS_MODEL_INFO_VERSION}
	if rc := C.infs_model_info_get(&ci, c); rc != 0 {
		err := lastError(rc)
		C.infs_model_free(c)
		return nil, err
	}
	m := &Model{c: c, info: ModelInfo{
		Architecture:  C.GoString(ci.architecture),
		Vocab:         uint32(ci.n_vocab),
		Embd:          uint32(ci.n_embd),
		Layers:        uint32(ci.n_layers),
		Heads:         uint32(ci.n_heads),
		KVHeads:       uint32(ci.n_kv_heads),
		HeadDim:       uint32(ci.head_dim),
		FF:            uint32(ci.n_ff),
		CtxTrain:      uint32(ci.n_ctx_train),
		SlidingWindow: uint32(ci.sliding_window),
		Params:        uint64(ci.n_params),
	}}
	runtime.SetFinalizer(m, (*Model).Close)
	return m, nil
}

// Close releases the model, waiting for calls in flight; calling it again
// does nothing. Engines open on the model keep working, and the model's
// memory is released when the last of them is closed.
func (m *Model) Close() error {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.c != nil {
		if m.engines > 0 {
			m.pending = m.c
		} else {
			C.infs_model_free(m.c)
		}
		m.c = nil
		runtime.SetFinalizer(m, nil)
	}
	return nil
}

func (m *Model) acquire(op string) (*C.infs_model, error) {
	if m == nil {
		return nil, closedError(op)
	}
	m.mu.RLock()
	if m.c == nil {
		m.mu.RUnlock()
		return nil, closedError(op)
	}
	return m.c, nil
}

func (m *Model) release() {
	m.mu.RUnlock()
	runtime.KeepAlive(m)
}

// Info describes the model (still valid after Close).
func (m *Model) Info() ModelInfo {
	if m == nil {
		return ModelInfo{}
	}
	return m.info
}

// Geometry is the geometry of the model's KV in kvDType, ready for
// Options.Geometry once EmbedDim is set to the retrieval embedder's size.
func (m *Model) Geometry(kvDType DType) (Geometry, error) {
	c, err := m.acquire("Model.Geometry")
	if err != nil {
		return Geometry{}, err
	}
	defer m.release()
	var g C.infs_geometry
	if err := check(func() C.int { return C.infs_model_geometry(&g, c, C.infs_dtype(kvDType)) }); err != nil {
		return Geometry{}, err
	}
	return geometryFromC(&g), nil
}

// Identity names everything besides the geometry that changes the model's
// KV in kvDType (architecture, weights, tokenizer, chat template, dtype),
// ready for Options.Identity.
func (m *Model) Identity(kvDType DType) (string, error) {
	c, err := m.acquire("Model.Identity")
	if err != nil {
		return "", err
	}
	defer m.release()
	var s *C.char
	if err := check(func() C.int { return C.infs_model_identity(&s, c, C.infs_dtype(kvDType)) }); err != nil {
		return "", err
	}
	defer C.infs_free(unsafe.Pointer(s))
	return C.GoString(s), nil
}

// ForwardOptions are the options of Model.Forward; nil or the zero value
// gives the last token's logits and f32 KV, without a cache.
type ForwardOptions struct {
	AllLogits bool  // logits of every token, not only the last
	KVDType   DType // element type of Out.K and Out.V (the zero value is F32)

	// Cache, when set, holds earlier tokens with keys already rotated (as
	// Inject writes them): position p in block BlockTable[p/BlockSize],
	// slot p%BlockSize. Positions below Past are attended to; WriteCache
	// also stores the new tokens there. Host memory only.
	Cache      *KVLayout
	BlockTable []int32
	Past       uint32
	WriteCache bool

	// SeqIDs, when set, gives each token a sequence: several independent
	// sequences (facts to encode, say) run in one call, a token attending
	// only to its own sequence's and to the cache's positions below Past,
	// which they share, each with its own positions. Not combined with
	// WriteCache.
	SeqIDs []int32
}

// ForwardOutput are the buffers Model.Forward fills; a nil one is not
// computed. Logits holds Vocab floats (AllLogits: len(tokens)*Vocab, token
// after token); K and V the new tokens' pre-RoPE KV in the store's layout
// [layers][tokens][kv heads][head dim] in KVDType, as Fact.K and Fact.V.
type ForwardOutput struct {
	Logits []float32
	K, V   []byte
}

// Forward runs the model over tokens at positions (nil: 0, 1, ...). Token i
// attends to the cache positions below Past that are <= positions[i] and to
// the new tokens at positions <= positions[i]. opts may be nil. The buffers
// of out are written in place.
func (m *Model) Forward(out *ForwardOutput, tokens, positions []int32, opts *ForwardOptions) error {
	const op = "Model.Forward"
	if out == nil {
		out = &ForwardOutput{}
	}
	if opts == nil {
		opts = &ForwardOptions{}
	}
	c, err := m.acquire(op)
	if err != nil {
		return err
	}
	defer m.release()

	// C sizes every buffer from the model and len(tokens): check them here.
	n := len(tokens)
	if positions != nil && len(positions) != n {
		return newError(ErrInvalid, fmt.Sprintf("%s: %d positions for %d tokens", op, len(positions), n))
	}
	if opts.SeqIDs != nil && len(opts.SeqIDs) != n {
		return newError(ErrInvalid, fmt.Sprintf("%s: %d sequence ids for %d tokens", op, len(opts.SeqIDs), n))
	}
	if out.Logits != nil {
		want := int(m.info.Vocab)
		if opts.AllLogits {
			want *= n
		}
		if len(out.Logits) != want {
			return newError(ErrInvalid, fmt.Sprintf("%s: logits hold %d floats, want %d", op, len(out.Logits), want))
		}
	}
	if out.K != nil || out.V != nil {
		es := opts.KVDType.Size()
		if es == 0 {
			return newError(ErrInvalid, fmt.Sprintf("%s: unknown KV dtype %d", op, int(opts.KVDType)))
		}
		want := int(m.info.Layers) * n * int(m.info.KVHeads) * int(m.info.HeadDim) * es
		if (out.K != nil && len(out.K) != want) || (out.V != nil && len(out.V) != want) {
			return newError(ErrInvalid, fmt.Sprintf("%s: K has %d bytes and V %d, want %d each",
				op, len(out.K), len(out.V), want))
		}
	}

	var pin runtime.Pinner
	defer pin.Unpin()
	co := C.infs_forward_options{version: C.INFS_FORWARD_OPTIONS_VERSION, kv_dtype: C.infs_dtype(opts.KVDType)}
	if opts.AllLogits {
		co.all_logits = 1
	}
	if opts.Cache != nil {
		cl, err := layoutToC(op, opts.Cache, &pin)
		if err != nil {
			return err
		}
		pin.Pin(cl)
		co.cache = cl
		if len(opts.BlockTable) > 0 {
			pin.Pin(unsafe.SliceData(opts.BlockTable))
			co.block_table = (*C.int32_t)(unsafe.Pointer(unsafe.SliceData(opts.BlockTable)))
		}
		co.block_table_len = C.size_t(len(opts.BlockTable))
		co.n_past = C.uint32_t(opts.Past)
		if opts.WriteCache {
			co.write_cache = 1
		}
	}
	if opts.SeqIDs != nil {
		pin.Pin(unsafe.SliceData(opts.SeqIDs))
		co.seq_ids = (*C.int32_t)(unsafe.Pointer(unsafe.SliceData(opts.SeqIDs)))
	}
	return check(func() C.int {
		return C.infs_model_forward((*C.float)(unsafe.Pointer(unsafe.SliceData(out.Logits))),
			unsafe.Pointer(unsafe.SliceData(out.K)), unsafe.Pointer(unsafe.SliceData(out.V)), c,
			(*C.int32_t)(unsafe.Pointer(unsafe.SliceData(tokens))),
			(*C.int32_t)(unsafe.Pointer(unsafe.SliceData(positions))), C.uint32_t(n), &co)
	})
}
