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

// EmbedderOptions are how LoadEmbedder loads an embedder; nil or the zero
// value runs on the CPU's cores with the model's sequence length.
type EmbedderOptions struct {
	Threads      int // threads of each Embed call; 0: the machine's cores
	MaxSeqLength int // tokens per text, [CLS] and [SEP] included; 0: the model's

	// UseDevice asks for CUDA device Device (ErrUnsupported in a build
	// without CUDA).
	UseDevice bool
	Device    int
}

// Embedder is the built-in retrieval embedder: a BERT-family
// sentence-transformers model (all-MiniLM-L6-v2 and the like) with its
// WordPiece tokenizer. It computes what SentenceTransformer(path).encode
// does, and is safe for concurrent use.
type Embedder struct {
	mu     sync.RWMutex // as Store's
	c      *C.infs_embedder
	dim    int
	maxSeq int
}

// LoadEmbedder loads the sentence-transformers model directory path. opts
// may be nil.
func LoadEmbedder(path string, opts *EmbedderOptions) (*Embedder, error) {
	const op = "LoadEmbedder"
	if versionErr != nil {
		return nil, versionErr
	}
	cpath, err := cstring(op, "path", path)
	if err != nil {
		return nil, err
	}
	var co C.infs_embedder_options
	C.infs_embedder_options_init(&co, C.INFS_EMBEDDER_OPTIONS_VERSION)
	if opts != nil {
		if opts.Threads < 0 || opts.MaxSeqLength < 0 {
			return nil, newError(ErrInvalid, fmt.Sprintf("%s: %d threads, max sequence length %d",
				op, opts.Threads, opts.MaxSeqLength))
		}
		co.n_threads = C.uint32_t(opts.Threads)
		co.max_seq_length = C.uint32_t(opts.MaxSeqLength)
		if opts.UseDevice {
			co.device = C.int(opts.Device)
		}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var c *C.infs_embedder
	if rc := C.infs_embedder_load(&c, charp(cpath), &co); rc != 0 {
		return nil, lastError(rc)
	}
	e := &Embedder{c: c, dim: int(C.infs_embedder_dim(c)), maxSeq: int(C.infs_embedder_max_seq_length(c))}
	runtime.SetFinalizer(e, (*Embedder).Close)
	return e, nil
}

// Close releases the embedder, waiting for calls in flight; calling it again
// does nothing.
func (e *Embedder) Close() error {
	if e == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.c != nil {
		C.infs_embedder_free(e.c)
		e.c = nil
		runtime.SetFinalizer(e, nil)
	}
	return nil
}

// Dim is the number of floats of an embedding (384 for all-MiniLM-L6-v2);
// the EmbedDim of a store it fills.
func (e *Embedder) Dim() int {
	if e == nil {
		return 0
	}
	return e.dim
}

// MaxSeqLength is the number of tokens a text is truncated to.
func (e *Embedder) MaxSeqLength() int {
	if e == nil {
		return 0
	}
	return e.maxSeq
}

// EmbedOptions are the options of Embed.
type EmbedOptions struct {
	// Prompt is prepended to every text, as sentence-transformers'
	// encode(prompt=...): "query: " for e5, an instruction for bge queries.
	Prompt string
}

// Embed returns the embeddings of texts, text i at [i*Dim(), (i+1)*Dim()).
// opts may be nil.
func (e *Embedder) Embed(texts []string, opts *EmbedOptions) ([]float32, error) {
	if e == nil {
		return nil, closedError("Embedder.Embed")
	}
	out := make([]float32, len(texts)*e.dim)
	if err := e.EmbedInto(out, texts, opts); err != nil {
		return nil, err
	}
	return out, nil
}

// EmbedInto writes the embeddings of texts into dst, which holds
// len(texts)*Dim() floats.
func (e *Embedder) EmbedInto(dst []float32, texts []string, opts *EmbedOptions) error {
	const op = "Embedder.EmbedInto"
	if e == nil {
		return closedError(op)
	}
	if len(dst) != len(texts)*e.dim {
		return newError(ErrInvalid, fmt.Sprintf("%s: dst holds %d floats, want %d (%d texts of %d)",
			op, len(dst), len(texts)*e.dim, len(texts), e.dim))
	}
	// All texts NUL-terminated in one Go buffer, and the array of pointers
	// into it: Go memory holding Go pointers, so both are pinned.
	size := 0
	for _, s := range texts {
		size += len(s) + 1
	}
	buf := make([]byte, 0, size+1)
	ptrs := make([]*C.char, len(texts))
	offs := make([]int, len(texts))
	for i, s := range texts {
		b, err := cstring(op, fmt.Sprintf("text %d", i), s)
		if err != nil {
			return err
		}
		offs[i] = len(buf)
		buf = append(buf, b...)
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	buf = append(buf, 0) // never empty, so that &buf[0] exists
	pin.Pin(&buf[0])
	for i := range ptrs {
		ptrs[i] = (*C.char)(unsafe.Pointer(&buf[offs[i]]))
	}
	var co *C.infs_embed_options
	if opts != nil && opts.Prompt != "" {
		prompt, err := cstring(op, "prompt", opts.Prompt)
		if err != nil {
			return err
		}
		pin.Pin(&prompt[0])
		co = &C.infs_embed_options{version: C.INFS_EMBED_OPTIONS_VERSION, prompt: charp(prompt)}
	}

	c, err := e.acquire(op)
	if err != nil {
		return err
	}
	defer e.release()
	return check(func() C.int {
		return C.infs_embed((*C.float)(unsafe.Pointer(unsafe.SliceData(dst))), c,
			(**C.char)(unsafe.Pointer(unsafe.SliceData(ptrs))), C.size_t(len(texts)), co)
	})
}

func (e *Embedder) acquire(op string) (*C.infs_embedder, error) {
	e.mu.RLock()
	if e.c == nil {
		e.mu.RUnlock()
		return nil, closedError(op)
	}
	return e.c, nil
}

func (e *Embedder) release() {
	e.mu.RUnlock()
	runtime.KeepAlive(e)
}
