// Package cudart is the little of the CUDA runtime the binding's GPU tests
// need (device memory, copies, a stream), looked up at run time, so that
// the binding builds and its tests run, skipping the GPU ones, where there
// is no CUDA. It is for the binding's tests only.
package cudart

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>

typedef int (*malloc_fn)(void **, size_t);
typedef int (*free_fn)(void *);
typedef int (*memcpy_fn)(void *, const void *, size_t, int);
typedef int (*stream_create_fn)(void **);
typedef int (*stream_fn)(void *);
typedef int (*count_fn)(int *);

static malloc_fn p_malloc;
static free_fn p_free;
static memcpy_fn p_memcpy;
static stream_create_fn p_stream_create;
static stream_fn p_stream_sync, p_stream_destroy;
static count_fn p_count;

// The runtime the library loaded if its symbols are global, else one by name.
static int load(void)
{
	static const char *names[] = { NULL, "libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0" };
	for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
		void *h = dlopen(names[i], RTLD_NOW | RTLD_GLOBAL);
		if (!h)
			continue;
		p_malloc = (malloc_fn)dlsym(h, "cudaMalloc");
		p_free = (free_fn)dlsym(h, "cudaFree");
		p_memcpy = (memcpy_fn)dlsym(h, "cudaMemcpy");
		p_stream_create = (stream_create_fn)dlsym(h, "cudaStreamCreate");
		p_stream_sync = (stream_fn)dlsym(h, "cudaStreamSynchronize");
		p_stream_destroy = (stream_fn)dlsym(h, "cudaStreamDestroy");
		p_count = (count_fn)dlsym(h, "cudaGetDeviceCount");
		if (p_malloc && p_free && p_memcpy && p_stream_create && p_stream_sync && p_stream_destroy && p_count)
			return 0;
	}
	return -1;
}

// Devices usable here: 0 where a runtime is installed but no driver or GPU.
static int device_count(void) { int n = 0; return p_count(&n) == 0 ? n : 0; }
static int dev_malloc(uintptr_t *out, size_t n) { void *p = NULL; int rc = p_malloc(&p, n); *out = (uintptr_t)p; return rc; }
static int dev_free(uintptr_t p) { return p_free((void *)p); }
static int to_dev(uintptr_t dst, const void *src, size_t n) { return p_memcpy((void *)dst, src, n, 1); }
static int to_host(void *dst, uintptr_t src, size_t n) { return p_memcpy(dst, (const void *)src, n, 2); }
static int stream_create(uintptr_t *out) { void *s = NULL; int rc = p_stream_create(&s); *out = (uintptr_t)s; return rc; }
static int stream_sync(uintptr_t s) { return p_stream_sync((void *)s); }
static int stream_destroy(uintptr_t s) { return p_stream_destroy((void *)s); }
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

var loadErr = sync.OnceValue(func() error {
	if C.load() != 0 {
		return errors.New("cudart: no CUDA runtime found")
	}
	if C.device_count() == 0 {
		return errors.New("cudart: no usable CUDA device")
	}
	return nil
})

// Load finds the runtime and a device; an error where there is none.
func Load() error { return loadErr() }

func status(what string, rc C.int) error {
	if rc != 0 {
		return fmt.Errorf("cudart: %s failed with cudaError %d", what, int(rc))
	}
	return nil
}

// Malloc is n bytes of device memory.
func Malloc(n int) (uintptr, error) {
	var p C.uintptr_t
	err := status("cudaMalloc", C.dev_malloc(&p, C.size_t(n)))
	return uintptr(p), err
}

// Free frees device memory from Malloc.
func Free(p uintptr) error { return status("cudaFree", C.dev_free(C.uintptr_t(p))) }

// ToDevice copies b to device memory dst.
func ToDevice(dst uintptr, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return status("cudaMemcpy", C.to_dev(C.uintptr_t(dst), unsafe.Pointer(&b[0]), C.size_t(len(b))))
}

// ToHost copies len(b) bytes of device memory src into b.
func ToHost(b []byte, src uintptr) error {
	if len(b) == 0 {
		return nil
	}
	return status("cudaMemcpy", C.to_host(unsafe.Pointer(&b[0]), C.uintptr_t(src), C.size_t(len(b))))
}

// StreamCreate is a new stream.
func StreamCreate() (uintptr, error) {
	var s C.uintptr_t
	err := status("cudaStreamCreate", C.stream_create(&s))
	return uintptr(s), err
}

// StreamSynchronize waits for the work queued on s.
func StreamSynchronize(s uintptr) error {
	return status("cudaStreamSynchronize", C.stream_sync(C.uintptr_t(s)))
}

// StreamDestroy destroys s.
func StreamDestroy(s uintptr) error {
	return status("cudaStreamDestroy", C.stream_destroy(C.uintptr_t(s)))
}
