"""KV cache layouts: how an engine's cache tensors map onto the library's
strided ``infs_kv_layout``, for vLLM, FlashInfer, K|V packed, a plain
contiguous cache and transformers' DynamicCache.

Every constructor reduces the engine's tensors to per-layer views of shape
``(n_blocks, block_size, n_kv_heads, head_dim)`` (views, never copies) and
hands their data pointers and strides to the library; the views keep the
tensors alive for as long as the layout lives.
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence

from ._ffi import as_int, check, ffi, lib
from .arrays import dtype_of, is_torch
from .geometry import DType

__all__ = ["KVLayout"]


def _strides(view: Any) -> List[int]:
    if is_torch(view):
        return list(view.stride())
    item = view.dtype.itemsize
    if any(s % item for s in view.strides):
        raise ValueError("KV cache strides must be multiples of the element size")
    return [s // item for s in view.strides]


def _pointer(view: Any) -> int:
    if is_torch(view):
        return int(view.data_ptr())
    if not view.flags.writeable:
        raise ValueError("KV cache arrays must be writable")
    return int(view.__array_interface__["data"][0])


def _device(view: Any) -> int:
    if is_torch(view):
        if view.device.type == "cuda":
            return int(view.device.index if view.device.index is not None else 0)
        if view.device.type != "cpu":
            raise ValueError(f"KV cache on unsupported device {view.device}")
    return -1


def _layers(caches: Any) -> list:
    """A list of per-layer tensors from a list/tuple, or a stacked array/tensor
    whose first axis is the layer."""
    if isinstance(caches, (list, tuple)):
        return list(caches)
    return [caches[i] for i in range(caches.shape[0])]


class KVLayout:
    """A KV cache the library writes into.

    ``k_views[l]`` and ``v_views[l]`` are layer l's K and V as arrays of shape
    ``(n_blocks, block_size, n_kv_heads, head_dim)`` with any strides (numpy
    arrays, or torch tensors on the CPU or one CUDA device), all layers with
    the same shape, strides and dtype. Prefer the named constructors.
    """

    def __init__(self, k_views: Sequence[Any], v_views: Sequence[Any]) -> None:
        k_views, v_views = list(k_views), list(v_views)
        if not k_views or len(k_views) != len(v_views):
            raise ValueError(f"KVLayout: {len(k_views)} K layers and {len(v_views)} V layers")
        first = k_views[0]
        shape = tuple(first.shape)
        if len(shape) != 4:
            raise ValueError(f"KVLayout: per-layer views must be 4-D (blocks, slots, heads, dim), got {shape}")
        strides = _strides(first)
        if shape[0] == 1:
            # One block (a contiguous cache): its stride is never used, but must
            # be positive and keep blocks disjoint; numpy gives a new axis 0.
            strides[0] = 1 + sum((n - 1) * abs(s) for n, s in zip(shape[1:], strides[1:]))
        self.dtype: DType = dtype_of(first)
        self.device: int = _device(first)
        for i, view in enumerate(k_views + v_views):
            which = f"{'KV'[i >= len(k_views)]} layer {i % len(k_views)}"
            if tuple(view.shape) != shape:
                raise ValueError(f"KVLayout: {which} has shape {tuple(view.shape)}, layer 0 has {shape}")
            if _strides(view)[1:] != strides[1:] or (shape[0] > 1 and _strides(view) != strides):
                raise ValueError(f"KVLayout: {which} has strides {_strides(view)}, layer 0 has {strides}")
            if dtype_of(view) != self.dtype:
                raise ValueError(f"KVLayout: {which} has dtype {view.dtype}, layer 0 has {first.dtype}")
            if _device(view) != self.device:
                raise ValueError(f"KVLayout: {which} is on another device than layer 0")
        self.n_blocks, self.block_size, self.n_kv_heads, self.head_dim = (int(s) for s in shape)
        self.n_layers = len(k_views)
        self.strides = tuple(strides)
        self.k_views, self.v_views = k_views, v_views
        self._k_ptrs = ffi.new("void *[]", [ffi.cast("void *", _pointer(v)) for v in k_views])
        self._v_ptrs = ffi.new("void *[]", [ffi.cast("void *", _pointer(v)) for v in v_views])
        c = ffi.new("infs_kv_layout *")
        check(lib.infs_kv_layout_init(c, lib.INFS_KV_LAYOUT_VERSION))
        c.device = self.device
        c.dtype = int(self.dtype)
        c.n_layers = self.n_layers
        c.n_kv_heads = self.n_kv_heads
        c.head_dim = self.head_dim
        c.n_blocks = self.n_blocks
        c.block_size = self.block_size
        c.k_layers = self._k_ptrs
        c.v_layers = self._v_ptrs
        c.stride_block, c.stride_slot, c.stride_head, c.stride_dim = strides
        self._c = c

    def __repr__(self) -> str:
        where = "host" if self.device < 0 else f"cuda:{self.device}"
        return (f"KVLayout({self.n_layers} layers, {self.n_blocks} blocks x {self.block_size} slots, "
                f"{self.n_kv_heads} heads x {self.head_dim}, {self.dtype.name.lower()}, {where}, "
                f"strides {self.strides})")

    @property
    def capacity(self) -> int:
        """Token slots in the cache (n_blocks * block_size)."""
        return self.n_blocks * self.block_size

    # Engines' layouts. Each takes one tensor per layer (a list) or all layers
    # stacked on a leading axis.

    @classmethod
    def vllm(cls, kv_caches: Any) -> "KVLayout":
        """vLLM's per-layer ``(2, n_blocks, block_size, n_kv_heads, head_dim)``."""
        layers = _layers(kv_caches)
        return cls([t[0] for t in layers], [t[1] for t in layers])

    @classmethod
    def flashinfer(cls, kv_caches: Any, layout: str = "NHD") -> "KVLayout":
        """FlashInfer's per-layer ``(n_blocks, 2, block_size, n_kv_heads, head_dim)`` (NHD)
        or ``(n_blocks, 2, n_kv_heads, block_size, head_dim)`` (HND)."""
        layers = _layers(kv_caches)
        layout = layout.upper()
        if layout == "NHD":
            return cls([t[:, 0] for t in layers], [t[:, 1] for t in layers])
        if layout == "HND":
            return cls([t[:, 0].swapaxes(1, 2) for t in layers], [t[:, 1].swapaxes(1, 2) for t in layers])
        raise ValueError(f"unknown FlashInfer layout {layout!r} (NHD or HND)")

    @classmethod
    def paged(cls, k_caches: Any, v_caches: Any, layout: str = "NHD") -> "KVLayout":
        """Separate K and V tensors per layer, ``(n_blocks, block_size, n_kv_heads, head_dim)``
        (NHD) or ``(n_blocks, n_kv_heads, block_size, head_dim)`` (HND)."""
        ks, vs = _layers(k_caches), _layers(v_caches)
        layout = layout.upper()
        if layout == "NHD":
            return cls(ks, vs)
        if layout == "HND":
            return cls([t.swapaxes(1, 2) for t in ks], [t.swapaxes(1, 2) for t in vs])
        raise ValueError(f"unknown paged layout {layout!r} (NHD or HND)")

    @classmethod
    def packed(cls, kv_caches: Any) -> "KVLayout":
        """K and V packed in the last dimension: ``(n_blocks, block_size, n_kv_heads, 2 * head_dim)``."""
        layers = _layers(kv_caches)
        d = int(layers[0].shape[-1]) // 2
        return cls([t[..., :d] for t in layers], [t[..., d:] for t in layers])

    @classmethod
    def contiguous(cls, k: Any, v: Any, layout: str = "THD") -> "KVLayout":
        """A plain cache: per layer ``(n_tokens, n_kv_heads, head_dim)`` (THD) or
        ``(n_kv_heads, n_tokens, head_dim)`` (HTD, transformers' order without the
        batch axis). It is one block of n_tokens slots: inject with block_table [0]."""
        ks, vs = _layers(k), _layers(v)
        layout = layout.upper()
        if layout == "HTD":
            ks, vs = [t.swapaxes(0, 1) for t in ks], [t.swapaxes(0, 1) for t in vs]
        elif layout != "THD":
            raise ValueError(f"unknown contiguous layout {layout!r} (THD or HTD)")
        return cls([t[None] for t in ks], [t[None] for t in vs])

    @classmethod
    def transformers(cls, cache: Any, batch_index: int = 0) -> "KVLayout":
        """transformers' cache: a DynamicCache (its layers' ``keys``/``values``) or a
        sequence of per-layer ``(keys, values)``, each ``(batch, n_kv_heads, seq, head_dim)``;
        one sequence of the batch, as one block of ``seq`` slots."""
        batch_index = as_int(batch_index, "batch_index", "int64")
        if hasattr(cache, "layers"):
            pairs = [(layer.keys, layer.values) for layer in cache.layers]
        else:
            pairs = [tuple(p[:2]) for p in cache]
        return cls.contiguous([k[batch_index] for k, _ in pairs], [v[batch_index] for _, v in pairs],
                              layout="HTD")

    def stream_for(self, stream: Optional[Any]) -> Any:
        """The cudaStream_t to inject on: ``stream`` (a torch.cuda.Stream, an int
        handle or None), defaulting for a CUDA cache to torch's current stream."""
        if self.device < 0:
            return ffi.NULL
        if stream is None:
            import torch
            stream = torch.cuda.current_stream(self.device)
        handle = as_int(getattr(stream, "cuda_stream", stream), "stream", "size_t")
        return ffi.cast("void *", handle)
