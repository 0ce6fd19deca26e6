import os
import sys

import numpy as np
import pytest

# cdecl.py and the fixtures live next to the tests.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import inferscale as infs  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


@pytest.fixture
def geometry() -> infs.Geometry:
    return infs.Geometry(n_layers=3, n_kv_heads=2, head_dim=8, rope_theta=10000.0,
                         kv_dtype="f32", embed_dim=16)


@pytest.fixture
def store(tmp_path, geometry):
    with infs.Store.create(tmp_path / "facts.infs", geometry, "test-model v1", sync="off") as s:
        yield s


def random_kv(geometry: infs.Geometry, n_tokens: int, rng: np.random.Generator):
    shape = (geometry.n_layers, n_tokens, geometry.n_kv_heads, geometry.head_dim)
    return (rng.standard_normal(shape).astype(np.float32),
            rng.standard_normal(shape).astype(np.float32))


def put_random(store: infs.Store, ns: str, n_tokens: int, rng: np.random.Generator, **kwargs) -> int:
    g = store.geometry
    k, v = random_kv(g, n_tokens, rng)
    tokens = rng.integers(0, 50000, n_tokens).astype(np.int32)
    emb = rng.standard_normal(g.embed_dim).astype(np.float32)
    return store.put(ns, tokens, k, v, emb, **kwargs)
