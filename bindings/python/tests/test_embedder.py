"""The built-in embedder against sentence-transformers' all-MiniLM-L6-v2
(goldens of tests/fixtures/embed, and live where sentence-transformers is
installed)."""

import json
import os

import numpy as np
import pytest

import inferscale as infs
from conftest import REPO

CACHE = os.environ.get("INFS_CACHE", os.path.expanduser("~/.cache/inferscale"))
MINILM = os.path.join(CACHE, "minilm")


@pytest.fixture(scope="module")
def emb():
    assert os.path.exists(os.path.join(MINILM, "model.safetensors")), "run scripts/fetch-models.sh"
    with infs.Embedder(MINILM) as e:
        yield e


def test_goldens(emb):
    with open(os.path.join(REPO, "tests", "fixtures", "embed", "cases.json")) as f:
        g = json.load(f)
    assert emb.dim == g["dim"] == 384 and emb.max_seq_length == g["max_seq_length"]
    texts = [c["text"] for c in g["cases"]]
    got = emb(texts)
    assert got.shape == (len(texts), 384)
    for vec, c in zip(got, g["cases"]):
        want = np.frombuffer(bytes.fromhex(c["q"]), dtype=np.int8).astype(np.float32) * c["scale"]
        cos = float(vec @ want / (np.linalg.norm(vec) * np.linalg.norm(want) + 1e-30))
        if np.linalg.norm(want) > 0:
            assert cos > 0.999, (c["text"][:40], cos)
    np.testing.assert_allclose(emb(texts[0]), got[0], atol=1e-5)


def test_retrieval_with_the_builtin_embedder(emb, tmp_path):
    with open(os.path.join(REPO, "examples", "memory", "facts.jsonl")) as f:
        texts = [json.loads(line)["text"] for line in f if line.strip()]
    geo = infs.Geometry(n_layers=1, n_kv_heads=1, head_dim=2, kv_dtype="f32", embed_dim=emb.dim)
    k = np.zeros((1, 1, 1, 2), np.float32)
    with infs.Store.create(tmp_path / "e.infs", geo, "minilm", sync="off") as store:
        ids = {store.put("maya", [1], k, k, v, text=t): t for t, v in zip(texts, emb(texts))}
        hit = store.retrieve("maya", emb("What is the name of Maya's cat?"), 1).ids[0]
        assert "Biscuit" in ids[int(hit)]


def test_matches_sentence_transformers(emb):
    st = pytest.importorskip("sentence_transformers")
    texts = ["Maya lives in Lisbon.", "What is Maya allergic to?", ""]
    want = st.SentenceTransformer(MINILM, device="cpu").encode(texts, normalize_embeddings=True)
    np.testing.assert_allclose(emb(texts), want, atol=2e-4)


def test_errors_and_lifetime():
    with pytest.raises(infs.NotFoundError):
        infs.Embedder(os.path.join(CACHE, "no-such-embedder"))
    e = infs.Embedder(MINILM)
    assert e([]).shape == (0, 384)
    e.close()
    e.close()
    with pytest.raises(infs.InvalidArgumentError, match="closed"):
        e("x")
