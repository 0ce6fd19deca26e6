"""Searcher and Injector: retrieval and injection on device pointers.

Without a GPU: every check the binding makes on CUDA arrays (objects exposing
__cuda_array_interface__, faked here) raises before any C call, and what it
passes to C (pointers, sizes, id stride, stream) is seen through a library
whose searchers and injectors record their calls; the real library's refusals
(no CUDA, no device copy, a host cache, option ranges) come through with its
messages. test_gpu_* run where torch has CUDA and the library was built with
it: device search against Store.retrieve, a CUDA graph replayed with new
queries, device injection against host-pointer injection."""

from __future__ import annotations

import numpy as np
import pytest

import inferscale as infs
import inferscale.device as device_mod
from conftest import put_random
from inferscale._ffi import ffi, lib


class Cuda:
    """A stand-in CUDA array: only its __cuda_array_interface__."""

    def __init__(self, typestr, shape, *, ptr=0x7F0000001000, strides=None, readonly=False, stream=None,
                 version=3, **extra):
        self.__cuda_array_interface__ = dict(typestr=typestr, shape=tuple(shape), strides=strides,
                                             data=(ptr, readonly), version=version, **extra)
        if stream is not None:
            self.__cuda_array_interface__["stream"] = stream

    @property
    def ptr(self):
        return self.__cuda_array_interface__["data"][0]


class RecordingLib:
    """The real library, but searchers and injectors are fake handles whose
    calls are recorded and succeed."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        return getattr(lib, name)

    def infs_searcher_create(self, out, store, opts):
        self.calls.append(("searcher_create", opts.max_queries, opts.max_k, opts.max_facts, opts.metric))
        out[0] = ffi.cast("infs_searcher *", 0x1000)
        return 0

    def infs_searcher_free(self, p):
        self.calls.append(("searcher_free", int(ffi.cast("uintptr_t", p))))

    def infs_retrieve_device(self, s, ns, q, n, k, hits, counts, stream):
        self.calls.append(("search", ffi.string(ns).decode(), int(ffi.cast("uintptr_t", q)), n, k,
                           int(ffi.cast("uintptr_t", hits)), int(ffi.cast("uintptr_t", counts)),
                           int(ffi.cast("uintptr_t", stream))))
        return 0

    def infs_injector_create(self, out, store, layout, opts):
        self.calls.append(("injector_create", opts.max_ids, opts.max_tokens))
        out[0] = ffi.cast("infs_injector *", 0x2000)
        return 0

    def infs_injector_free(self, p):
        self.calls.append(("injector_free", int(ffi.cast("uintptr_t", p))))

    def infs_inject_device(self, inj, ns, ids, id_stride, n_ids, start_pos, bt, bt_len, next_pos, status, stream):
        u = lambda p: int(ffi.cast("uintptr_t", p))  # noqa: E731
        self.calls.append(("inject", ffi.string(ns).decode(), u(ids), id_stride, u(n_ids), start_pos, u(bt), bt_len,
                           u(next_pos), u(status), u(stream)))
        return 0

    def reached(self, what):
        return [c for c in self.calls if c[0] == what]


@pytest.fixture
def rec(monkeypatch):
    r = RecordingLib()
    monkeypatch.setattr(device_mod, "lib", r)
    return r


@pytest.fixture
def searcher(store, rec):
    with infs.Searcher(store, max_queries=4, max_k=10) as s:
        yield s


def host_layout(geometry, n_blocks=4, block_size=4):
    shape = (n_blocks, block_size, geometry.n_kv_heads, geometry.head_dim)
    k = [np.zeros(shape, np.float32) for _ in range(geometry.n_layers)]
    v = [np.zeros(shape, np.float32) for _ in range(geometry.n_layers)]
    return infs.KVLayout.paged(k, v)


@pytest.fixture
def injector(store, geometry, rec):
    with infs.Injector(store, host_layout(geometry), max_ids=8, max_tokens=64) as inj:
        yield inj


def queries(n=2, dim=16, **kw):
    return Cuda("<f4", (n, dim), **kw)


def hits(n=2, k=5, **kw):
    return Cuda("<i8", (n, k, 2), ptr=0x7F0000002000, **kw)


def counts(n=2, typestr="<i4", **kw):
    return Cuda(typestr, (n,), ptr=0x7F0000003000, **kw)


# The real library


def test_searcher_needs_a_device_copy(store):
    with pytest.raises(infs.UnsupportedError) as e:
        infs.Searcher(store)
    want = ("the store has no device copy (open it with options.device >= 0)" if infs.features()["cuda"]
            else "CUDA is not in this build")
    assert str(e.value) == f"infs_searcher_create: {want}"
    assert e.value.code == lib.INFS_EUNSUPPORTED


def test_searcher_options_are_checked_by_the_library(store):
    with pytest.raises(infs.RangeError, match=r"infs_searcher_create: max_k 101 is not in 1\.\.100"):
        infs.Searcher(store, max_k=101)
    with pytest.raises(infs.RangeError, match=r"max_queries 0 is not in 1\.\.4096"):
        infs.Searcher(store, max_queries=0)
    with pytest.raises(infs.RangeError, match="max_k = -1 is out of range for uint32"):
        infs.Searcher(store, max_k=-1)
    with pytest.raises(TypeError, match="max_facts must be an int"):
        infs.Searcher(store, max_facts=1.0)


def test_injector_refuses_a_host_cache(store, geometry):
    with pytest.raises(infs.InvalidArgumentError, match="infs_injector_create: the cache is in host memory"):
        infs.Injector(store, host_layout(geometry))
    with pytest.raises(TypeError, match="layout must be an inferscale.KVLayout"):
        infs.Injector(store, [])


def test_injector_needs_a_device_copy(store, geometry):
    layout = host_layout(geometry)
    layout._c.device = 0  # described as a device cache: the library refuses it before it reads any memory
    with pytest.raises(infs.UnsupportedError) as e:
        infs.Injector(store, layout)
    want = ("the store has no device copy (open it with options.device >= 0)" if infs.features()["cuda"]
            else "layout device is 0 but this build has no CUDA support")
    assert str(e.value) == f"infs_injector_create: {want}"


def test_namespace_generation(store):
    rng = np.random.default_rng(3)
    assert store.namespace_generation("u") == 0
    seen = [0]
    fid = put_random(store, "u", 3, rng)
    seen.append(store.namespace_generation("u"))
    put_random(store, "v", 3, rng)  # another namespace leaves u's alone
    assert store.namespace_generation("u") == seen[-1]
    put_random(store, "u", 2, rng)
    seen.append(store.namespace_generation("u"))
    store.delete("u", fid)
    seen.append(store.namespace_generation("u"))
    assert len(set(seen)) == len(seen), seen
    store.drop("u")
    assert store.namespace_generation("u") == 0  # gone, as an unknown namespace
    put_random(store, "u", 2, rng)
    assert store.namespace_generation("u") not in seen
    with pytest.raises(TypeError, match="namespace must be a str"):
        store.namespace_generation(3)
    store.close()
    with pytest.raises(infs.InvalidArgumentError, match="is closed"):
        store.namespace_generation("u")


def test_hit_views_read_the_infs_hit_layout():
    raw = np.zeros(6, dtype=[("id", "<u8"), ("score", "<f4"), ("_pad", "<u4")])
    raw["id"] = [5, 9, 1, 2**40, 7, 3]
    raw["score"] = [0.5, -1.25, 3.0, 1e-3, 0.0, -0.0]
    raw["_pad"] = 0xFFFFFFFF  # the half that must not be read
    assert ffi.sizeof("infs_hit") == raw.dtype.itemsize
    out = raw.view(np.int64).reshape(2, 3, 2)
    np.testing.assert_array_equal(infs.hit_ids(out), raw["id"].reshape(2, 3).astype(np.int64))
    np.testing.assert_array_equal(infs.hit_scores(out), raw["score"].reshape(2, 3))
    assert infs.hit_scores(out).dtype == np.float32
    assert np.shares_memory(infs.hit_scores(out), out) and np.shares_memory(infs.hit_ids(out), out)


# Searcher.search: what reaches C


def test_search_passes_pointers_sizes_and_streams(searcher, rec):
    q, o, c = queries(), hits(), counts(typestr="<u4")
    assert searcher.search("u", q, 5, out=o, counts=c) == (o, c)
    assert rec.reached("search") == [("search", "u", q.ptr, 2, 5, o.ptr, c.ptr, 0)]
    rec.calls.clear()

    class Stream:
        cuda_stream = 0xABC0

    searcher.search("u", q, 5, out=o, counts=c, stream=Stream())
    searcher.search("u", q, 5, out=o, counts=c, stream=0x1230)
    # with no stream given, the one the queries' interface names; 1 (legacy default) is the library's 0
    searcher.search("u", queries(stream=0x4560), 5, out=hits(stream=0x4560), counts=c)
    searcher.search("u", queries(stream=1), 5, out=o, counts=counts(stream=1))
    assert [call[-1] for call in rec.reached("search")] == [0xABC0, 0x1230, 0x4560, 0]


def test_search_refuses_arrays_on_another_stream(searcher, rec):
    with pytest.raises(ValueError, match="out's __cuda_array_interface__ names stream 0x99, the call is queued on "
                                         "stream 0x10"):
        searcher.search("u", queries(), 5, out=hits(stream=0x99), counts=counts(), stream=0x10)
    with pytest.raises(ValueError, match="counts's __cuda_array_interface__ names stream 0x1"):
        searcher.search("u", queries(stream=0x20), 5, out=hits(), counts=counts(stream=1))
    with pytest.raises(ValueError, match="stream 0 is not allowed"):
        searcher.search("u", queries(stream=0), 5, out=hits(), counts=counts())
    with pytest.raises(TypeError, match="stream must be an int"):
        searcher.search("u", queries(), 5, out=hits(), counts=counts(), stream="default")
    assert not rec.reached("search")


@pytest.mark.parametrize("q, err, message", [
    (np.zeros((2, 16), np.float32), TypeError, "queries must be a CUDA array .*not ndarray"),
    (Cuda("<f8", (2, 16)), TypeError, "queries must hold float32, not typestr '<f8'"),
    (Cuda("<f2", (2, 16)), TypeError, "queries must hold float32"),
    (Cuda("<f4", (16,)), ValueError, r"queries has shape \(16,\), expected \(n, 16\)"),
    (Cuda("<f4", (2, 15)), ValueError, r"queries has shape \(2, 15\), expected \(n, 16\)"),
    (Cuda("<f4", (2, 16), strides=(4, 8)), ValueError, "queries is not C-contiguous"),
    (Cuda("<f4", (2, 16), strides=(128, 4)), ValueError, "queries is not C-contiguous"),
    (Cuda("<f4", (5, 16)), ValueError, r"queries holds 5 queries, not 1\.\.4 \(the searcher's max_queries\)"),
    (Cuda("<f4", (0, 16), ptr=0), ValueError, r"queries holds 0 queries"),
    (Cuda("<f4", (2, 16), ptr=0), ValueError, "queries has no data pointer"),
    (Cuda("<f4", (2, 16), mask=Cuda("|b1", (2, 16))), ValueError, "queries has a mask"),
    (Cuda("<f4", (2, 16), strides=(64,)), TypeError, "has 1 strides for 2 dimensions"),
])
def test_search_checks_queries(searcher, rec, q, err, message):
    with pytest.raises(err, match=message):
        searcher.search("u", q, 5, out=hits(), counts=counts())
    assert not rec.reached("search")


def test_search_takes_native_order_and_c_strides(searcher, rec):
    q = Cuda("=f4", (2, 16), strides=(64, 4))
    searcher.search("u", q, 5, out=hits(strides=(80, 16, 8)), counts=counts(strides=(4,)))
    assert len(rec.reached("search")) == 1


def test_search_checks_a_malformed_interface(searcher, rec):
    q = queries()
    del q.__cuda_array_interface__["data"]
    with pytest.raises(TypeError, match="queries: malformed __cuda_array_interface__"):
        searcher.search("u", q, 5, out=hits(), counts=counts())

    class NotADict:
        __cuda_array_interface__ = [1, 2]

    with pytest.raises(TypeError, match="queries must be a CUDA array"):
        searcher.search("u", NotADict(), 5, out=hits(), counts=counts())
    assert not rec.reached("search")


@pytest.mark.parametrize("k, err, message", [
    (0, ValueError, r"k = 0 is not in 1\.\.10 \(the searcher's max_k\)"),
    (11, ValueError, r"k = 11 is not in 1\.\.10"),
    (-1, ValueError, "k = -1 is out of range for size_t"),
    (2.0, TypeError, "k must be an int, not float"),
    (True, TypeError, "k must be an int, not bool"),
])
def test_search_checks_k(searcher, rec, k, err, message):
    with pytest.raises(err, match=message):
        searcher.search("u", queries(), k, out=hits(), counts=counts())
    assert not rec.reached("search")


@pytest.mark.parametrize("out, cnt, err, message", [
    (None, counts(), TypeError, "out is required when queries is not a torch tensor"),
    (hits(), None, TypeError, "counts is required when queries is not a torch tensor"),
    (np.zeros((2, 5, 2), np.int64), counts(), TypeError, "out must be a CUDA array"),
    (Cuda("<u8", (2, 5, 2)), counts(), TypeError, "out must hold int64, not typestr '<u8'"),
    (Cuda("<i8", (2, 4, 2)), counts(), ValueError, r"out has shape \(2, 4, 2\), expected \(2, 5, 2\)"),
    (Cuda("<i8", (2, 5)), counts(), ValueError, r"out has shape \(2, 5\), expected \(2, 5, 2\)"),
    (Cuda("<i8", (2, 5, 2), strides=(160, 16, 8)), counts(), ValueError, "out is not C-contiguous"),
    (hits(readonly=True), counts(), ValueError, "out is read-only"),
    (hits(), Cuda("<i8", (2,)), TypeError, "counts must hold int32 or uint32, not typestr '<i8'"),
    (hits(), Cuda("<i4", (3,)), ValueError, r"counts has shape \(3,\), expected \(2,\)"),
    (hits(), Cuda("<i4", (2,), strides=(8,)), ValueError, "counts is not C-contiguous"),
    (hits(), counts(readonly=True), ValueError, "counts is read-only"),
])
def test_search_checks_out_and_counts(searcher, rec, out, cnt, err, message):
    with pytest.raises(err, match=message):
        searcher.search("u", queries(), 5, out=out, counts=cnt)
    assert not rec.reached("search")


def test_search_checks_the_namespace(searcher, rec):
    with pytest.raises(TypeError, match="namespace must be a str"):
        searcher.search(b"u", queries(), 5, out=hits(), counts=counts())
    with pytest.raises(infs.InvalidArgumentError, match="namespace contains a NUL"):
        searcher.search("u\0v", queries(), 5, out=hits(), counts=counts())
    assert not rec.reached("search")


def test_searcher_options_reach_c(store, rec):
    with infs.Searcher(store, max_queries=7, max_k=3, metric="ip", max_facts=100):
        pass
    assert rec.reached("searcher_create") == [("searcher_create", 7, 3, 100, int(infs.Metric.IP))]
    assert rec.reached("searcher_free") == [("searcher_free", 0x1000)]


def test_closed_searcher_and_store(store, rec):
    s = infs.Searcher(store)
    s.close()
    s.close()
    assert s.closed and len(rec.reached("searcher_free")) == 1
    with pytest.raises(infs.InvalidArgumentError, match="Searcher is closed"):
        s.search("u", queries(), 5, out=hits(), counts=counts())
    s2 = infs.Searcher(store)
    inj = infs.Injector(store, host_layout(store.geometry))
    store.close()  # closes what was made on it first
    assert s2.closed and inj.closed
    assert [c[0] for c in rec.calls[-2:]] in (["searcher_free", "injector_free"], ["injector_free", "searcher_free"])
    with pytest.raises(infs.InvalidArgumentError, match="is closed"):
        s2.search("u", queries(), 5, out=hits(), counts=counts())
    assert not rec.reached("search")


# Injector.inject: what reaches C


def one(typestr="<i4", ptr=0x7F0000004000, **kw):
    return Cuda(typestr, (1,), ptr=ptr, **kw)


def table(n=4, **kw):
    return Cuda("<i4", (n,), ptr=0x7F0000005000, **kw)


def test_inject_passes_pointers_and_the_id_stride(injector, rec):
    ids, n, bt = Cuda("<u8", (6,)), one("<u4"), table()
    assert injector.inject("u", ids, n, 3, bt) is None
    assert rec.reached("inject") == [("inject", "u", ids.ptr, 8, n.ptr, 3, bt.ptr, 4, 0, 0, 0)]
    rec.calls.clear()
    # a search's hits for one query: out[q], (k, 2) int64; or hit_ids(out)[q], ids 16 bytes apart
    injector.inject("u", Cuda("<i8", (5, 2)), Cuda("<u4", ()), 0, bt)
    injector.inject("u", Cuda("<i8", (5,), strides=(16,)), n, 0, bt)
    injector.inject("u", Cuda("<i8", (1, 2), strides=(999, 8)), n, 0, bt)  # one id: no stride to read
    nxt, st = one("<u4", ptr=0x7F0000006000), one("<i4", ptr=0x7F0000007000)
    injector.inject("u", ids, n, 2**32 - 1, bt, next_pos=nxt, status=st, stream=0x77)
    calls = rec.reached("inject")
    assert [c[3] for c in calls] == [16, 16, 8, 8]
    assert calls[-1][5] == 2**32 - 1 and calls[-1][8:] == (nxt.ptr, st.ptr, 0x77)


@pytest.mark.parametrize("kw, err, message", [
    (dict(ids=np.zeros(3, np.uint64)), TypeError, "ids must be a CUDA array"),
    (dict(ids=Cuda("<i4", (3,))), TypeError, "ids must hold uint64 or int64, not typestr '<i4'"),
    (dict(ids=Cuda("<u8", (3,), strides=(12,))), ValueError, "ids' stride 12 bytes is not a positive multiple of 8"),
    (dict(ids=Cuda("<u8", (3,), strides=(-8,))), ValueError, "ids' stride -8 bytes"),
    (dict(ids=Cuda("<i8", (5, 3))), ValueError, r"ids of shape \(5, 3\) must be a search's hits"),
    (dict(ids=Cuda("<i8", (2, 5, 2))), ValueError, r"ids must be \(m,\) or a search's hits \(k, 2\)"),
    (dict(n_ids=Cuda("<u4", (2,))), ValueError, r"n_ids must hold one element, shape \(\) or \(1,\), not \(2,\)"),
    (dict(n_ids=Cuda("<u8", (1,))), TypeError, "n_ids must hold uint32 or int32"),
    (dict(n_ids=7), TypeError, "n_ids must be a CUDA array"),
    (dict(block_table=Cuda("<i8", (4,))), TypeError, "block_table must hold int32"),
    (dict(block_table=Cuda("<i4", (0,))), ValueError, r"block_table must be \(len,\) with len >= 1"),
    (dict(block_table=Cuda("<i4", (2, 2))), ValueError, r"block_table must be \(len,\)"),
    (dict(block_table=Cuda("<i4", (4,), strides=(8,))), ValueError, "block_table is not C-contiguous"),
    (dict(start_pos=-1), ValueError, "start_pos = -1 is out of range for uint32"),
    (dict(start_pos=2**32), ValueError, "start_pos = 4294967296 is out of range"),
    (dict(next_pos=one(readonly=True)), ValueError, "next_pos is read-only"),
    (dict(next_pos=Cuda("<i4", (2,))), ValueError, "next_pos must hold one element"),
    (dict(status=one("<u4")), TypeError, "status must hold int32, not typestr '<u4'"),
    (dict(status=one(readonly=True)), ValueError, "status is read-only"),
    (dict(status=one(stream=0x5)), ValueError, "status's __cuda_array_interface__ names stream 0x5"),
    (dict(ns=None), TypeError, "namespace must be a str"),
])
def test_inject_checks_its_arguments(injector, rec, kw, err, message):
    args = dict(ns="u", ids=Cuda("<u8", (3,)), n_ids=one(), start_pos=0, block_table=table())
    args.update(kw)
    ns, ids, n_ids, start_pos, bt = (args.pop(a) for a in ("ns", "ids", "n_ids", "start_pos", "block_table"))
    with pytest.raises(err, match=message):
        injector.inject(ns, ids, n_ids, start_pos, bt, **args)
    assert not rec.reached("inject")


def test_injector_options_reach_c(store, geometry, rec):
    layout = host_layout(geometry)
    with infs.Injector(store, layout, max_ids=5, max_tokens=99) as inj:
        assert inj.layout is layout and (inj.max_ids, inj.max_tokens) == (5, 99)
    assert rec.reached("injector_create") == [("injector_create", 5, 99)]
    assert rec.reached("injector_free") == [("injector_free", 0x2000)]
    with pytest.raises(infs.InvalidArgumentError, match="Injector is closed"):
        inj.inject("u", Cuda("<u8", (3,)), one(), 0, table())
    with pytest.raises(ValueError, match="max_ids = -2 is out of range for uint32"):
        infs.Injector(store, layout, max_ids=-2)


# On a GPU, with torch


def _cuda_ready():
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available() and infs.features()["cuda"]


gpu = pytest.mark.skipif(not _cuda_ready(), reason="needs torch with CUDA and a library built with CUDA")

GPU_GEO = dict(n_layers=2, n_kv_heads=2, head_dim=64, rope_theta=10000.0, kv_dtype="f16", embed_dim=64)


@pytest.fixture
def gpu_store(tmp_path):
    rng = np.random.default_rng(5)
    g = infs.Geometry(**GPU_GEO)
    with infs.Store.create(tmp_path / "gpu.infs", g, "gpu-test", sync="off", device=0) as s:
        for _ in range(300):
            put_random(s, "u", int(rng.integers(1, 9)), rng)
        put_random(s, "other", 4, rng)
        yield s


def _same_as_retrieve(store, q, out, counts, k):
    """out and counts (on the device, ready) hold the exact CPU search's hits of q."""
    ref = store.retrieve("u", q.cpu().numpy(), k, backend="exact")
    ids, scores, cnt = infs.hit_ids(out).cpu().numpy(), infs.hit_scores(out).cpu().numpy(), counts.cpu().numpy()
    for i, h in enumerate(ref):
        assert cnt[i] == len(h.ids) == k
        np.testing.assert_array_equal(ids[i, :cnt[i]].astype(np.uint64), h.ids)
        np.testing.assert_array_equal(scores[i, :cnt[i]], h.scores)


@gpu
def test_gpu_search_and_graph_replay(gpu_store):
    import torch
    k, dev = 10, torch.device("cuda", 0)
    with infs.Searcher(gpu_store, max_queries=8, max_k=16) as searcher:
        side = torch.cuda.Stream(dev)
        with torch.cuda.stream(side):  # queued on the current stream, not the default one
            q = torch.randn(5, 64, device=dev)
            out, counts = searcher.search("u", q, k)
        assert out.shape == (5, k, 2) and out.dtype == torch.int64 and counts.dtype == torch.int32
        side.synchronize()
        _same_as_retrieve(gpu_store, q, out, counts, k)

        # captured once, replayed with new queries in the same buffers
        gen = gpu_store.namespace_generation("u")
        static_q = torch.randn(3, 64, device=dev)
        static_out = torch.empty((3, k, 2), dtype=torch.int64, device=dev)
        static_counts = torch.empty(3, dtype=torch.int32, device=dev)
        side.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(side):  # warm-up outside the capture, as torch asks
            searcher.search("u", static_q, k, out=static_out, counts=static_counts)
        torch.cuda.current_stream(dev).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            searcher.search("u", static_q, k, out=static_out, counts=static_counts)
        for seed in range(3):
            torch.manual_seed(seed)
            new_q = torch.randn(3, 64, device=dev)
            static_q.copy_(new_q)
            static_out.fill_(-1)
            graph.replay()
            torch.cuda.synchronize(dev)
            _same_as_retrieve(gpu_store, new_q, static_out, static_counts, k)
        assert gpu_store.namespace_generation("u") == gen


@gpu
def test_gpu_inject_from_search_hits(gpu_store):
    import torch
    g, dev, k = gpu_store.geometry, torch.device("cuda", 0), 6
    n_blocks, block_size = 16, 16
    shape = (2, n_blocks, block_size, g.n_kv_heads, g.head_dim)
    dev_cache = [torch.full(shape, 7.0, dtype=torch.bfloat16, device=dev) for _ in range(g.n_layers)]
    ref_cache = [t.clone() for t in dev_cache]
    ref_layout = infs.KVLayout.vllm(ref_cache)
    bt = torch.randperm(n_blocks, device=dev)[:8].to(torch.int32)
    stream = torch.cuda.Stream(dev)
    with infs.Searcher(gpu_store, max_queries=4, max_k=k) as searcher, \
            infs.Injector(gpu_store, infs.KVLayout.vllm(dev_cache), max_ids=k, max_tokens=64) as injector:
        q = torch.randn(2, 64, device=dev)
        next_pos = torch.zeros(2, dtype=torch.int32, device=dev)
        status = torch.full((2,), -99, dtype=torch.int32, device=dev)
        stream.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(stream):
            out, counts = searcher.search("u", q, k)
            # query 0 from its hits (out[0], ids 16 bytes apart), query 1 after it from hit_ids' view
            injector.inject("u", out[0], counts[0:1], 3, bt, next_pos=next_pos[0:1], status=status[0:1])
            injector.inject("u", infs.hit_ids(out)[1], counts[1:2], 60, bt, next_pos=next_pos[1:2],
                            status=status[1:2])
        stream.synchronize()
        assert status.tolist() == [0, 0]
        ids = infs.hit_ids(out).cpu().numpy().astype(np.uint64)
        n = counts.cpu().numpy()
        bt_host = bt.cpu().numpy()
        ends = [gpu_store.inject("u", ids[0, :n[0]], ref_layout, bt_host, 3),
                gpu_store.inject("u", ids[1, :n[1]], ref_layout, bt_host, 60)]
        torch.cuda.synchronize(dev)
        assert next_pos.tolist() == ends
        for a, b in zip(dev_cache, ref_cache):
            assert torch.equal(a, b)
        assert any(not torch.equal(a, torch.full_like(a, 7.0)) for a in dev_cache)
