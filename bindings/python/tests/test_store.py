"""Store: create/open, put/get/delete, namespaces, stats, errors, lifetime."""

import dataclasses
import gc
import json

import numpy as np
import pytest

import inferscale as infs
from conftest import put_random, random_kv


def test_put_get_roundtrip(store, geometry):
    rng = np.random.default_rng(1)
    k, v = random_kv(geometry, 5, rng)
    tokens = np.array([1, 2, 3, 4, 5], dtype=np.int32)
    emb = rng.standard_normal(geometry.embed_dim).astype(np.float32)
    fid = store.put("alice", tokens, k, v, emb, text="Alice likes tea.",
                    metadata={"turn": 3}, source_id=42, timestamp=1700000000)
    fact = store.get("alice", fid)
    assert fact.id == fid and not fact.is_segment and fact.n_tokens == 5
    np.testing.assert_array_equal(fact.tokens, tokens)
    np.testing.assert_array_equal(fact.k, k)
    np.testing.assert_array_equal(fact.v, v)
    np.testing.assert_array_equal(fact.embedding, emb)
    assert fact.text == "Alice likes tea." and json.loads(fact.metadata) == {"turn": 3}
    assert (fact.source_id, fact.timestamp) == (42, 1700000000)


def test_segments_have_no_embedding_and_are_not_retrieved(store, geometry):
    rng = np.random.default_rng(2)
    k, v = random_kv(geometry, 3, rng)
    sid = store.put_segment("alice", [7, 8, 9], k, v, text="Memory:")
    seg = store.get("alice", sid)
    assert seg.is_segment and seg.embedding is None and seg.text == "Memory:"
    assert store.count("alice") == 1
    assert len(store.retrieve("alice", np.ones(geometry.embed_dim), 5).ids) == 0


def test_count_list_delete_namespaces_drop(store):
    rng = np.random.default_rng(3)
    a = [put_random(store, "alice", 2, rng) for _ in range(4)]
    for _ in range(2):
        put_random(store, "bob", 3, rng)
    assert store.count("alice") == 4 and store.count("bob") == 2 and store.count("carol") == 0
    assert store.list("alice").tolist() == sorted(a)
    assert store.list("nobody").dtype == np.uint64 and store.list("nobody").size == 0
    assert store.namespaces() == ["alice", "bob"]
    assert "alice" in store and "carol" not in store
    store.delete("alice", a[1])
    assert store.list("alice").tolist() == sorted(a[:1] + a[2:])
    with pytest.raises(infs.NotFoundError):
        store.get("alice", a[1])
    store.drop("bob")
    assert store.namespaces() == ["alice"] and store.count("bob") == 0
    stats = store.stats()
    assert stats.n_facts == 3 and stats.n_namespaces == 1 and stats.file_bytes >= stats.live_bytes > 0


def test_ids_of_another_namespace_are_not_found(store):
    rng = np.random.default_rng(4)
    fid = put_random(store, "alice", 2, rng)
    with pytest.raises(infs.NotFoundError) as e:
        store.get("bob", fid)
    assert e.value.code == infs.lib.INFS_ENOTFOUND and str(e.value)
    with pytest.raises(infs.NotFoundError):
        store.delete("bob", fid)
    assert store.count("alice") == 1


def test_persistence_geometry_and_identity(tmp_path, geometry):
    path = tmp_path / "p.infs"
    rng = np.random.default_rng(5)
    with infs.Store.create(path, geometry, "model-A") as s:
        fid = put_random(s, "alice", 4, rng, text="kept")
    with infs.Store.open(path) as s:
        assert s.geometry == geometry and s.identity == "model-A"
        assert s.get("alice", fid).text == "kept"
    with pytest.raises(infs.MismatchError, match="identity"):
        infs.Store.create(path, geometry, "model-B")
    other = dataclasses.replace(geometry, n_layers=geometry.n_layers + 1)
    with pytest.raises(infs.MismatchError, match="n_layers"):
        infs.Store.create(path, other, "model-A")
    with pytest.raises(infs.NotFoundError):
        infs.Store.open(tmp_path / "missing.infs")


def test_second_writer_is_busy_and_readonly_refuses_writes(tmp_path, geometry):
    path = tmp_path / "w.infs"
    rng = np.random.default_rng(6)
    with infs.Store.create(path, geometry, "m") as s:
        put_random(s, "alice", 2, rng)
        with pytest.raises(infs.BusyError):
            infs.Store.open(path)
        with infs.Store.open(path, readonly=True) as r:
            assert r.count("alice") == 1
            with pytest.raises(infs.ReadOnlyError):
                put_random(r, "alice", 2, rng)


def test_bad_arguments_raise_with_the_c_message(store, geometry):
    rng = np.random.default_rng(7)
    k, v = random_kv(geometry, 2, rng)
    with pytest.raises(ValueError, match="expected shape"):
        store.put("alice", [1, 2, 3], k, v, np.zeros(geometry.embed_dim))
    with pytest.raises(ValueError, match="16 floats"):
        store.put("alice", [1, 2], k, v, np.zeros(3))
    with pytest.raises(infs.InvalidArgumentError) as e:
        store.put("alice", [1, 2], k, v, None)  # a fact needs an embedding
    assert "embedding" in str(e.value)
    with pytest.raises(infs.InferscaleError) as e:
        store.put("x" * 300, [1, 2], k, v, np.zeros(geometry.embed_dim))
    assert "namespace" in str(e.value)
    assert store.count("alice") == 0


def test_kv_dtypes_and_torch_inputs(tmp_path):
    rng = np.random.default_rng(8)
    for dtype in ("f16", "bf16"):
        g = infs.Geometry(n_layers=2, n_kv_heads=1, head_dim=4, kv_dtype=dtype, embed_dim=4)
        with infs.Store.create(tmp_path / f"{dtype}.infs", g, "m", sync="off") as s:
            k, v = random_kv(g, 3, rng)
            fid = s.put("a", [1, 2, 3], k, v, np.ones(4))
            f = s.get("a", fid)
            tol = 1e-3 if dtype == "f16" else 8e-3
            np.testing.assert_allclose(f.k, k, rtol=tol, atol=tol)
            np.testing.assert_allclose(f.v, v, rtol=tol, atol=tol)
            if dtype == "bf16":  # float32 input is rounded to nearest bf16
                np.testing.assert_array_equal(f.k, infs.arrays.bf16_to_float32(infs.arrays.float32_to_bf16(k)))


def test_fp8_store_quantizes_on_put(tmp_path):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(24)
    g = infs.Geometry(n_layers=2, n_kv_heads=3, head_dim=8, kv_dtype="fp8", embed_dim=4)
    assert g.kv_dtype == infs.DType.FP8_E4M3 == 3 and infs.DType.coerce("fp8_e4m3") is infs.DType.FP8_E4M3
    assert g.kv_token_bytes == 2 * 3 * (8 + 4)
    with infs.Store.create(tmp_path / "fp8.infs", g, "m", sync="off") as s:
        k, v = random_kv(g, 5, rng)
        fid = s.put("a", [1, 2, 3, 4, 5], k, v, np.ones(4))
    with infs.Store.open(tmp_path / "fp8.infs") as s:
        assert s.geometry.kv_dtype == infs.DType.FP8_E4M3
        f = s.get("a", fid)
    # per (layer, token, head) row: scale = amax / 448, value = e4m3(x / scale) * scale
    for x, got in ((k, f.k), (v, f.v)):
        scale = (np.abs(x).max(axis=-1, keepdims=True) / np.float32(448)).astype(np.float32)
        want = (x / scale).astype(ml_dtypes.float8_e4m3fn).astype(np.float32) * scale
        np.testing.assert_array_equal(got, want)


def test_close_is_idempotent_and_gc_closes(tmp_path, geometry):
    path = tmp_path / "c.infs"
    s = infs.Store.create(path, geometry, "m")
    s.close()
    s.close()
    assert s.closed
    with pytest.raises(infs.InvalidArgumentError, match="closed"):
        s.count("alice")
    s = infs.Store.open(path)
    del s
    gc.collect()
    # The writer lock is free again: the garbage collector closed the store.
    with infs.Store.open(path) as s2:
        assert s2.count("alice") == 0


def test_sync_compact(store):
    rng = np.random.default_rng(9)
    ids = [put_random(store, "alice", 8, rng) for _ in range(6)]
    for fid in ids[:4]:
        store.delete("alice", fid)
    before = store.stats().file_bytes
    store.compact()
    store.sync()
    after = store.stats()
    assert after.file_bytes < before and after.n_facts == 2
    assert store.list("alice").tolist() == sorted(ids[4:])


def test_lost_records_and_verify(tmp_path, geometry):
    path = tmp_path / "v.infs"
    rng = np.random.default_rng(11)
    with infs.Store.create(path, geometry, "test-model v1") as s:
        put_random(s, "alice", 3, rng)
        boundary = s.stats().file_bytes
        put_random(s, "alice", 3, rng)
        s.verify()
    # Cut at a record boundary: the commit slot still counts the lost record.
    with open(path, "r+b") as f:
        f.truncate(boundary)
    with infs.Store.open(path, readonly=True) as s:
        st = s.stats()
        assert st.lost_records == 1 and st.dropped_tail_bytes == 0 and st.n_facts == 1
        s.verify()
        # Bytes rewritten under the open handle.
        with open(path, "r+b") as f:
            f.seek(boundary - 40)
            f.write(b"\xff" * 8)
        with pytest.raises(infs.CorruptError, match="damaged"):
            s.verify()


def test_tiers_without_a_device_copy(store, geometry):
    # The file is the only tier: prefetch and tier_wait do nothing, every
    # namespace reports Tier.FILE, the tier counters are 0.
    put_random(store, "alice", 2, np.random.default_rng(11))
    store.prefetch("alice")
    store.prefetch("nobody")
    store.tier_wait()
    assert store.namespace_tier("alice") is infs.Tier.FILE
    assert store.namespace_tier("nobody") is infs.Tier.FILE
    st = store.stats()
    assert st.n_facts == 1 and st.host_bytes == 0 and st.kv_device_bytes == 0 and st.kv_host_bytes == 0
    assert st.device_evictions == 0 and st.host_evictions == 0 and st.promotions == 0
    with pytest.raises(infs.InvalidArgumentError, match="infs_prefetch"):
        store.prefetch("")
    with pytest.raises(infs.InvalidArgumentError, match="infs_namespace_tier"):
        store.namespace_tier("")
    assert infs.Tier.coerce("host") is infs.Tier.HOST
    assert infs.NotResidentError.code == infs.lib.INFS_ENOTRESIDENT == -16
    assert infs.error_class(-16) is infs.NotResidentError


def test_host_budget_is_taken(tmp_path, geometry):
    with infs.Store.create(tmp_path / "h.infs", geometry, "id", host_budget_bytes=1 << 20) as s:
        assert s.namespace_tier("x") is infs.Tier.FILE
    with pytest.raises(infs.RangeError, match="host_budget_bytes"):
        infs.Store(tmp_path / "h.infs", host_budget_bytes=-1)
