// Package cbench times infs_retrieve called in a loop from C, the baseline
// against which the binding's benchmark measures what a call through Go
// costs. It is for the binding's benchmarks only.
package cbench

/*
#cgo pkg-config: inferscale
#include <stdlib.h>
#include <time.h>
#include <inferscale/inferscale.h>

// Runs iters retrievals of one query and returns the CPU time in
// nanoseconds that the calling thread spent on them (wall time would count
// the time other processes of a shared machine took the core away), or a
// negative status code.
static long long retrieve_loop(infs_store *s, const char *ns, const float *query, size_t k,
                               infs_hit *out, long long iters)
{
	struct timespec t0, t1;
	size_t n;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
	for (long long i = 0; i < iters; i++) {
		int rc = infs_retrieve(out, &n, s, ns, query, 1, k, NULL);
		if (rc != INFS_OK)
			return rc;
	}
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
	return (long long)(t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec);
}

static long long thread_cpu_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int open_readonly(infs_store **out, const char *path)
{
	infs_store_options o = INFS_STORE_OPTIONS_INIT;
	o.flags = INFS_OPEN_READONLY;
	return infs_store_open(out, path, &o);
}
*/
import "C"

import (
	"errors"
	"time"
	"unsafe"
)

// Store is a store opened read-only from C.
type Store struct {
	c *C.infs_store
}

// Open opens the store at path read-only.
func Open(path string) (*Store, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var s Store
	if rc := C.open_readonly(&s.c, cpath); rc != 0 {
		return nil, errors.New("cbench: cannot open " + path)
	}
	return &s, nil
}

// Close releases the store.
func (s *Store) Close() {
	C.infs_store_close(s.c)
}

// ThreadCPU is the CPU time the calling OS thread has used; meaningful
// between two calls made with the goroutine locked to its thread.
func ThreadCPU() time.Duration {
	return time.Duration(C.thread_cpu_ns())
}

// RetrieveLoop runs iters retrievals of query (top k in namespace ns) from
// one C loop and returns the CPU time the loop took.
func (s *Store) RetrieveLoop(ns string, query []float32, k int, iters int) (time.Duration, error) {
	cns := C.CString(ns)
	defer C.free(unsafe.Pointer(cns))
	out := (*C.infs_hit)(C.malloc(C.size_t(k) * C.sizeof_infs_hit))
	defer C.free(unsafe.Pointer(out))
	ns64 := C.retrieve_loop(s.c, cns, (*C.float)(unsafe.Pointer(&query[0])), C.size_t(k), out, C.longlong(iters))
	if ns64 < 0 {
		return 0, errors.New("cbench: infs_retrieve failed")
	}
	return time.Duration(ns64), nil
}
