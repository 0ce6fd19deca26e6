"""Injection through every layout helper: keys rotated to their positions,
values copied, everything else untouched; errors leave the cache unchanged."""

import numpy as np
import pytest

import inferscale as infs
from conftest import random_kv

NB, BS = 8, 4
CANARY = 7.0


@pytest.fixture
def facts(store, geometry):
    """A segment and two facts in namespace 'alice', and one fact of 'bob'."""
    rng = np.random.default_rng(11)
    out = {}
    for name, n, ns in (("seg", 3, "alice"), ("f1", 5, "alice"), ("f2", 4, "alice"), ("b", 2, "bob")):
        k, v = random_kv(geometry, n, rng)
        tokens = rng.integers(0, 1000, n)
        if name == "seg":
            fid = store.put_segment(ns, tokens, k, v)
        else:
            fid = store.put(ns, tokens, k, v, rng.standard_normal(geometry.embed_dim))
        out[name] = (fid, k, v)
    return out


def expected(store, geometry, facts, names, start):
    """Per position: the rotated K and the V every layer should hold."""
    ks, vs = [], []
    for name in names:
        _, k, v = facts[name]
        ks.append(k)
        vs.append(v)
    k = np.concatenate(ks, axis=1)
    v = np.concatenate(vs, axis=1)
    pos = np.arange(start, start + k.shape[1], dtype=np.int32)
    rot = np.stack([infs.rope_rotate(k[layer].copy(), pos, geometry) for layer in range(k.shape[0])])
    return pos, rot, v


def views(layout):
    return [np.asarray(t) for t in layout.k_views], [np.asarray(t) for t in layout.v_views]


def check_cache(layout, block_table, pos, k_exp, v_exp, atol=1e-6):
    kv, vv = views(layout)
    written = np.zeros((layout.n_blocks, layout.block_size), dtype=bool)
    for j, p in enumerate(pos):
        b, s = block_table[p // layout.block_size], p % layout.block_size
        written[b, s] = True
        for layer in range(layout.n_layers):
            np.testing.assert_allclose(kv[layer][b, s].astype(np.float32), k_exp[layer, j], atol=atol)
            np.testing.assert_allclose(vv[layer][b, s].astype(np.float32), v_exp[layer, j], atol=atol)
    for layer in range(layout.n_layers):
        assert (kv[layer][~written] == CANARY).all() and (vv[layer][~written] == CANARY).all()


def make_layouts(g, dtype=np.float32):
    L, H, D = g.n_layers, g.n_kv_heads, g.head_dim
    full = lambda *shape: np.full(shape, CANARY, dtype=dtype)  # noqa: E731
    return {
        "vllm": infs.KVLayout.vllm([full(2, NB, BS, H, D) for _ in range(L)]),
        "vllm-stacked": infs.KVLayout.vllm(full(L, 2, NB, BS, H, D)),
        "flashinfer-nhd": infs.KVLayout.flashinfer([full(NB, 2, BS, H, D) for _ in range(L)], "NHD"),
        "flashinfer-hnd": infs.KVLayout.flashinfer([full(NB, 2, H, BS, D) for _ in range(L)], "HND"),
        "paged-hnd": infs.KVLayout.paged([full(NB, H, BS, D) for _ in range(L)],
                                         [full(NB, H, BS, D) for _ in range(L)], "HND"),
        "packed": infs.KVLayout.packed([full(NB, BS, H, 2 * D) for _ in range(L)]),
    }


@pytest.mark.parametrize("name", ["vllm", "vllm-stacked", "flashinfer-nhd", "flashinfer-hnd", "paged-hnd", "packed"])
def test_paged_layouts(store, geometry, facts, name):
    layout = make_layouts(geometry)[name]
    assert layout.capacity == NB * BS
    block_table = np.array([5, 2, 7, 0, 3, 1], dtype=np.int32)
    ids = [facts["seg"][0], facts["f2"][0], facts["f1"][0]]
    end = store.inject("alice", ids, layout, block_table, start_pos=3)
    assert end == 3 + 3 + 4 + 5
    pos, k_exp, v_exp = expected(store, geometry, facts, ["seg", "f2", "f1"], 3)
    check_cache(layout, block_table, pos, k_exp, v_exp)


@pytest.mark.parametrize("order", ["THD", "HTD"])
def test_contiguous_and_transformers_layouts(store, geometry, facts, order):
    L, H, D, T = geometry.n_layers, geometry.n_kv_heads, geometry.head_dim, 12
    shape = (T, H, D) if order == "THD" else (H, T, D)
    k = np.full((L,) + shape, CANARY, np.float32)
    v = np.full((L,) + shape, CANARY, np.float32)
    layout = infs.KVLayout.contiguous(k, v, order)
    assert (layout.n_blocks, layout.block_size) == (1, T)
    ids = [facts["seg"][0], facts["f1"][0]]
    assert store.inject("alice", ids, layout, [0], 2) == 10
    pos, k_exp, v_exp = expected(store, geometry, facts, ["seg", "f1"], 2)
    check_cache(layout, [0], pos, k_exp, v_exp)
    if order == "HTD":
        # transformers' (batch, heads, seq, dim) per layer, as (keys, values) pairs
        pairs = [(np.full((2, H, T, D), CANARY, np.float32), np.full((2, H, T, D), CANARY, np.float32))
                 for _ in range(L)]
        tl = infs.KVLayout.transformers(pairs, batch_index=1)
        assert store.inject("alice", ids, tl, [0], 0) == 8
        for layer, (kk, vv) in enumerate(pairs):
            assert (kk[0] == CANARY).all()
            _, k_exp, v_exp = expected(store, geometry, facts, ["seg", "f1"], 0)
            np.testing.assert_allclose(kk[1, :, :8].swapaxes(0, 1), k_exp[layer], atol=1e-6)
            np.testing.assert_allclose(vv[1, :, :8].swapaxes(0, 1), v_exp[layer], atol=1e-6)


def test_cache_dtype_conversion(store, geometry, facts):
    layout = make_layouts(geometry, np.float16)["vllm"]
    assert layout.dtype == infs.DType.F16
    bt = np.arange(NB, dtype=np.int32)
    store.inject("alice", [facts["f1"][0]], layout, bt, 0)
    pos, k_exp, v_exp = expected(store, geometry, facts, ["f1"], 0)
    check_cache(layout, bt, pos, k_exp, v_exp, atol=5e-3)


def test_errors_leave_the_cache_untouched(store, geometry, facts):
    layout = make_layouts(geometry)["vllm"]
    bt = np.arange(NB, dtype=np.int32)
    with pytest.raises(infs.NotFoundError):  # an id of another namespace
        store.inject("alice", [facts["f1"][0], facts["b"][0]], layout, bt, 0)
    with pytest.raises(infs.NotFoundError):
        store.inject("alice", [facts["f1"][0], 999999], layout, bt, 0)
    with pytest.raises(infs.RangeError):  # the block table is too short for 5 tokens at 2
        store.inject("alice", [facts["f1"][0]], layout, bt[:1], 2)
    with pytest.raises(infs.RangeError):  # a block id past n_blocks
        store.inject("alice", [facts["f1"][0]], layout, np.array([NB, 0], np.int32), 0)
    kv, vv = views(layout)
    assert all((a == CANARY).all() for a in kv + vv)
    other = infs.KVLayout.vllm([np.zeros((2, NB, BS, geometry.n_kv_heads + 1, geometry.head_dim),
                                         np.float32) for _ in range(geometry.n_layers)])
    with pytest.raises(infs.InferscaleError, match="heads"):
        store.inject("alice", [facts["f1"][0]], other, bt, 0)


def test_layout_validation(geometry):
    H, D = geometry.n_kv_heads, geometry.head_dim
    with pytest.raises(ValueError, match="shape"):
        infs.KVLayout([np.zeros((NB, BS, H, D), np.float32), np.zeros((NB, BS, H, D + 1), np.float32)],
                      [np.zeros((NB, BS, H, D), np.float32)] * 2)
    with pytest.raises(ValueError, match="dtype"):
        infs.KVLayout([np.zeros((NB, BS, H, D), np.float32)], [np.zeros((NB, BS, H, D), np.float16)])
    ro = np.zeros((NB, BS, H, D), np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="writable"):
        infs.KVLayout([ro], [ro])
    assert "3 layers" in repr(make_layouts(geometry)["packed"])


def test_torch_cpu_caches(store, geometry, facts):
    torch = pytest.importorskip("torch")
    L, H, D = geometry.n_layers, geometry.n_kv_heads, geometry.head_dim
    for dtype, atol in ((torch.float32, 1e-6), (torch.bfloat16, 3e-2)):
        caches = [torch.full((2, NB, BS, H, D), CANARY, dtype=dtype) for _ in range(L)]
        layout = infs.KVLayout.vllm(caches)
        bt = torch.tensor([3, 1, 4, 0], dtype=torch.int32)
        store.inject("alice", [facts["f1"][0], facts["f2"][0]], layout, bt, 1)
        pos, k_exp, v_exp = expected(store, geometry, facts, ["f1", "f2"], 1)
        for j, p in enumerate(pos):
            b, s = int(bt[p // BS]), p % BS
            for layer in range(L):
                got_k = caches[layer][0, b, s].float().numpy()
                np.testing.assert_allclose(got_k, k_exp[layer, j], atol=atol * (1 + np.abs(k_exp).max()))


def test_cuda_cache_on_the_current_stream(store, geometry, facts):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or not infs.features()["cuda"]:
        pytest.skip("needs a CUDA device and a library built with CUDA")
    L, H, D = geometry.n_layers, geometry.n_kv_heads, geometry.head_dim
    caches = [torch.full((2, NB, BS, H, D), CANARY, device="cuda") for _ in range(L)]
    layout = infs.KVLayout.vllm(caches)
    assert layout.device == 0
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        store.inject("alice", [facts["f1"][0]], layout, torch.arange(NB, dtype=torch.int32), 0)
    stream.synchronize()
    pos, k_exp, v_exp = expected(store, geometry, facts, ["f1"], 0)
    for j, p in enumerate(pos):
        for layer in range(L):
            np.testing.assert_allclose(caches[layer][0, p // BS, p % BS].cpu().numpy(), k_exp[layer, j],
                                       atol=1e-5)
