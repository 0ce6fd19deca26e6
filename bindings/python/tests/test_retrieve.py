"""Retrieval against brute force: cosine and inner product, single and batch
queries, numpy and torch vectors, namespaces failing closed."""

import sys
import typing

import numpy as np
import pytest

import inferscale as infs
from conftest import put_random


def brute_force(embs: dict, q: np.ndarray, k: int, metric: str):
    ids = np.array(sorted(embs), dtype=np.uint64)
    m = np.stack([embs[int(i)] for i in ids]).astype(np.float64)
    q = q.astype(np.float64)
    if metric == "cosine":
        s = m @ q / (np.linalg.norm(m, axis=1) * np.linalg.norm(q))
    else:
        s = m @ q
    order = sorted(range(len(ids)), key=lambda i: (-s[i], ids[i]))[:k]
    return ids[order], s[order]


@pytest.fixture
def filled(store, geometry):
    rng = np.random.default_rng(21)
    embs = {}
    for _ in range(40):
        fid = put_random(store, "alice", 1, rng)
        embs[fid] = store.get("alice", fid).embedding
    for _ in range(10):
        put_random(store, "bob", 1, rng)
    return store, embs


@pytest.mark.parametrize("metric", ["cosine", "ip"])
def test_single_and_batch_against_brute_force(filled, geometry, metric):
    store, embs = filled
    rng = np.random.default_rng(22)
    qs = rng.standard_normal((5, geometry.embed_dim)).astype(np.float32)
    batch = store.retrieve("alice", qs, 7, metric=metric)
    assert isinstance(batch, list) and len(batch) == 5
    for q, hits in zip(qs, batch):
        ids, scores = brute_force(embs, q, 7, metric)
        np.testing.assert_array_equal(hits.ids, ids)
        np.testing.assert_allclose(hits.scores, scores, rtol=1e-4, atol=1e-4)
        single = store.retrieve("alice", q, 7, metric=metric, backend="exact")
        np.testing.assert_array_equal(single.ids, ids)
        assert single.ids.dtype == np.uint64 and single.scores.dtype == np.float32


def test_namespaces_fail_closed(filled, geometry):
    store, embs = filled
    q = np.ones(geometry.embed_dim, np.float32)
    hits = store.retrieve("alice", q, 100)
    assert len(hits.ids) == 40 and set(hits.ids.tolist()) == set(embs)
    assert len(store.retrieve("nobody", q, 5).ids) == 0
    assert not set(store.retrieve("bob", q, 100).ids.tolist()) & set(embs)


def test_ties_ordered_by_id(store, geometry):
    k = np.zeros((geometry.n_layers, 1, geometry.n_kv_heads, geometry.head_dim), np.float32)
    e = np.ones(geometry.embed_dim, np.float32)
    ids = [store.put("t", [1], k, k, e) for _ in range(6)]
    hits = store.retrieve("t", e, 4)
    assert hits.ids.tolist() == sorted(ids)[:4]


def test_bad_queries(filled, geometry):
    store, _ = filled
    q = np.ones(geometry.embed_dim, np.float32)
    with pytest.raises(infs.InferscaleError):
        store.retrieve("alice", q, 0)
    with pytest.raises(infs.InferscaleError):
        store.retrieve("alice", q, infs.lib.INFS_RETRIEVE_K_MAX + 1)
    with pytest.raises(ValueError, match="floats"):
        store.retrieve("alice", np.ones(3), 5)
    with pytest.raises(ValueError, match="unknown Metric"):
        store.retrieve("alice", q, 5, metric="l2")


def test_torch_queries(filled, geometry):
    torch = pytest.importorskip("torch")
    store, embs = filled
    q = torch.randn(geometry.embed_dim, dtype=torch.float64)
    ids, _ = brute_force(embs, q.numpy(), 3, "cosine")
    np.testing.assert_array_equal(store.retrieve("alice", q, 3).ids, ids)
    assert len(store.retrieve("alice", q[None].repeat(2, 1), 3)) == 2


@pytest.mark.skipif(sys.version_info < (3, 11), reason="typing.get_overloads is Python 3.11+")
def test_retrieve_overloads():
    # What type checkers see: a vector gives Hits, a batch a list of Hits.
    hints = [typing.get_type_hints(f) for f in typing.get_overloads(infs.Store.retrieve)]
    assert [(h["query"], h["return"]) for h in hints] == [
        (typing.Sequence[float], infs.Hits),
        (typing.Sequence[typing.Sequence[float]], typing.List[infs.Hits]),
        (typing.Any, typing.Union[infs.Hits, typing.List[infs.Hits]]),
    ]
