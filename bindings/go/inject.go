package inferscale

/*
#include <stdlib.h>
#include <inferscale/inferscale.h>
*/
import "C"

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"unsafe"
)

// KVLayout describes an engine's paged KV cache by strides, so that any
// layout fits (see include/inferscale/inject.h). Element (block b, slot s,
// head h, dim d) of layer l's K is at
//
//	K[l] + b*StrideBlock + s*StrideSlot + h*StrideHead + d*StrideDim
//
// elements of DType, and likewise for V. The pointers are C memory (such as a
// HostCache's), device memory, or Go memory that stays alive and unmoved for
// the call: Inject pins Go memory only while it runs, and C keeps no pointer.
type KVLayout struct {
	UseDevice bool // the cache is in the memory of CUDA device Device
	Device    int
	DType     DType // may differ from the store's KV dtype: converted
	Layers    uint32
	KVHeads   uint32
	HeadDim   uint32
	Blocks    uint32 // physical blocks; block ids are checked against it
	BlockSize uint32 // token slots per block
	K, V      []unsafe.Pointer

	StrideBlock, StrideSlot, StrideHead, StrideDim int64
}

// InjectOptions are for a device cache: Stream is the cudaStream_t the
// writes are queued on (nil: the default stream).
type InjectOptions struct {
	Stream unsafe.Pointer
}

// Inject writes the KV of records ids of namespace ns, in that order, at
// consecutive positions from startPos into cache: the token at position p
// goes to block blockTable[p/BlockSize], slot p%BlockSize, and its key is
// rotated to position p. Every id, block id and position is checked before
// anything is written; on error the cache is untouched. It returns the first
// position after the injected tokens. opts may be nil.
func (s *Store) Inject(ns string, ids []uint64, startPos uint32, blockTable []int32,
	cache *KVLayout, opts *InjectOptions) (uint32, error) {
	const op = "Store.Inject"
	var pin runtime.Pinner
	defer pin.Unpin()
	cl, err := layoutToC(op, cache, &pin)
	if err != nil {
		return 0, err
	}
	co := C.infs_inject_options{version: C.INFS_INJECT_OPTIONS_VERSION}
	if opts != nil {
		co.stream = opts.Stream
	}
	var next C.uint32_t
	if err := s.nsCall(op, ns, func(c *C.infs_store, cns *C.char) C.int {
		return C.infs_inject_into_blocks(&next, c, cns,
			(*C.uint64_t)(unsafe.Pointer(unsafe.SliceData(ids))), C.size_t(len(ids)), C.uint32_t(startPos),
			(*C.int32_t)(unsafe.Pointer(unsafe.SliceData(blockTable))), C.size_t(len(blockTable)), cl, &co)
	}); err != nil {
		return 0, err
	}
	return uint32(next), nil
}

// layoutToC is cache as the C layout, with the Go memory it points to pinned
// by pin until the caller's C call has returned.
func layoutToC(op string, cache *KVLayout, pin *runtime.Pinner) (*C.infs_kv_layout, error) {
	if cache == nil {
		return nil, newError(ErrInvalid, op+": cache is nil")
	}
	if len(cache.K) != int(cache.Layers) || len(cache.V) != int(cache.Layers) {
		return nil, newError(ErrInvalid, fmt.Sprintf("%s: cache has %d K and %d V layer pointers for %d layers",
			op, len(cache.K), len(cache.V), cache.Layers))
	}
	cl := &C.infs_kv_layout{
		version:      C.INFS_KV_LAYOUT_VERSION,
		device:       -1,
		dtype:        C.infs_dtype(cache.DType),
		n_layers:     C.uint32_t(cache.Layers),
		n_kv_heads:   C.uint32_t(cache.KVHeads),
		head_dim:     C.uint32_t(cache.HeadDim),
		n_blocks:     C.uint32_t(cache.Blocks),
		block_size:   C.uint32_t(cache.BlockSize),
		stride_block: C.int64_t(cache.StrideBlock),
		stride_slot:  C.int64_t(cache.StrideSlot),
		stride_head:  C.int64_t(cache.StrideHead),
		stride_dim:   C.int64_t(cache.StrideDim),
	}
	if cache.UseDevice {
		cl.device = C.int(cache.Device)
	}
	if cache.Layers > 0 {
		// Pin does nothing for C or device memory, and pins Go memory for
		// the call: the layer arrays hold pointers, so they must be pinned
		// too before C may see them.
		for l := range cache.K {
			pin.Pin(cache.K[l])
			pin.Pin(cache.V[l])
		}
		pin.Pin(&cache.K[0])
		pin.Pin(&cache.V[0])
		cl.k_layers = (*unsafe.Pointer)(unsafe.Pointer(&cache.K[0]))
		cl.v_layers = (*unsafe.Pointer)(unsafe.Pointer(&cache.V[0]))
	}
	return cl, nil
}

// RopeRotate rotates x in place: host memory laid out
// [nTokens][nHeads][g.HeadDim] in dtype, token t to position positions[t],
// with g's rotary embedding. The same arithmetic as Inject: the reference
// for engines and tests.
func RopeRotate(x []byte, dtype DType, nTokens, nHeads uint32, positions []int32, g *Geometry) error {
	const op = "RopeRotate"
	if g == nil {
		return newError(ErrInvalid, op+": geometry is nil")
	}
	if len(positions) != int(nTokens) {
		return newError(ErrInvalid, fmt.Sprintf("%s: %d positions for %d tokens", op, len(positions), nTokens))
	}
	if dtype.Size() == 0 {
		return newError(ErrInvalid, fmt.Sprintf("%s: unknown dtype %d", op, int(dtype)))
	}
	if want := int(nTokens) * int(nHeads) * int(g.HeadDim) * dtype.Size(); len(x) != want {
		return newError(ErrInvalid, fmt.Sprintf("%s: x has %d bytes, want %d", op, len(x), want))
	}
	cg := g.toC()
	return check(func() C.int {
		return C.infs_rope_rotate(unsafe.Pointer(unsafe.SliceData(x)), C.infs_dtype(dtype), C.uint32_t(nTokens),
			C.uint32_t(nHeads), (*C.int32_t)(unsafe.Pointer(unsafe.SliceData(positions))), &cg)
	})
}

// CacheFormat is a paged KV cache layout of a serving engine, per layer.
type CacheFormat int

const (
	// FormatVLLM is vLLM's (2, blocks, block_size, heads, dim): all K blocks,
	// then all V blocks.
	FormatVLLM CacheFormat = iota
	// FormatNHD is FlashInfer's NHD (blocks, 2, block_size, heads, dim).
	FormatNHD
	// FormatHND is FlashInfer's HND (blocks, 2, heads, block_size, dim).
	FormatHND
	// FormatPacked is (blocks, block_size, heads, 2*dim): K|V in the last dim.
	FormatPacked
)

func (f CacheFormat) String() string {
	switch f {
	case FormatVLLM:
		return "vllm"
	case FormatNHD:
		return "nhd"
	case FormatHND:
		return "hnd"
	case FormatPacked:
		return "packed"
	}
	return fmt.Sprintf("CacheFormat(%d)", int(f))
}

// HostCache is a paged KV cache in C host memory, for tests, examples and
// engines without a cache of their own. Close frees it (a finalizer does it
// too); slices returned by its methods are invalid after Close. It must not
// be closed while an Inject into it is running.
type HostCache struct {
	mem    unsafe.Pointer
	size   int
	layout KVLayout
}

// NewHostCache allocates a zeroed cache of blocks blocks of blockSize slots
// for layers layers of kvHeads heads of headDim elements of dtype.
func NewHostCache(format CacheFormat, dtype DType, layers, kvHeads, headDim, blocks, blockSize uint32) (*HostCache, error) {
	const op = "NewHostCache"
	es := dtype.Size()
	if es == 0 {
		return nil, newError(ErrInvalid, fmt.Sprintf("%s: unknown dtype %d", op, int(dtype)))
	}
	if layers == 0 || kvHeads == 0 || headDim == 0 || blocks == 0 || blockSize == 0 {
		return nil, newError(ErrInvalid, op+": every dimension must be positive")
	}
	// Checked in floating point first: the int64 products below cannot
	// overflow once the total is known to be below 2^40 bytes.
	if float64(layers)*2*float64(blocks)*float64(blockSize)*float64(kvHeads)*float64(headDim)*float64(es) > 1<<40 {
		return nil, newError(ErrRange, fmt.Sprintf("%s: a cache of %d layers x %d blocks x %d slots x %d heads x %d dims is too large",
			op, layers, blocks, blockSize, kvHeads, headDim))
	}
	B, H, D := int64(blockSize), int64(kvHeads), int64(headDim)
	tensor := B * H * D // elements of K (or V) in one block
	layerElems := 2 * int64(blocks) * tensor
	total := layerElems * int64(layers) * int64(es)
	l := KVLayout{DType: dtype, Layers: layers, KVHeads: kvHeads, HeadDim: headDim, Blocks: blocks, BlockSize: blockSize,
		StrideDim: 1}
	var vOff int64 // elements from a layer's K base to its V base
	switch format {
	case FormatVLLM:
		l.StrideBlock, l.StrideSlot, l.StrideHead = tensor, H*D, D
		vOff = int64(blocks) * tensor
	case FormatNHD:
		l.StrideBlock, l.StrideSlot, l.StrideHead = 2*tensor, H*D, D
		vOff = tensor
	case FormatHND:
		l.StrideBlock, l.StrideHead, l.StrideSlot = 2*tensor, B*D, D
		vOff = tensor
	case FormatPacked:
		l.StrideBlock, l.StrideSlot, l.StrideHead = 2*tensor, H*2*D, 2*D
		vOff = D
	default:
		return nil, newError(ErrInvalid, fmt.Sprintf("%s: unknown format %d", op, int(format)))
	}
	mem := C.calloc(C.size_t(total), 1)
	if mem == nil {
		return nil, newError(ErrNoMem, fmt.Sprintf("%s: cannot allocate %d bytes", op, total))
	}
	l.K = make([]unsafe.Pointer, layers)
	l.V = make([]unsafe.Pointer, layers)
	for i := range l.K {
		base := unsafe.Add(mem, int64(i)*layerElems*int64(es))
		l.K[i] = base
		l.V[i] = unsafe.Add(base, vOff*int64(es))
	}
	h := &HostCache{mem: mem, size: int(total), layout: l}
	runtime.SetFinalizer(h, (*HostCache).Close)
	return h, nil
}

// Layout describes the cache for Inject. After Close it describes no
// memory, and Inject refuses it.
func (h *HostCache) Layout() *KVLayout {
	return &h.layout
}

// Bytes is the whole cache memory.
func (h *HostCache) Bytes() []byte {
	if h.mem == nil {
		return nil
	}
	return unsafe.Slice((*byte)(h.mem), h.size)
}

// K is the HeadDim elements of layer's K at (block, slot, head), in place.
func (h *HostCache) K(layer, block, slot, head int) []byte {
	return h.at(h.layout.K, layer, block, slot, head)
}

// V is the HeadDim elements of layer's V at (block, slot, head), in place.
func (h *HostCache) V(layer, block, slot, head int) []byte {
	return h.at(h.layout.V, layer, block, slot, head)
}

func (h *HostCache) at(bases []unsafe.Pointer, layer, block, slot, head int) []byte {
	l := &h.layout
	if h.mem == nil || layer < 0 || layer >= int(l.Layers) || block < 0 || block >= int(l.Blocks) ||
		slot < 0 || slot >= int(l.BlockSize) || head < 0 || head >= int(l.KVHeads) {
		panic(fmt.Sprintf("inferscale: HostCache index (%d, %d, %d, %d) out of range or cache closed",
			layer, block, slot, head))
	}
	off := int64(block)*l.StrideBlock + int64(slot)*l.StrideSlot + int64(head)*l.StrideHead
	es := l.DType.Size()
	return unsafe.Slice((*byte)(unsafe.Add(bases[layer], off*int64(es))), int(l.HeadDim)*es)
}

// Close frees the cache memory; calling it again does nothing.
func (h *HostCache) Close() error {
	if h == nil || h.mem == nil {
		return nil
	}
	C.free(h.mem)
	h.mem = nil
	h.layout.K, h.layout.V = nil, nil
	runtime.SetFinalizer(h, nil)
	return nil
}

// Float32Bytes is s viewed as bytes, in place: the K, V or RoPE input of an
// f32 store without a copy.
func Float32Bytes(s []float32) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*4)
}

// BytesFloat32 decodes little-endian f32 elements (such as an f32 cache's
// K or V) into a new slice.
func BytesFloat32(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}
