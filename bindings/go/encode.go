package inferscale

/*
#include <stdlib.h>
#include <inferscale/inferscale.h>

// The Go progress callback (exported below), an infs_progress_fn.
extern int infsGoProgress(void *user, size_t done, size_t total);
*/
import "C"

import (
	"fmt"
	"runtime"
	"runtime/cgo"
	"unsafe"
)

// FactInput is one fact for Store.Encode (infs_fact_input).
type FactInput struct {
	// Text is stored, and tokenized by the model's tokenizer (no BOS,
	// special tokens read as plain text) unless Tokens is given.
	Text   string
	Tokens []int32
	// EmbedText is what the embedder embeds ("": Text); Embedding, when
	// given (the store's EmbedDim floats), is used instead.
	EmbedText string
	Embedding []float32
	// Context are tokens this fact alone is encoded after, following the
	// options' Context: the conversation turns that preceded it, say.
	Context   []int32
	Metadata  string // stored as given (JSON by convention)
	SourceID  uint64
	Timestamp int64
}

// EncodeOptions are the options of Store.Encode; nil or the zero value
// encodes every fact on its own with no embedder (every fact then brings
// its Embedding).
type EncodeOptions struct {
	// Context are the tokens every fact is encoded after (for an engine,
	// Engine.Header()), run once per call; their KV is not stored.
	Context  []int32
	Embedder *Embedder // computes the embeddings not given
	// Progress, if not nil, is called after each fact is stored with the
	// number stored so far and the total; returning false stops the
	// encoding (Encode then fails with ErrCanceled). It runs during the C
	// call, with the store in use: it must not close the store, the model
	// or the embedder.
	Progress func(done, total int) bool
}

// progressCall is what the C callback reaches through its user pointer.
type progressCall struct {
	fn       func(done, total int) bool
	panicked any // a panic of fn, raised again once C has returned
}

//export infsGoProgress
func infsGoProgress(user unsafe.Pointer, done, total C.size_t) (stop C.int) {
	p := cgo.Handle(*(*C.uintptr_t)(user)).Value().(*progressCall)
	defer func() {
		// A panic must not unwind through the C frames: stop the
		// encoding and let Encode raise it.
		if r := recover(); r != nil {
			p.panicked, stop = r, 1
		}
	}()
	if !p.fn(int(done), int(total)) {
		return 1
	}
	return 0
}

// Encode runs each fact through model (after opts.Context and the fact's
// own Context), and stores its pre-RoPE K and V of every layer with its
// embedding in namespace ns (infs_fact_encode); id i is fact i's. The store
// must have been created for the model (Model.Geometry and Model.Identity
// at the store's KV dtype, EmbedDim the embedder's Dim): ErrMismatch
// otherwise. Every argument is checked and every text tokenized before
// anything is stored. When encoding stops early (Progress returned false:
// ErrCanceled, or an I/O error) the facts already stored stay stored: the
// returned ids hold theirs, and 0 for the others. opts may be nil.
func (s *Store) Encode(ns string, model *Model, facts []FactInput, opts *EncodeOptions) ([]uint64, error) {
	const op = "Store.Encode"
	if opts == nil {
		opts = &EncodeOptions{}
	}
	cns, err := cstring(op, "namespace", ns)
	if err != nil {
		return nil, err
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	// int32 and float32 slices go to C in place, pinned: the fact array
	// holding pointers to them is Go memory passed to C.
	ints := func(v []int32) (*C.int32_t, C.uint32_t) {
		if len(v) == 0 {
			return nil, 0
		}
		pin.Pin(unsafe.SliceData(v))
		return (*C.int32_t)(unsafe.Pointer(unsafe.SliceData(v))), C.uint32_t(min(len(v), FactTokensMax+1))
	}
	str := func(what, v string, null bool) (*C.char, error) {
		if null && v == "" {
			return nil, nil
		}
		b, err := cstring(op, what, v)
		if err != nil {
			return nil, err
		}
		pin.Pin(unsafe.SliceData(b))
		return charp(b), nil
	}
	embedDim := 0
	if len(facts) > 0 {
		embedDim = int(s.Geometry().EmbedDim)
	}
	in := make([]C.infs_fact_input, max(len(facts), 1))
	for i := range facts {
		f, c := &facts[i], &in[i]
		C.infs_fact_input_init(c, C.INFS_FACT_INPUT_VERSION)
		if c.text, err = str(fmt.Sprintf("fact %d text", i), f.Text, false); err != nil {
			return nil, err
		}
		if c.embed_text, err = str(fmt.Sprintf("fact %d embed text", i), f.EmbedText, true); err != nil {
			return nil, err
		}
		if c.metadata, err = str(fmt.Sprintf("fact %d metadata", i), f.Metadata, true); err != nil {
			return nil, err
		}
		c.tokens, c.n_tokens = ints(f.Tokens)
		c.context, c.n_context = ints(f.Context)
		if f.Embedding != nil {
			// C reads embed_dim floats: a slice of another length would be
			// read out of bounds.
			if len(f.Embedding) != embedDim {
				return nil, newError(ErrInvalid, fmt.Sprintf("%s: fact %d: embedding has %d floats, the store's embed_dim is %d",
					op, i, len(f.Embedding), embedDim))
			}
			pin.Pin(unsafe.SliceData(f.Embedding))
			c.embedding = (*C.float)(unsafe.Pointer(unsafe.SliceData(f.Embedding)))
		}
		c.source_id = C.uint64_t(f.SourceID)
		c.timestamp = C.int64_t(f.Timestamp)
	}
	co := new(C.infs_encode_options)
	C.infs_encode_options_init(co, C.INFS_ENCODE_OPTIONS_VERSION)
	co.context, co.n_context = ints(opts.Context)
	var call *progressCall
	if opts.Progress != nil {
		// C keeps the handle's number in C memory, not a Go pointer.
		call = &progressCall{fn: opts.Progress}
		h := cgo.NewHandle(call)
		defer h.Delete()
		user := (*C.uintptr_t)(C.malloc(C.size_t(unsafe.Sizeof(C.uintptr_t(0)))))
		defer C.free(unsafe.Pointer(user))
		*user = C.uintptr_t(h)
		co.progress = C.infs_progress_fn(C.infsGoProgress)
		co.progress_user = unsafe.Pointer(user)
	}

	sc, err := s.acquire(op)
	if err != nil {
		return nil, err
	}
	defer s.release()
	mc, err := model.acquire(op)
	if err != nil {
		return nil, err
	}
	defer model.release()
	if opts.Embedder != nil {
		if co.embedder, err = opts.Embedder.acquire(op); err != nil {
			return nil, err
		}
		defer opts.Embedder.release()
	}
	ids := make([]uint64, max(len(facts), 1))
	err = check(func() C.int {
		return C.infs_fact_encode((*C.uint64_t)(unsafe.Pointer(&ids[0])), sc, charp(cns), mc, &in[0],
			C.size_t(len(facts)), co)
	})
	if call != nil && call.panicked != nil {
		panic(call.panicked)
	}
	return ids[:len(facts)], err
}
