package inferscale

/*
#include <inferscale/inferscale.h>
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Metric is how a query is scored against the facts' embeddings.
type Metric int

const (
	Cosine       Metric = C.INFS_METRIC_COSINE
	InnerProduct Metric = C.INFS_METRIC_IP
)

// Backend is which search carries out a retrieval.
type Backend int

const (
	BackendAuto  Backend = C.INFS_BACKEND_AUTO  // device copy if any, FAISS for large namespaces, else exact
	BackendExact Backend = C.INFS_BACKEND_EXACT // exact search on the CPU
	BackendFAISS Backend = C.INFS_BACKEND_FAISS // the store's FAISS index
	BackendCUDA  Backend = C.INFS_BACKEND_CUDA  // exact search on the store's device copy
)

// RetrieveOptions select the metric and the backend; nil or the zero value
// is cosine similarity with BackendAuto.
type RetrieveOptions struct {
	Metric  Metric
	Backend Backend
}

// Hit is one retrieved fact. Its layout is infs_hit's, so results are
// written by C straight into Go slices of Hit.
type Hit struct {
	ID    uint64
	Score float32
}

// Compile-time proof that Hit and infs_hit have the same layout: each index
// is out of range, and the build fails, unless the difference is 0.
var (
	_ = [1]struct{}{}[unsafe.Sizeof(Hit{})-C.sizeof_infs_hit]
	_ = [1]struct{}{}[unsafe.Offsetof(Hit{}.Score)-unsafe.Offsetof(C.infs_hit{}.score)]
)

// Retrieve returns the k best facts of namespace ns for query (EmbedDim
// floats), best first, equal scores by increasing id; fewer than k when the
// namespace is smaller, none for an empty or unknown namespace. Segments and
// facts of other namespaces are never returned. opts may be nil.
func (s *Store) Retrieve(ns string, query []float32, k int, opts *RetrieveOptions) ([]Hit, error) {
	if k < 1 || k > RetrieveKMax {
		return nil, kError("Store.Retrieve", k)
	}
	hits := make([]Hit, k)
	n, err := s.RetrieveInto(hits, ns, query, opts)
	if err != nil {
		return nil, err
	}
	return hits[:n:n], nil
}

// RetrieveInto is Retrieve with k = len(dst), writing the hits into dst
// without allocating: it returns how many were found.
func (s *Store) RetrieveInto(dst []Hit, ns string, query []float32, opts *RetrieveOptions) (int, error) {
	var n [1]C.size_t
	if err := s.retrieve("Store.RetrieveInto", dst, n[:], ns, query, len(dst), opts); err != nil {
		return 0, err
	}
	return int(n[0]), nil
}

// RetrieveBatch runs len(queries)/EmbedDim queries at once; queries holds
// them row after row. Result q holds the hits of query q.
func (s *Store) RetrieveBatch(ns string, queries []float32, k int, opts *RetrieveOptions) ([][]Hit, error) {
	const op = "Store.RetrieveBatch"
	if k < 1 || k > RetrieveKMax {
		return nil, kError(op, k)
	}
	if s == nil {
		return nil, closedError(op)
	}
	d := int(s.geom.EmbedDim)
	if d == 0 || len(queries) == 0 || len(queries)%d != 0 {
		return nil, newError(ErrInvalid, fmt.Sprintf("%s: queries hold %d floats, not a positive multiple of embed_dim %d",
			op, len(queries), d))
	}
	nq := len(queries) / d
	hits := make([]Hit, nq*k)
	counts := make([]C.size_t, nq)
	if err := s.retrieve(op, hits, counts, ns, queries, k, opts); err != nil {
		return nil, err
	}
	out := make([][]Hit, nq)
	for q := range out {
		n := int(counts[q])
		out[q] = hits[q*k : q*k+n : q*k+n]
	}
	return out, nil
}

func kError(op string, k int) error {
	return newError(ErrRange, fmt.Sprintf("%s: k %d is not in 1..%d", op, k, RetrieveKMax))
}

// retrieve checks what C cannot (the lengths of the Go slices) and calls
// infs_retrieve with len(counts) queries writing into hits and counts.
func (s *Store) retrieve(op string, hits []Hit, counts []C.size_t, ns string, queries []float32, k int, opts *RetrieveOptions) error {
	if k < 1 || k > RetrieveKMax {
		return kError(op, k)
	}
	cns, err := cstring(op, "namespace", ns)
	if err != nil {
		return err
	}
	c, err := s.acquire(op)
	if err != nil {
		return err
	}
	defer s.release()
	nq := len(counts)
	if d := int(s.geom.EmbedDim); len(queries) != nq*d || d == 0 {
		return newError(ErrInvalid, fmt.Sprintf("%s: query holds %d floats, the store's embed_dim is %d",
			op, len(queries)/max(nq, 1), d))
	}
	var co *C.infs_retrieve_options // NULL: the defaults, and no allocation
	if opts != nil {
		co = &C.infs_retrieve_options{version: C.INFS_RETRIEVE_OPTIONS_VERSION,
			metric: C.infs_metric(opts.Metric), backend: C.infs_backend(opts.Backend)}
	}
	// hits, counts and queries are Go memory without pointers, passed in
	// place for the duration of the call.
	return check(func() C.int {
		return C.infs_retrieve((*C.infs_hit)(unsafe.Pointer(unsafe.SliceData(hits))), unsafe.SliceData(counts),
			c, charp(cns), (*C.float)(unsafe.Pointer(unsafe.SliceData(queries))), C.size_t(nq), C.size_t(k), co)
	})
}
