package inferscale

/*
#include <stdint.h>
#include <inferscale/inferscale.h>

// Device pointers and streams cross as integers, so that Go never holds
// them as pointers (the caller's device memory is no Go object).
static int infs_go_retrieve_device(infs_searcher *s, const char *ns, uintptr_t queries, size_t n, size_t k,
                                   uintptr_t hits, uintptr_t counts, uintptr_t stream)
{
	return infs_retrieve_device(s, ns, (const float *)queries, n, k, (infs_hit *)hits, (uint32_t *)counts,
	                            (void *)stream);
}

static int infs_go_inject_device(infs_injector *inj, const char *ns, uintptr_t ids, size_t id_stride,
                                 uintptr_t n_ids, uint32_t start_pos, uintptr_t block_table, size_t block_table_len,
                                 uintptr_t next_pos, uintptr_t status, uintptr_t stream)
{
	return infs_inject_device(inj, ns, (const void *)ids, id_stride, (const uint32_t *)n_ids, start_pos,
	                          (const int32_t *)block_table, block_table_len, (uint32_t *)next_pos,
	                          (int32_t *)status, (void *)stream);
}

static void infs_go_searcher_free(void *p) { infs_searcher_free(p); }
static void infs_go_injector_free(void *p) { infs_injector_free(p); }
*/
import "C"

import (
	"fmt"
	"math"
	"runtime"
	"unsafe"
)

// Retrieval and injection on device pointers, for serving stacks whose
// queries, hits, ids and block tables never leave the GPU. Device pointers
// and streams are uintptr: the caller owns that memory (Go's garbage
// collector never sees it) and keeps it alive until the stream has done
// with it.

// Limits of a Searcher (INFS_SEARCHER_K_MAX, INFS_SEARCHER_QUERIES_MAX).
const (
	SearcherKMax       = int(C.INFS_SEARCHER_K_MAX)
	SearcherQueriesMax = int(C.INFS_SEARCHER_QUERIES_MAX)
)

// SearcherOptions size a Searcher. A zero field takes the library's default.
type SearcherOptions struct {
	Metric     Metric
	MaxQueries int    // queries per search, 1..SearcherQueriesMax; 0: 32
	MaxK       int    // 1..SearcherKMax; 0: 50
	MaxFacts   uint64 // rows of the largest namespace searched; 0: twice the store's largest now, at least 4096
}

// Searcher is the device workspace of one stream for retrieval on device
// pointers (infs_searcher): a search allocates nothing, copies nothing from
// the host and never waits, so it can be captured in a CUDA graph. Use it
// from one goroutine at a time. It needs a store opened with UseDevice.
// Close frees it; Store.Close frees those still open.
type Searcher struct {
	store      *Store
	c          unsafe.Pointer // *C.infs_searcher; nil once closed; under the store's lock
	maxQueries int
	maxK       int
}

// NewSearcher makes a searcher on store: ErrUnsupported for a store without
// a device copy or a library built without CUDA, ErrRange for options out
// of range.
func NewSearcher(store *Store, opts SearcherOptions) (*Searcher, error) {
	const op = "NewSearcher"
	var co C.infs_searcher_options
	C.infs_searcher_options_init(&co, C.INFS_SEARCHER_OPTIONS_VERSION)
	co.metric = C.infs_metric(opts.Metric)
	if err := optionU32(op, "MaxQueries", opts.MaxQueries, &co.max_queries); err != nil {
		return nil, err
	}
	if err := optionU32(op, "MaxK", opts.MaxK, &co.max_k); err != nil {
		return nil, err
	}
	co.max_facts = C.uint64_t(opts.MaxFacts)
	h, err := store.bind(op, func(c *C.infs_store) (unsafe.Pointer, C.int) {
		var p *C.infs_searcher
		rc := C.infs_searcher_create(&p, c, &co)
		return unsafe.Pointer(p), rc
	}, func(p unsafe.Pointer) { C.infs_go_searcher_free(p) })
	if err != nil {
		return nil, err
	}
	sr := &Searcher{store: store, c: h, maxQueries: int(co.max_queries), maxK: int(co.max_k)}
	runtime.SetFinalizer(sr, (*Searcher).Close)
	return sr, nil
}

// Close waits for the device to finish the searches queued with the
// searcher, then frees it; calling it again does nothing.
func (sr *Searcher) Close() error {
	if sr != nil {
		sr.store.unbind(&sr.c)
		runtime.SetFinalizer(sr, nil)
	}
	return nil
}

// Search queues the k best facts of namespace ns for each of nQueries
// queries on stream (a cudaStream_t; 0: the default stream) and returns
// once they are queued (infs_retrieve_device). queries: nQueries*EmbedDim
// float32 on the store's device; hits receives nQueries*k Hit (16 bytes
// each, query q's from hits + q*k*16; those past its count are left as they
// were) and counts nQueries uint32. Same hits, scores and order as
// Retrieve; a query with a non-finite value, or zero under cosine, gets 0
// hits.
func (sr *Searcher) Search(ns string, queries uintptr, nQueries, k int, hits, counts uintptr, stream uintptr) error {
	const op = "Searcher.Search"
	if sr == nil {
		return closedError(op)
	}
	if nQueries < 1 || nQueries > sr.maxQueries {
		return newError(ErrRange, fmt.Sprintf("%s: nQueries %d is not in 1..%d (the searcher's MaxQueries)",
			op, nQueries, sr.maxQueries))
	}
	if k < 1 || k > sr.maxK {
		return newError(ErrRange, fmt.Sprintf("%s: k %d is not in 1..%d (the searcher's MaxK)", op, k, sr.maxK))
	}
	if err := nonZero(op, []string{"queries", "hits", "counts"}, queries, hits, counts); err != nil {
		return err
	}
	cns, err := cstring(op, "namespace", ns)
	if err != nil {
		return err
	}
	h, err := sr.store.acquireBound(op, &sr.c)
	if err != nil {
		return err
	}
	defer sr.store.release()
	return check(func() C.int {
		return C.infs_go_retrieve_device((*C.infs_searcher)(h), charp(cns), C.uintptr_t(queries), C.size_t(nQueries),
			C.size_t(k), C.uintptr_t(hits), C.uintptr_t(counts), C.uintptr_t(stream))
	})
}

// InjectorOptions size an Injector. A zero field takes the library's default.
type InjectorOptions struct {
	MaxIDs    int // facts per call, 1..RetrieveKMax; 0: 64
	MaxTokens int // tokens per call, all its facts together, 1..2^31-1; 0: 4096
}

// Injector writes facts whose ids are in device memory (such as a
// Searcher's hits) into one device KV cache (infs_injector): the ids, their
// count and the block table stay on the device and the call is queued on
// the caller's stream, so it can be captured in a CUDA graph. It copies the
// layout's pointers and strides when made. Use it from one goroutine at a
// time. It needs a store opened with UseDevice and a layout on its device.
// Close frees it; Store.Close frees those still open.
type Injector struct {
	store  *Store
	c      unsafe.Pointer // *C.infs_injector; nil once closed; under the store's lock
	maxIDs int
}

// NewInjector makes an injector into the device cache layout on store:
// ErrUnsupported for a store without a device copy or a library built
// without CUDA, ErrInvalid for a host cache, ErrRange for options out of
// range.
func NewInjector(store *Store, layout *KVLayout, opts InjectorOptions) (*Injector, error) {
	const op = "NewInjector"
	var co C.infs_injector_options
	C.infs_injector_options_init(&co, C.INFS_INJECTOR_OPTIONS_VERSION)
	if err := optionU32(op, "MaxIDs", opts.MaxIDs, &co.max_ids); err != nil {
		return nil, err
	}
	if err := optionU32(op, "MaxTokens", opts.MaxTokens, &co.max_tokens); err != nil {
		return nil, err
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	cl, err := layoutToC(op, layout, &pin)
	if err != nil {
		return nil, err
	}
	h, err := store.bind(op, func(c *C.infs_store) (unsafe.Pointer, C.int) {
		var p *C.infs_injector
		rc := C.infs_injector_create(&p, c, cl, &co)
		return unsafe.Pointer(p), rc
	}, func(p unsafe.Pointer) { C.infs_go_injector_free(p) })
	if err != nil {
		return nil, err
	}
	inj := &Injector{store: store, c: h, maxIDs: int(co.max_ids)}
	runtime.SetFinalizer(inj, (*Injector).Close)
	return inj, nil
}

// Close waits for the device to finish the injections queued with the
// injector, then frees it; calling it again does nothing.
func (inj *Injector) Close() error {
	if inj != nil {
		inj.store.unbind(&inj.c)
		runtime.SetFinalizer(inj, nil)
	}
	return nil
}

// InjectDevice queues on stream (a cudaStream_t; 0: the default stream) the
// injection of the first *nIDs ids of namespace ns at consecutive
// positions from startPos, as Store.Inject does, and returns once it is
// queued (infs_inject_device). ids: id i at ids + i*idStride bytes (8 for
// a uint64 array, 16 to read a Searcher's hits in place); nIDs: one uint32
// (such as a search's count), at most the injector's MaxIDs and the ids
// there are; blockTable: blockTableLen int32. nextPos (one uint32) and
// status (one int32) may be 0; on the device they receive the first
// position after the injected tokens, and 0 or the negative code of a call
// that wrote nothing (ErrNotFound for an id that is not a live fact of ns,
// ErrRange for a limit). All are device memory on the store's device,
// aligned to their elements.
func (inj *Injector) InjectDevice(ns string, ids uintptr, idStride int, nIDs uintptr, startPos uint32,
	blockTable uintptr, blockTableLen int, nextPos, status uintptr, stream uintptr) error {
	const op = "Injector.InjectDevice"
	if inj == nil {
		return closedError(op)
	}
	if idStride < 8 || idStride%8 != 0 {
		return newError(ErrInvalid, fmt.Sprintf("%s: idStride %d is not a positive multiple of 8 bytes", op, idStride))
	}
	if blockTableLen < 1 {
		return newError(ErrInvalid, fmt.Sprintf("%s: blockTableLen %d is not positive", op, blockTableLen))
	}
	if err := nonZero(op, []string{"ids", "nIDs", "blockTable"}, ids, nIDs, blockTable); err != nil {
		return err
	}
	cns, err := cstring(op, "namespace", ns)
	if err != nil {
		return err
	}
	h, err := inj.store.acquireBound(op, &inj.c)
	if err != nil {
		return err
	}
	defer inj.store.release()
	return check(func() C.int {
		return C.infs_go_inject_device((*C.infs_injector)(h), charp(cns), C.uintptr_t(ids), C.size_t(idStride),
			C.uintptr_t(nIDs), C.uint32_t(startPos), C.uintptr_t(blockTable), C.size_t(blockTableLen),
			C.uintptr_t(nextPos), C.uintptr_t(status), C.uintptr_t(stream))
	})
}

// optionU32 stores v in *dst when it is not 0 (0 leaves the library's
// default); an error for a negative v or one past uint32.
func optionU32(op, what string, v int, dst *C.uint32_t) error {
	if v < 0 || uint64(v) > math.MaxUint32 {
		return newError(ErrRange, fmt.Sprintf("%s: %s %d is not in 0..%d", op, what, v, uint64(math.MaxUint32)))
	}
	if v != 0 {
		*dst = C.uint32_t(v)
	}
	return nil
}

// nonZero is an error naming the first of the device pointers ptrs that is 0.
func nonZero(op string, names []string, ptrs ...uintptr) error {
	for i, p := range ptrs {
		if p == 0 {
			return newError(ErrInvalid, fmt.Sprintf("%s: %s is 0", op, names[i]))
		}
	}
	return nil
}
