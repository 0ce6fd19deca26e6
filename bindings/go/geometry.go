package inferscale

/*
#include <inferscale/inferscale.h>
*/
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"
)

// DType is the element type of a KV cache or of a store's KV.
type DType int

const (
	F32  DType = C.INFS_DTYPE_F32
	F16  DType = C.INFS_DTYPE_F16
	BF16 DType = C.INFS_DTYPE_BF16
	// FP8E4M3 is a store's kv_dtype only: e4m3 bytes, then an f32 scale per
	// (layer, token, KV head); ConvertKV quantizes into it.
	FP8E4M3 DType = C.INFS_DTYPE_FP8_E4M3
)

// Size is the size in bytes of one element, or 0 for an unknown dtype.
func (d DType) Size() int {
	return int(C.infs_dtype_size(C.infs_dtype(d)))
}

func (d DType) String() string {
	switch d {
	case F32:
		return "f32"
	case F16:
		return "f16"
	case BF16:
		return "bf16"
	case FP8E4M3:
		return "fp8_e4m3"
	}
	return fmt.Sprintf("DType(%d)", int(d))
}

// RopeStyle is how the rotary dimensions are paired.
type RopeStyle int

const (
	RopeNeoX RopeStyle = C.INFS_ROPE_NEOX // pairs (i, i + rotary_dim/2): Llama, Mistral, Qwen in HF
	RopeGPTJ RopeStyle = C.INFS_ROPE_GPTJ // pairs (2i, 2i + 1): GPT-J, llama.cpp's "normal" mode
)

// RopeScaling is how the rotary frequencies are rescaled for long contexts.
type RopeScaling int

const (
	RopeScalingNone   RopeScaling = C.INFS_ROPE_SCALING_NONE
	RopeScalingLinear RopeScaling = C.INFS_ROPE_SCALING_LINEAR
	RopeScalingLlama3 RopeScaling = C.INFS_ROPE_SCALING_LLAMA3
	RopeScalingYaRN   RopeScaling = C.INFS_ROPE_SCALING_YARN
)

// Geometry is everything that fixes the shape and the position encoding of
// stored KV: the model a store is bound to. Start from DefaultGeometry, whose
// RoPE fields hold the library's defaults, and set the model's values.
type Geometry struct {
	Layers             uint32
	KVHeads            uint32
	HeadDim            uint32
	RotaryDim          uint32 // even, <= HeadDim; the rest of the head is not rotated
	RopeStyle          RopeStyle
	RopeTheta          float64
	RopeScaling        RopeScaling
	RopeFactor         float64 // linear, llama3, yarn
	RopeLowFreqFactor  float64 // llama3
	RopeHighFreqFactor float64 // llama3
	RopeOriginalMaxPos uint32  // llama3, yarn
	RopeBetaFast       float64 // yarn
	RopeBetaSlow       float64 // yarn
	RopeAttnFactor     float64 // yarn cos/sin scale; 0 = 0.1 ln(factor) + 1
	KVDType            DType
	EmbedDim           uint32 // retrieval embedding size; 0 = no embeddings
}

// DefaultGeometry is INFS_GEOMETRY_INIT: no layers yet, the library's RoPE
// defaults, f16 KV.
func DefaultGeometry() Geometry {
	var g C.infs_geometry
	C.infs_geometry_init(&g, C.INFS_GEOMETRY_VERSION)
	return geometryFromC(&g)
}

func geometryFromC(g *C.infs_geometry) Geometry {
	return Geometry{
		Layers:             uint32(g.n_layers),
		KVHeads:            uint32(g.n_kv_heads),
		HeadDim:            uint32(g.head_dim),
		RotaryDim:          uint32(g.rotary_dim),
		RopeStyle:          RopeStyle(g.rope_style),
		RopeTheta:          float64(g.rope_theta),
		RopeScaling:        RopeScaling(g.rope_scaling),
		RopeFactor:         float64(g.rope_factor),
		RopeLowFreqFactor:  float64(g.rope_low_freq_factor),
		RopeHighFreqFactor: float64(g.rope_high_freq_factor),
		RopeOriginalMaxPos: uint32(g.rope_original_max_pos),
		RopeBetaFast:       float64(g.rope_beta_fast),
		RopeBetaSlow:       float64(g.rope_beta_slow),
		RopeAttnFactor:     float64(g.rope_attn_factor),
		KVDType:            DType(g.kv_dtype),
		EmbedDim:           uint32(g.embed_dim),
	}
}

func (g *Geometry) toC() C.infs_geometry {
	return C.infs_geometry{
		version:               C.INFS_GEOMETRY_VERSION,
		n_layers:              C.uint32_t(g.Layers),
		n_kv_heads:            C.uint32_t(g.KVHeads),
		head_dim:              C.uint32_t(g.HeadDim),
		rotary_dim:            C.uint32_t(g.RotaryDim),
		rope_style:            C.infs_rope_style(g.RopeStyle),
		rope_theta:            C.double(g.RopeTheta),
		rope_scaling:          C.infs_rope_scaling(g.RopeScaling),
		rope_factor:           C.double(g.RopeFactor),
		rope_low_freq_factor:  C.double(g.RopeLowFreqFactor),
		rope_high_freq_factor: C.double(g.RopeHighFreqFactor),
		rope_original_max_pos: C.uint32_t(g.RopeOriginalMaxPos),
		rope_beta_fast:        C.double(g.RopeBetaFast),
		rope_beta_slow:        C.double(g.RopeBetaSlow),
		rope_attn_factor:      C.double(g.RopeAttnFactor),
		kv_dtype:              C.infs_dtype(g.KVDType),
		embed_dim:             C.uint32_t(g.EmbedDim),
	}
}

// Validate checks that g describes a usable geometry; the error names the
// offending field.
func (g Geometry) Validate() error {
	cg := g.toC()
	return check(func() C.int { return C.infs_geometry_validate(&cg) })
}

// KVTokenBytes is the number of bytes of K (or of V) one token occupies
// across all layers: a fact of n tokens has n*KVTokenBytes() bytes of K.
func (g Geometry) KVTokenBytes() int {
	cg := g.toC()
	return int(C.infs_geometry_kv_token_bytes(&cg))
}

// ConvertKV converts one fact's K (or V) of nTokens tokens, laid out as
// the store keeps them with g's shape, from srcType to dstType
// (infs_kv_convert): quantizing to FP8E4M3 with a scale per row, or
// dequantizing from it. dst and src must hold exactly their sizes.
func ConvertKV(dst []byte, dstType DType, src []byte, srcType DType, g Geometry, nTokens int) error {
	const op = "ConvertKV"
	if nTokens < 0 || nTokens > FactTokensMax {
		return newError(ErrRange, fmt.Sprintf("%s: nTokens %d is not in 0..%d", op, nTokens, FactTokensMax))
	}
	size := func(t DType) int {
		h := g
		h.KVDType = t
		return nTokens * h.KVTokenBytes()
	}
	if len(dst) != size(dstType) || len(src) != size(srcType) {
		return newError(ErrInvalid, fmt.Sprintf("%s: dst has %d bytes and src %d, want %d and %d", op,
			len(dst), len(src), size(dstType), size(srcType)))
	}
	if nTokens == 0 {
		return nil
	}
	cg := g.toC()
	err := check(func() C.int {
		return C.infs_kv_convert(unsafe.Pointer(&dst[0]), C.infs_dtype(dstType), unsafe.Pointer(&src[0]),
			C.infs_dtype(srcType), &cg, C.uint32_t(nTokens))
	})
	runtime.KeepAlive(dst)
	runtime.KeepAlive(src)
	return err
}
