"""Retrieval and injection on device pointers, for serving stacks: queries,
hits, ids and block tables stay in CUDA memory and the work is queued on the
caller's stream, without copies or waits (``infs_retrieve_device``,
``infs_inject_device``), so the calls can be captured in a CUDA graph.

Arrays are anything exposing ``__cuda_array_interface__`` (torch CUDA
tensors, CuPy, Numba). The interface has no device field: a torch tensor's
device is checked against the store's, any other array is trusted to be on
it. Streams: see ``_Stream`` below and docs/python.md, "Serving stacks:
device pointers".
"""

from __future__ import annotations

import sys
from typing import Any, NamedTuple, Optional, Tuple

from ._ffi import as_int, check, ffi, lib
from .arrays import is_torch
from .geometry import Metric
from .handle import Handle
from .layout import KVLayout

__all__ = ["Searcher", "Injector", "hit_ids", "hit_scores"]

_NAMES = {"<f4": "float32", "<i4": "int32", "<u4": "uint32", "<i8": "int64", "<u8": "uint64"}


class _CudaArray(NamedTuple):
    ptr: int
    shape: Tuple[int, ...]
    strides: Tuple[int, ...]  # bytes
    typestr: str
    stream: Optional[int]     # the interface's "stream" (v3), None when absent


def _cuda_array(x: Any, what: str, typestrs: Tuple[str, ...], device: int, *, writable: bool = False) -> _CudaArray:
    """x's __cuda_array_interface__, checked: one of typestrs, a data pointer,
    no mask, writable where asked, and for a torch tensor on device."""
    if is_torch(x):
        if x.device.type != "cuda":
            raise TypeError(f"{what} must be a CUDA tensor, not one on {x.device}")
        if (x.device.index or 0) != device:
            raise ValueError(f"{what} is on cuda:{x.device.index or 0}, the store's device copy on cuda:{device}")
        x = x.detach()  # torch gives no interface for a tensor that requires grad
    cai = getattr(x, "__cuda_array_interface__", None)
    if not isinstance(cai, dict):
        raise TypeError(f"{what} must be a CUDA array (an object with __cuda_array_interface__, such as a torch "
                        f"CUDA tensor or a CuPy array), not {type(x).__name__}")
    try:
        typestr, shape, (ptr, readonly) = cai["typestr"], tuple(int(n) for n in cai["shape"]), cai["data"]
        strides = cai.get("strides")
        stream = cai.get("stream") if int(cai.get("version", 0)) >= 3 else None
    except (KeyError, TypeError, ValueError):
        raise TypeError(f"{what}: malformed __cuda_array_interface__ {cai!r}") from None
    if isinstance(typestr, str) and typestr[:1] == "=" and sys.byteorder == "little":
        typestr = "<" + typestr[1:]
    if typestr not in typestrs:
        names = " or ".join(_NAMES[t] for t in typestrs)
        raise TypeError(f"{what} must hold {names}, not typestr {typestr!r}")
    if cai.get("mask") is not None:
        raise ValueError(f"{what} has a mask: masked arrays are not supported")
    if writable and readonly:
        raise ValueError(f"{what} is read-only")
    itemsize = int(typestr[2:])
    if strides is None:  # C-contiguous
        strides, step = [], itemsize
        for n in reversed(shape):
            strides.insert(0, step)
            step *= n
    strides = tuple(int(s) for s in strides)
    if len(strides) != len(shape):
        raise TypeError(f"{what}: __cuda_array_interface__ has {len(strides)} strides for {len(shape)} dimensions")
    if not isinstance(ptr, int) or (ptr == 0 and 0 not in shape):
        raise ValueError(f"{what} has no data pointer")
    if stream is not None:
        stream = as_int(stream, f"{what}'s __cuda_array_interface__ stream", "size_t")
        if stream == 0:
            raise ValueError(f"{what}: __cuda_array_interface__ stream 0 is not allowed by the interface "
                             "(1 is the legacy default stream, 2 the per-thread one)")
    return _CudaArray(int(ptr), shape, strides, typestr, stream)


def _contiguous(a: _CudaArray) -> bool:
    step = int(a.typestr[2:])
    for n, s in zip(reversed(a.shape), reversed(a.strides)):
        if n > 1 and s != step:
            return False
        step *= n
    return True


def _want(a: _CudaArray, what: str, shape: Tuple[int, ...], *, contiguous: bool = True) -> None:
    if a.shape != shape:
        raise ValueError(f"{what} has shape {a.shape}, expected {shape}")
    if contiguous and not _contiguous(a):
        raise ValueError(f"{what} is not C-contiguous (strides {a.strides} bytes)")


def _one_word(x: Any, what: str, typestrs: Tuple[str, ...], device: int, *, writable: bool) -> _CudaArray:
    """A CUDA array of exactly one 4-byte element (shape () or (1,))."""
    a = _cuda_array(x, what, typestrs, device, writable=writable)
    if a.shape not in ((), (1,)):
        raise ValueError(f"{what} must hold one element, shape () or (1,), not {a.shape}")
    return a


def _stream(stream: Any, first: Any, device: int, arrays: Tuple[Tuple[str, _CudaArray], ...]) -> int:
    """The cudaStream_t to queue on: stream (an int handle or an object with
    .cuda_stream) if given, else torch's current stream on device when first
    is a torch tensor, else the stream first's interface names, else the
    legacy default stream (0). The interface's stream (v3) is where the
    producer's work on an array is ordered: the binding cannot wait on
    another stream, so an array naming one that is not the stream it queues
    on is refused."""
    if stream is not None:
        handle = as_int(getattr(stream, "cuda_stream", stream), "stream", "size_t")
    elif is_torch(first):
        import torch
        handle = int(torch.cuda.current_stream(device).cuda_stream)
    else:
        named = arrays[0][1].stream
        handle = 0 if named is None or named == 1 else named
    for what, a in arrays:
        # 1 names the legacy default stream, which the library's 0 is
        if a.stream is not None and a.stream != handle and not (a.stream == 1 and handle == 0):
            raise ValueError(f"{what}'s __cuda_array_interface__ names stream {a.stream:#x}, the call is queued on "
                             f"stream {handle:#x}: pass stream={a.stream:#x}, or make {what} on the call's stream")
    return handle


def hit_ids(out: Any) -> Any:
    """The fact ids of Searcher.search's out, ``(n, k)`` int64, a view."""
    return out[..., 0]


def hit_scores(out: Any) -> Any:
    """The scores of Searcher.search's out, ``(n, k)`` float32, a view: the
    low 32 bits (the first 4 bytes on a little-endian machine) of
    ``out[..., 1]``, where infs_hit keeps its float score."""
    if sys.byteorder != "little":
        raise NotImplementedError("hit_scores: infs_hit's score is the low half only on little-endian machines")
    if is_torch(out):
        import torch
        return out[..., 1:2].view(torch.float32)[..., 0]
    return out[..., 1:2].view("float32")[..., 0]


class _Bound(Handle):
    """A C object bound to a store (the Handle's owner): its calls count as
    calls on the store, it is closed before the store is (Store.close closes
    what is bound to it), and never used once either is closed."""

    _what_name = ""

    def _bind(self, store: Any, ptr: Any, free: Any) -> None:
        self._adopt(ptr, free, keep=store)

    def _what(self) -> str:
        return self._what_name

    def close(self) -> None:
        """Waits for the device to finish the work queued with it, then frees
        it. Idempotent."""
        super().close()


class Searcher(_Bound):
    """The device workspace of one stream for retrieval on device pointers
    (``infs_searcher``): made for at most max_queries queries of k up to
    max_k (at most 100) per search, in namespaces of up to max_facts rows
    (0: twice the store's largest namespace now, at least 4096). Needs a
    store opened with ``device=``. One thread at a time; make one per
    thread or stream."""

    _what_name = "Searcher"

    def __init__(self, store: Any, *, max_queries: int = 32, max_k: int = 50,
                 metric: Any = Metric.COSINE, max_facts: int = 0) -> None:
        self._init_handle(store)
        opts = ffi.new("infs_searcher_options *")
        check(lib.infs_searcher_options_init(opts, lib.INFS_SEARCHER_OPTIONS_VERSION))
        opts.metric = int(Metric.coerce(metric))
        opts.max_queries = as_int(max_queries, "max_queries", "uint32")
        opts.max_k = as_int(max_k, "max_k", "uint32")
        opts.max_facts = as_int(max_facts, "max_facts", "uint64")
        out = ffi.new("infs_searcher **")
        with store._use() as p:
            check(lib.infs_searcher_create(out, p, opts))
        self.max_queries, self.max_k = int(opts.max_queries), int(opts.max_k)
        self.embed_dim, self.device = store.geometry.embed_dim, store.device
        self._bind(store, out[0], lib.infs_searcher_free)

    def search(self, ns: str, queries: Any, k: int, *, out: Any = None, counts: Any = None,
               stream: Any = None) -> Tuple[Any, Any]:
        """Queues the k best facts of ns for each query and returns
        ``(out, counts)`` at once; they are ready when the stream gets there.

        queries: float32 ``(n, embed_dim)``, C-contiguous, on the store's
        device, 1 <= n <= max_queries. out: int64 ``(n, k, 2)``, C-contiguous,
        infs_hit's layout (``hit_ids``, ``hit_scores``); entries past a
        query's count are left as they were. counts: int32 or uint32
        ``(n,)``. Either may be left out when queries is a torch tensor:
        torch allocates it. Same hits, scores and order as
        ``Store.retrieve``; a query with a non-finite value (or zero under
        cosine) gets 0 hits."""
        from .store import _ns
        d = self.device
        q = _cuda_array(queries, "queries", ("<f4",), d)
        if len(q.shape) != 2 or q.shape[1] != self.embed_dim:
            raise ValueError(f"queries has shape {q.shape}, expected (n, {self.embed_dim})")
        n = q.shape[0]
        _want(q, "queries", (n, self.embed_dim))
        if not 1 <= n <= self.max_queries:
            raise ValueError(f"queries holds {n} queries, not 1..{self.max_queries} (the searcher's max_queries)")
        k = as_int(k, "k", "size_t")
        if not 1 <= k <= self.max_k:
            raise ValueError(f"k = {k} is not in 1..{self.max_k} (the searcher's max_k)")
        if out is None or counts is None:
            if not is_torch(queries):
                raise TypeError(f"{'out' if out is None else 'counts'} is required when queries is not a torch tensor")
            import torch
            if out is None:
                out = torch.empty((n, k, 2), dtype=torch.int64, device=queries.device)
            if counts is None:
                counts = torch.empty((n,), dtype=torch.int32, device=queries.device)
        o = _cuda_array(out, "out", ("<i8",), d, writable=True)
        _want(o, "out", (n, k, 2))
        c = _cuda_array(counts, "counts", ("<i4", "<u4"), d, writable=True)
        _want(c, "counts", (n,))
        handle = _stream(stream, queries, d, (("queries", q), ("out", o), ("counts", c)))
        cns = _ns(ns)
        with self._use() as p:
            check(lib.infs_retrieve_device(p, cns, ffi.cast("const float *", q.ptr), n, k,
                                           ffi.cast("infs_hit *", o.ptr), ffi.cast("uint32_t *", c.ptr),
                                           ffi.cast("void *", handle)))
        return out, counts


class Injector(_Bound):
    """Injection from fact ids in device memory (``infs_injector``) into one
    device cache layout on the store's device, at most max_ids facts and
    max_tokens tokens per call. Needs a store opened with ``device=``. It
    keeps layout (and with it the cache tensors) alive. One thread at a
    time."""

    _what_name = "Injector"

    def __init__(self, store: Any, layout: KVLayout, *, max_ids: int = 64, max_tokens: int = 4096) -> None:
        if not isinstance(layout, KVLayout):
            raise TypeError(f"layout must be an inferscale.KVLayout, not {type(layout).__name__}")
        self._init_handle(store)
        opts = ffi.new("infs_injector_options *")
        check(lib.infs_injector_options_init(opts, lib.INFS_INJECTOR_OPTIONS_VERSION))
        opts.max_ids = as_int(max_ids, "max_ids", "uint32")
        opts.max_tokens = as_int(max_tokens, "max_tokens", "uint32")
        out = ffi.new("infs_injector **")
        with store._use() as p:
            check(lib.infs_injector_create(out, p, layout._c, opts))
        self.layout, self.max_ids, self.max_tokens = layout, int(opts.max_ids), int(opts.max_tokens)
        self.device = store.device
        self._bind(store, out[0], lib.infs_injector_free)

    def inject(self, ns: str, ids: Any, n_ids: Any, start_pos: int, block_table: Any, *,
               next_pos: Any = None, status: Any = None, stream: Any = None) -> None:
        """Queues the injection of the first ``n_ids[0]`` ids of ns at
        consecutive positions from start_pos (``Store.inject`` with every
        argument on the device) and returns at once.

        ids: uint64 or int64 ``(m,)`` with any stride of whole 8-byte words,
        or a search's hits for one query, ``out[q]`` (int64 ``(k, 2)``: the
        ids are ``[:, 0]``, 16 bytes apart). n_ids: one int32 or uint32 (e.g.
        ``counts[q:q+1]``); it must not exceed m, which only the device
        knows, nor max_ids. block_table: int32 ``(len,)``, C-contiguous.
        next_pos (int32/uint32) and status (int32): one element each,
        optional, written on the device: the first position after the
        injected tokens, and 0 or the negative status of a call that wrote
        nothing (NotFoundError's code for an id that is not a live fact of
        ns, RangeError's for a limit)."""
        from .store import _ns
        d = self.device
        a = _cuda_array(ids, "ids", ("<u8", "<i8"), d)
        if len(a.shape) == 2:
            if a.shape[1] != 2:
                raise ValueError(f"ids of shape {a.shape} must be a search's hits for one query, (k, 2)")
        elif len(a.shape) != 1:
            raise ValueError(f"ids must be (m,) or a search's hits (k, 2), not shape {a.shape}")
        # ids[i] (or ids[i, 0]) is at i * strides[0]; one id has no stride to speak of
        id_stride = a.strides[0] if a.shape[0] > 1 else 8
        if id_stride < 8 or id_stride % 8:
            raise ValueError(f"ids' stride {id_stride} bytes is not a positive multiple of 8")
        n = _one_word(n_ids, "n_ids", ("<u4", "<i4"), d, writable=False)
        bt = _cuda_array(block_table, "block_table", ("<i4",), d)
        if len(bt.shape) != 1 or bt.shape[0] == 0:
            raise ValueError(f"block_table must be (len,) with len >= 1, not shape {bt.shape}")
        _want(bt, "block_table", bt.shape)
        start_pos = as_int(start_pos, "start_pos", "uint32")
        arrays = [("ids", a), ("n_ids", n), ("block_table", bt)]
        np_ptr = st_ptr = ffi.NULL
        if next_pos is not None:
            arrays.append(("next_pos", _one_word(next_pos, "next_pos", ("<u4", "<i4"), d, writable=True)))
            np_ptr = ffi.cast("uint32_t *", arrays[-1][1].ptr)
        if status is not None:
            arrays.append(("status", _one_word(status, "status", ("<i4",), d, writable=True)))
            st_ptr = ffi.cast("int32_t *", arrays[-1][1].ptr)
        handle = _stream(stream, ids, d, tuple(arrays))
        cns = _ns(ns)
        with self._use() as p:
            check(lib.infs_inject_device(p, cns, ffi.cast("const void *", a.ptr), id_stride,
                                         ffi.cast("const uint32_t *", n.ptr), start_pos,
                                         ffi.cast("const int32_t *", bt.ptr), bt.shape[0], np_ptr, st_ptr,
                                         ffi.cast("void *", handle)))

