package inferscale

/*
#include <stdlib.h>
#include <inferscale/inferscale.h>
*/
import "C"

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"unsafe"
)

// SegmentNamespace is where Engine.Prepare keeps the header and footer
// segments (INFS_SEGMENT_NAMESPACE).
const SegmentNamespace = ReservedPrefix + "segments"

// EngineOptions are how NewEngine builds an engine; the zero value is a
// host engine of 4096 tokens in blocks of 16, f32 KV, the default prompt.
type EngineOptions struct {
	Ctx       uint32 // tokens the cache holds (prompt and answer); 0: 4096
	BlockSize uint32 // tokens per cache block; 0: 16
	KVDType   DType  // element type of the cache (the zero value is F32)

	// The prompt layout, in the model's chat template:
	//   system turn:  System "\n\n" MemoryIntro "\n" [fact 1 .. fact k]
	//   user turn:    question
	//   then the opening of the assistant turn.
	// "": the library's defaults.
	System      string
	MemoryIntro string

	// UseDevice puts the cache on CUDA device Device, where the model must
	// have been loaded (ModelOptions.UseDevice). MaxSeqs: sequences decoded
	// together by AskBatch on a device (0: 32); Blocks: the pool of blocks
	// all sequences share (0: MaxSeqs * ceil(Ctx / BlockSize)).
	UseDevice bool
	Device    int
	MaxSeqs   uint32
	Blocks    uint32
}

// AskOptions are the options of Engine.Ask and Engine.AskBatch; nil or the
// zero value retrieves 10 facts by cosine similarity, injects them and
// answers greedily in at most 64 tokens.
type AskOptions struct {
	K             int  // facts retrieved; 0: 10
	FullRecompute bool // prefill the whole composed prompt instead of injecting
	Metric        Metric
	// FactIDs, when not nil, are the facts used (best first) instead of
	// retrieving; an empty non-nil slice uses none.
	FactIDs []uint64

	MaxTokens   int     // token budget of the answer; 0: 64
	Temperature float32 // <= 0: greedy
	TopP        float32 // nucleus sampling, (0, 1]; 0: 1 (off)
	Seed        uint64  // the sampler's seed: same seed, same answer
	Stop        string  // stop string, cut from the answer; "": none

	// Accuracy recovery (docs/end-to-end.md): the share RecomputeRatio of
	// the injected fact tokens whose keys deviate most at layer
	// CheckLayer run again through every later layer (0: plain injection;
	// 1: the whole prompt prefilled, as FullRecompute).
	RecomputeRatio float32
	CheckLayer     int

	// IgnoreEOS decodes on to the token budget (or a full cache) past the
	// tokens that end an answer, as benchmarks of decoding do; those tokens
	// are left out of the text.
	IgnoreEOS bool

	// Attention calibration for the injected facts (docs/eval.md): the
	// question's and the answer's scores of the facts' positions divided by
	// FactTemperature (0: 1), their weights multiplied by FactScale (0: 1;
	// FactScaleAuto: 1 / sqrt(facts injected)); 1 and 1, the default: off.
	FactTemperature float32
	FactScale       float32
}

// FactScaleAuto as AskOptions.FactScale scales the facts' attention by
// 1 / sqrt(facts injected).
const FactScaleAuto float32 = -1

// Answer is what Ask returns, copied out of the library. Times are
// milliseconds; the time to first token TTFTMs = EmbedMs + RetrieveMs +
// InjectMs + PrefillMs (for full recompute InjectMs is the reading of the
// facts' tokens from the store).
type Answer struct {
	Text        string
	Tokens      uint32    // tokens generated
	Prompt      uint32    // positions of the composed prompt
	Prefilled   uint32    // of which were prefilled (the rest were injected)
	FactIDs     []uint64  // facts used, best first
	Scores      []float32 // their retrieval scores (0 when given)
	FirstLogits []float32 // the first answer token's logits (Vocab floats)

	EmbedMs, RetrieveMs, InjectMs, PrefillMs, TTFTMs, DecodeMs float64

	Recomputable uint32 // injected fact and footer tokens recovery may recompute
	Recomputed   uint32 // of which went through every layer again
}

// Engine is a model, a prompt layout and a paged KV cache, in host memory or
// on the model's CUDA device. One call runs at a time (a mutex serialises
// goroutines); a server shares a device engine by collecting requests into
// AskBatch calls. Close releases it; the model's memory stays until its
// engines are closed.
type Engine struct {
	mu     sync.Mutex
	c      *C.infs_engine
	model  *Model
	header []int32
}

// NewEngine builds an engine over model. The model needs a tokenizer with a
// known chat template (ErrUnsupported otherwise).
func NewEngine(model *Model, opts EngineOptions) (*Engine, error) {
	const op = "NewEngine"
	if versionErr != nil {
		return nil, versionErr
	}
	if model == nil {
		return nil, closedError(op)
	}
	var co C.infs_engine_options
	C.infs_engine_options_init(&co, C.INFS_ENGINE_OPTIONS_VERSION)
	co.n_ctx = C.uint32_t(opts.Ctx)
	co.block_size = C.uint32_t(opts.BlockSize)
	co.kv_dtype = C.infs_dtype(opts.KVDType)
	if opts.UseDevice {
		co.device = C.int(opts.Device)
	}
	co.max_seqs = C.uint32_t(opts.MaxSeqs)
	co.n_blocks = C.uint32_t(opts.Blocks)
	var pin runtime.Pinner
	defer pin.Unpin()
	for _, f := range []struct {
		what string
		s    string
		dst  **C.char
	}{{"system", opts.System, &co.system}, {"memory intro", opts.MemoryIntro, &co.memory_intro}} {
		if f.s == "" {
			continue
		}
		b, err := cstring(op, f.what, f.s)
		if err != nil {
			return nil, err
		}
		pin.Pin(unsafe.SliceData(b))
		*f.dst = charp(b)
	}

	// The model's write lock: the engine count changes with the handle.
	model.mu.Lock()
	defer model.mu.Unlock()
	if model.c == nil {
		return nil, closedError(op)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var c *C.infs_engine
	if rc := C.infs_engine_create(&c, model.c, &co); rc != 0 {
		return nil, lastError(rc)
	}
	var hp *C.int32_t
	var hn C.uint32_t
	if rc := C.infs_engine_header(&hp, &hn, c); rc != 0 {
		err := lastError(rc)
		C.infs_engine_free(c)
		return nil, err
	}
	e := &Engine{c: c, model: model, header: append([]int32(nil), unsafe.Slice((*int32)(unsafe.Pointer(hp)), int(hn))...)}
	model.engines++
	runtime.SetFinalizer(e, (*Engine).Close)
	return e, nil
}

// Close releases the engine, after a call in flight; calling it again does
// nothing.
func (e *Engine) Close() error {
	if e == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.c == nil {
		return nil
	}
	C.infs_engine_free(e.c)
	e.c = nil
	runtime.SetFinalizer(e, nil)
	m := e.model
	m.mu.Lock()
	m.engines--
	if m.engines == 0 && m.pending != nil {
		C.infs_model_free(m.pending)
		m.pending = nil
	}
	m.mu.Unlock()
	return nil
}

// lock holds the engine for one call until unlock.
func (e *Engine) lock(op string) (*C.infs_engine, error) {
	if e == nil {
		return nil, closedError(op)
	}
	e.mu.Lock()
	if e.c == nil {
		e.mu.Unlock()
		return nil, closedError(op)
	}
	return e.c, nil
}

func (e *Engine) unlock() {
	e.mu.Unlock()
	runtime.KeepAlive(e)
}

// Header is the header's tokens: the encoding context facts should be
// encoded after, so that a fact's KV is computed as it will be read, right
// after the header (a copy; still valid after Close).
func (e *Engine) Header() []int32 {
	if e == nil {
		return nil
	}
	return append([]int32(nil), e.header...)
}

// Prepare encodes the header and footer segments into SegmentNamespace of
// store unless segments with the same tokens are already there: once per
// store, needed before Ask on that store.
func (e *Engine) Prepare(store *Store) error {
	const op = "Engine.Prepare"
	c, err := e.lock(op)
	if err != nil {
		return err
	}
	defer e.unlock()
	sc, err := store.acquire(op)
	if err != nil {
		return err
	}
	defer store.release()
	return check(func() C.int { return C.infs_engine_prepare(c, sc) })
}

// RenderFact renders a fact as it appears in the prompt:
//
//	"- " [ "(" date ") " ] [ speaker ": " ] text "\n"
//
// where date and speaker are the string members "date" and "speaker" of the
// JSON object metadata ("" or other members: left out).
func RenderFact(text, metadata string) (string, error) {
	const op = "RenderFact"
	ct, err := cstring(op, "text", text)
	if err != nil {
		return "", err
	}
	var cm []byte
	if metadata != "" {
		if cm, err = cstring(op, "metadata", metadata); err != nil {
			return "", err
		}
	}
	var out *C.char
	if err := check(func() C.int { return C.infs_fact_render(&out, charp(ct), charp(cm)) }); err != nil {
		return "", err
	}
	defer C.infs_free(unsafe.Pointer(out))
	return C.GoString(out), nil
}

// Ask answers question for namespace ns of store: embeds it with embedder,
// retrieves the top K facts (or takes opts.FactIDs; then embedder may be
// nil), lays out [header][fact k .. fact 1][footer][question] (best fact
// nearest the question), injects header, facts and footer into the cache
// and prefills only the question (or, with FullRecompute, prefills all of
// it), then decodes. Prepare must have run on store. opts may be nil.
func (e *Engine) Ask(store *Store, embedder *Embedder, ns, question string, opts *AskOptions) (*Answer, error) {
	answers, err := e.ask("Engine.Ask", store, embedder, ns, []string{question}, opts, false)
	if err != nil {
		return nil, err
	}
	return answers[0], nil
}

// AskBatch answers every question as Ask does (same options, every question
// of namespace ns): answer i is question i's. On a device engine the
// requests run together with continuous batching: up to MaxSeqs sequences
// at once, a finished sequence's blocks returned to the pool and the next
// question admitted in its place; a request's time parts are those of the
// group it was admitted with. On the host the questions are answered one
// after another.
func (e *Engine) AskBatch(store *Store, embedder *Embedder, ns string, questions []string, opts *AskOptions) ([]*Answer, error) {
	return e.ask("Engine.AskBatch", store, embedder, ns, questions, opts, true)
}

// ask runs infs_engine_ask (one question) or infs_engine_ask_batch.
func (e *Engine) ask(op string, store *Store, embedder *Embedder, ns string, questions []string, opts *AskOptions,
	batch bool) ([]*Answer, error) {
	if opts == nil {
		opts = &AskOptions{}
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	co, err := askOptionsToC(op, opts, &pin)
	if err != nil {
		return nil, err
	}
	cns, err := cstring(op, "namespace", ns)
	if err != nil {
		return nil, err
	}
	// The questions in C memory: the array of pointers is read by C.
	n := len(questions)
	cq := (**C.char)(C.calloc(C.size_t(max(n, 1)), C.size_t(unsafe.Sizeof((*C.char)(nil)))))
	qs := unsafe.Slice(cq, max(n, 1))
	defer func() {
		for _, q := range qs {
			C.free(unsafe.Pointer(q))
		}
		C.free(unsafe.Pointer(cq))
	}()
	for i, q := range questions {
		b, err := cstring(op, fmt.Sprintf("question %d", i), q)
		if err != nil {
			return nil, err
		}
		qs[i] = (*C.char)(C.CBytes(b))
	}

	c, err := e.lock(op)
	if err != nil {
		return nil, err
	}
	defer e.unlock()
	sc, err := store.acquire(op)
	if err != nil {
		return nil, err
	}
	defer store.release()
	var ec *C.infs_embedder
	if embedder != nil {
		if ec, err = embedder.acquire(op); err != nil {
			return nil, err
		}
		defer embedder.release()
	}
	out := make([]*C.infs_answer, max(n, 1))
	err = check(func() C.int {
		if !batch {
			return C.infs_engine_ask(&out[0], c, sc, ec, charp(cns), *cq, co)
		}
		return C.infs_engine_ask_batch(&out[0], c, sc, ec, charp(cns), cq, C.size_t(n), co)
	})
	if err != nil {
		return nil, err
	}
	answers := make([]*Answer, n)
	for i := range answers {
		answers[i] = answerFromC(out[i])
		C.infs_answer_free(out[i])
	}
	return answers, nil
}

// askOptionsToC builds infs_ask_options with the library's defaults at the
// current version and sets the fields by name, so that fields appended to
// the struct keep their defaults; the Go memory it points to is pinned with
// pin.
func askOptionsToC(op string, o *AskOptions, pin *runtime.Pinner) (*C.infs_ask_options, error) {
	for _, f := range []struct {
		what string
		v    int
	}{{"K", o.K}, {"MaxTokens", o.MaxTokens}, {"CheckLayer", o.CheckLayer}} {
		if f.v < 0 || f.v > math.MaxUint32 {
			return nil, newError(ErrRange, fmt.Sprintf("%s: %s %d is out of range [0, %d]", op, f.what, f.v,
				uint32(math.MaxUint32)))
		}
	}
	co := new(C.infs_ask_options)
	C.infs_ask_options_init(co, C.INFS_ASK_OPTIONS_VERSION)
	co.k = C.uint32_t(o.K)
	if o.FullRecompute {
		co.full_recompute = 1
	}
	co.metric = C.infs_metric(o.Metric)
	if o.FactIDs != nil {
		// A non-nil pointer even for no ids: no facts, rather than retrieval.
		ids := o.FactIDs
		if len(ids) == 0 {
			ids = make([]uint64, 1)
		}
		pin.Pin(unsafe.SliceData(ids))
		co.fact_ids = (*C.uint64_t)(unsafe.Pointer(unsafe.SliceData(ids)))
		co.n_fact_ids = C.size_t(len(o.FactIDs))
	}
	g := &co.generate
	g.max_tokens = C.uint32_t(o.MaxTokens)
	g.temperature = C.float(o.Temperature)
	if o.TopP != 0 {
		g.top_p = C.float(o.TopP)
	}
	g.seed = C.uint64_t(o.Seed)
	if o.Stop != "" {
		b, err := cstring(op, "stop string", o.Stop)
		if err != nil {
			return nil, err
		}
		pin.Pin(unsafe.SliceData(b))
		g.stop = charp(b)
	}
	co.recompute_ratio = C.float(o.RecomputeRatio)
	co.check_layer = C.uint32_t(o.CheckLayer)
	if o.IgnoreEOS {
		co.ignore_eos = 1
	}
	if o.FactTemperature != 0 {
		co.fact_temperature = C.float(o.FactTemperature)
	}
	switch {
	case o.FactScale == FactScaleAuto:
		co.fact_scale = 0
	case o.FactScale != 0:
		co.fact_scale = C.float(o.FactScale)
	}
	return co, nil
}

// answerFromC copies an answer out of C memory.
func answerFromC(a *C.infs_answer) *Answer {
	n := int(a.n_facts)
	r := &Answer{
		Text:         C.GoString(a.text),
		Tokens:       uint32(a.n_tokens),
		Prompt:       uint32(a.n_prompt),
		Prefilled:    uint32(a.n_prefilled),
		FactIDs:      make([]uint64, n),
		Scores:       make([]float32, n),
		EmbedMs:      float64(a.embed_ms),
		RetrieveMs:   float64(a.retrieve_ms),
		InjectMs:     float64(a.inject_ms),
		PrefillMs:    float64(a.prefill_ms),
		TTFTMs:       float64(a.ttft_ms),
		DecodeMs:     float64(a.decode_ms),
		Recomputable: uint32(a.n_recomputable),
		Recomputed:   uint32(a.n_recomputed),
	}
	if n > 0 {
		copy(r.FactIDs, unsafe.Slice((*uint64)(unsafe.Pointer(a.fact_ids)), n))
		copy(r.Scores, unsafe.Slice((*float32)(unsafe.Pointer(a.scores)), n))
	}
	if a.first_logits != nil {
		r.FirstLogits = append([]float32(nil), unsafe.Slice((*float32)(unsafe.Pointer(a.first_logits)), int(a.n_vocab))...)
	}
	return r
}
