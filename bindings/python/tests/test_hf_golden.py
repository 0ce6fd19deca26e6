"""The transformers integration's logic without torch: KV captured from
SmolLM2 by inferscale.hf (committed golden, see fixtures/transformers/
make_golden.py), stored and injected into a transformers-shaped cache
(batch, heads, seq, dim) of numpy arrays, equals the model's own cache."""

import json
import os
import types

import numpy as np

import inferscale as infs
from inferscale import hf

FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "transformers")


def load():
    z = np.load(os.path.join(FIXTURE, "golden.npz"))
    with open(os.path.join(FIXTURE, "golden.json")) as f:
        meta = json.load(f)
    return {k: z[k] for k in z.files}, meta


def test_geometry_from_the_models_config():
    _, meta = load()
    geo = hf.geometry_from_config(types.SimpleNamespace(**meta["config"]), embed_dim=384)
    assert (geo.n_layers, geo.n_kv_heads, geo.head_dim, geo.rotary_dim) == (30, 3, 64, 64)
    assert geo.rope_theta == 100000.0 and geo.rope_scaling == infs.RopeScaling.NONE
    assert geo.rope_style == infs.RopeStyle.NEOX and geo.kv_dtype == infs.DType.F32


def test_injected_cache_equals_the_models_cache(tmp_path):
    z, meta = load()
    cfg = types.SimpleNamespace(**meta["config"])
    geo = hf.geometry_from_config(cfg, kv_dtype="f32", embed_dim=4)
    nh, nf = len(z["header_ids"]), len(z["fact_ids"])
    pre_k, v = z["pre_k"].astype(np.float32), z["v"].astype(np.float32)
    with infs.Store.create(tmp_path / "g.infs", geo, meta["identity"], sync="off") as store:
        hid = store.put_segment("maya", z["header_ids"], pre_k[:, :nh], v[:, :nh])
        fid = store.put("maya", z["fact_ids"], pre_k[:, nh:], v[:, nh:], np.ones(4), text="peanuts")
        L, H, T, D = geo.n_layers, geo.n_kv_heads, nh + nf, geo.head_dim
        pairs = [(np.zeros((1, H, T, D), np.float32), np.zeros((1, H, T, D), np.float32)) for _ in range(L)]
        assert store.inject("maya", [hid, fid], infs.KVLayout.transformers(pairs), [0], 0) == T
    keys = np.stack([k[0].swapaxes(0, 1) for k, _ in pairs])
    values = np.stack([vv[0].swapaxes(0, 1) for _, vv in pairs])
    post = z["post_k"].astype(np.float32)
    scale = np.abs(post).max()
    # Both sides went through float16 in the fixture: a few ulps of the largest key.
    assert np.abs(keys - post).max() <= 4e-3 * scale
    np.testing.assert_array_equal(values, v)
    # Control: unrotated keys are far from the cache past position 0.
    assert np.abs(pre_k[:, 1:] - post[:, 1:]).max() > 0.1 * scale
