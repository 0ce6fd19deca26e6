"""Arrays in and out of the C library: numpy arrays and torch tensors (CPU or
CUDA) are handed over by data pointer, without copies, whenever their dtype
and memory order already fit; otherwise a converted copy is made."""

from __future__ import annotations

from typing import Any, Sequence, Tuple

import numpy as np

from ._ffi import INT_RANGES, as_int, ffi, out_of_range
from .geometry import DType

__all__ = ["is_torch", "as_float32_vectors", "bf16_to_float32", "float32_to_bf16", "as_int_array"]

_NP_DTYPES = {DType.F32: np.dtype(np.float32), DType.F16: np.dtype(np.float16),
              DType.BF16: np.dtype(np.uint16)}


def is_torch(x: Any) -> bool:
    """True for a torch.Tensor (without importing torch)."""
    return type(x).__module__.startswith("torch") and hasattr(x, "data_ptr")


def as_int_array(values: Any, what: str, ctype: str) -> np.ndarray:
    """A flat C-contiguous array of ctype (int32, uint32, int64 or uint64)
    from a numpy integer array, a torch integer tensor, a sequence of ints or
    one int; no copy when values already is one. Bool and floating-point
    arrays and non-int elements raise TypeError; a value outside ctype's range
    raises RangeError naming it and its index, before anything is cast."""
    if isinstance(values, (str, bytes, bytearray)):
        raise TypeError(f"{what} must be integers, not {type(values).__name__}")
    if is_torch(values):
        if values.is_floating_point() or values.is_complex() or str(values.dtype) == "torch.bool":
            raise TypeError(f"{what} must be integers, not a {values.dtype} tensor")
        values = values.detach().cpu().numpy()
    if not isinstance(values, np.ndarray) or values.dtype == object:
        # Python ints (and numpy scalars mixed with them) one by one: numpy
        # would turn a list holding 1.9 or True into a float or bool array.
        flat = np.asarray(values, dtype=object).reshape(-1)
        ints = [as_int(v, f"{what}[{i}]", ctype) for i, v in enumerate(flat)]
        return np.array(ints, dtype=np.dtype(ctype))
    if values.dtype.kind not in "iu":
        raise TypeError(f"{what} must be integers, not a {values.dtype} array")
    flat = values.reshape(-1)
    lo, hi = INT_RANGES[ctype]
    info = np.iinfo(flat.dtype)
    # Each bound is compared only where the array's type can exceed it, so
    # it is representable in that type and the comparison is exact.
    bad = np.zeros(flat.shape, dtype=bool)
    if info.min < lo:
        bad |= flat < flat.dtype.type(lo)
    if info.max > hi:
        bad |= flat > flat.dtype.type(hi)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise out_of_range(f"{what}[{i}]", int(flat[i]), ctype)
    return np.ascontiguousarray(flat, dtype=np.dtype(ctype))


def torch_dtype(dtype: DType):
    import torch
    return {DType.F32: torch.float32, DType.F16: torch.float16, DType.BF16: torch.bfloat16}[dtype]


def dtype_of(x: Any) -> DType:
    """The DType of a torch tensor or numpy array (ValueError for others)."""
    if is_torch(x):
        import torch
        table = {torch.float32: DType.F32, torch.float16: DType.F16, torch.bfloat16: DType.BF16}
        if x.dtype in table:
            return table[x.dtype]
    else:
        table = {np.dtype(np.float32): DType.F32, np.dtype(np.float16): DType.F16}
        dt = np.asarray(x).dtype
        if dt in table:
            return table[dt]
        if dt.name == "bfloat16":  # ml_dtypes
            return DType.BF16
    raise ValueError(f"unsupported KV element type {getattr(x, 'dtype', type(x))}; "
                     "use float32, float16 or bfloat16")


def bf16_to_float32(bits: np.ndarray) -> np.ndarray:
    """bfloat16 values given as their uint16 bit patterns, as float32."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def float32_to_bf16(x: np.ndarray) -> np.ndarray:
    """float32 rounded to bfloat16 (nearest, ties to even), as uint16 bit patterns."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    if nan.any():
        rounded[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return rounded


def as_float32_vectors(x: Any, dim: int, what: str = "vector") -> np.ndarray:
    """A C-contiguous float32 (n, dim) array from a vector or a batch of vectors
    (numpy, torch on any device, or a sequence); no copy when x already is one."""
    if is_torch(x):
        x = x.detach()
        if x.device.type != "cpu":
            x = x.cpu()
        if x.dtype != __import__("torch").float32:
            x = x.float()
        x = x.numpy()
    a = np.ascontiguousarray(x, dtype=np.float32)
    if a.ndim == 1:
        a = a.reshape(1, -1)
    if a.ndim != 2 or a.shape[1] != dim:
        raise ValueError(f"{what}: expected {dim} floats per vector, got shape {tuple(np.shape(x))}")
    return a


def _fp8_convert(dst: Any, dst_dtype: DType, src: Any, src_dtype: DType, shape: Sequence[int]) -> None:
    """infs_kv_convert of one K or V of shape (n_layers, n_tokens, n_kv_heads,
    head_dim) between float32 and fp8 e4m3 with its scales."""
    from ._ffi import check, lib
    g = ffi.new("infs_geometry *")
    check(lib.infs_geometry_init(g, lib.INFS_GEOMETRY_VERSION))
    g.n_layers, g.n_kv_heads, g.head_dim = shape[0], shape[2], shape[3]
    g.rotary_dim = shape[3]
    check(lib.infs_kv_convert(ffi.cast("void *", ffi.from_buffer(dst)), int(dst_dtype),
                              ffi.cast("const void *", ffi.from_buffer(src)), int(src_dtype), g, shape[1]))


def fp8_bytes(shape: Sequence[int]) -> int:
    """Bytes of one fp8 K or V: the e4m3 bytes and an f32 scale per row."""
    return int(np.prod(shape)) + 4 * int(np.prod(shape[:3]))


def fp8_quantized(x: np.ndarray) -> np.ndarray:
    """float32 KV of shape (n_layers, n_tokens, n_kv_heads, head_dim) as an
    fp8 store keeps it: quantized to e4m3 with an f32 scale per row, then
    dequantized (infs_kv_convert both ways)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    q = np.empty(fp8_bytes(x.shape), dtype=np.uint8)
    out = np.empty_like(x)
    _fp8_convert(q, DType.FP8_E4M3, x, DType.F32, x.shape)
    _fp8_convert(out, DType.F32, q, DType.FP8_E4M3, x.shape)
    return out


def host_kv(x: Any, dtype: DType, shape: Sequence[int], what: str) -> Tuple[Any, Any]:
    """(void* pointer, keepalive) to host memory holding x as a C-contiguous
    array of dtype and shape. A torch CPU tensor or numpy array that already
    fits is passed by pointer; anything else is converted into a copy. For
    FP8_E4M3, x holds floats and is quantized into a new buffer."""
    shape = tuple(int(s) for s in shape)
    if dtype == DType.FP8_E4M3:
        f = x.detach().cpu().float().numpy() if is_torch(x) else np.asarray(x)
        if f.shape != shape:
            raise ValueError(f"{what}: expected shape {shape}, got {f.shape}")
        if f.dtype.name == "bfloat16" or f.dtype == np.uint16:
            f = bf16_to_float32(f.view(np.uint16))
        q = np.empty(fp8_bytes(shape), dtype=np.uint8)
        _fp8_convert(q, DType.FP8_E4M3, np.ascontiguousarray(f, dtype=np.float32), DType.F32, shape)
        return ffi.cast("void *", ffi.from_buffer(q)), q
    if is_torch(x):
        t = x.detach()
        if tuple(t.shape) != shape:
            raise ValueError(f"{what}: expected shape {shape}, got {tuple(t.shape)}")
        t = t.to(device="cpu", dtype=torch_dtype(dtype)).contiguous()
        return ffi.cast("void *", t.data_ptr()), t
    a = np.asarray(x)
    if a.shape != shape:
        raise ValueError(f"{what}: expected shape {shape}, got {a.shape}")
    if dtype == DType.BF16:
        if a.dtype == np.uint16 or a.dtype.name == "bfloat16":
            a = np.ascontiguousarray(a).view(np.uint16)
        else:
            a = float32_to_bf16(a.astype(np.float32, copy=False))
    else:
        a = np.ascontiguousarray(a, dtype=_NP_DTYPES[dtype])
    return ffi.cast("void *", ffi.from_buffer(a)), a


def kv_from_c(ptr, dtype: DType, shape: Sequence[int]) -> np.ndarray:
    """A numpy copy of C memory holding a C-contiguous dtype array of shape;
    bfloat16 comes back as float32 (exact), fp8 e4m3 dequantized to float32."""
    n = int(np.prod(shape))
    if dtype == DType.FP8_E4M3:
        q = np.frombuffer(ffi.buffer(ffi.cast("char *", ptr), fp8_bytes(shape)), dtype=np.uint8)
        out = np.empty(shape, dtype=np.float32)
        _fp8_convert(out, DType.F32, q, DType.FP8_E4M3, shape)
        return out
    np_dtype = _NP_DTYPES[dtype]
    a = np.frombuffer(ffi.buffer(ffi.cast("char *", ptr), n * np_dtype.itemsize), dtype=np_dtype)
    a = a.reshape(shape)
    return bf16_to_float32(a) if dtype == DType.BF16 else a.copy()
