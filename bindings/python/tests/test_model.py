"""The library's model runtime from Python, on SmolLM2-135M-Instruct (GGUF):
its KV against transformers' (committed golden), and answering from a cache
filled by injection equals full recompute for one fact with matching
context: the whole path in C, no torch needed."""

import json
import os
import signal
import types

import numpy as np
import pytest

import inferscale as infs
from inferscale import hf

CACHE = os.environ.get("INFS_CACHE", os.path.expanduser("~/.cache/inferscale"))
SMOLLM2 = os.path.join(CACHE, "smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "transformers")
HEADER = "<|im_start|>system\nWhat you remember about the user:\n"


@pytest.fixture(scope="module")
def model():
    assert os.path.exists(SMOLLM2), "run scripts/fetch-models.sh"
    with infs.Model(SMOLLM2) as m:
        yield m


def test_info_geometry_identity(model):
    assert model.info.architecture == "llama"
    assert (model.info.n_layers, model.info.n_kv_heads, model.info.head_dim) == (30, 3, 64)
    with open(os.path.join(FIXTURE, "golden.json")) as f:
        cfg = types.SimpleNamespace(**json.load(f)["config"])
    assert model.geometry("f32", embed_dim=384) == hf.geometry_from_config(cfg, kv_dtype="f32", embed_dim=384)
    assert model.identity("f32") != model.identity("f16")
    assert model.tokenizer.encode("Hello world").tolist() == infs.Tokenizer(SMOLLM2).encode("Hello world").tolist()


def test_kv_matches_transformers(model):
    z = np.load(os.path.join(FIXTURE, "golden.npz"))
    ids = np.concatenate([z["header_ids"], z["fact_ids"]])
    nh = len(z["header_ids"])
    hk, hv = model.capture(z["header_ids"])
    fk, fv = model.capture(z["fact_ids"], context=z["header_ids"])
    k, v = np.concatenate([hk, fk], 1), np.concatenate([hv, fv], 1)
    assert k.shape == z["pre_k"].shape and len(ids) == k.shape[1] and nh < k.shape[1]
    for got, want in ((k, z["pre_k"]), (v, z["v"])):
        want = want.astype(np.float32)
        assert np.abs(got - want).max() <= 2e-2 * np.abs(want).max()


def test_answer_from_injected_memory_equals_full_recompute(model, tmp_path):
    tok = model.tokenizer
    header = tok.encode(HEADER, parse_special=True)
    fact = tok.encode("Maya is allergic to peanuts.\n")
    question = tok.encode("<|im_end|>\n<|im_start|>user\nWhat is Maya allergic to?<|im_end|>\n"
                          "<|im_start|>assistant\n", parse_special=True)
    geo = model.geometry("f32", embed_dim=4)
    with infs.Store.create(tmp_path / "m.infs", geo, model.identity("f32"), sync="off") as store:
        hid = store.encode("maya", model, header, segment=True)
        fid = store.put("maya", fact, *model.capture(fact, context=header), np.ones(4))
        again = store.encode("maya", model, fact, np.ones(4), context=header)
        np.testing.assert_array_equal(store.get("maya", again).k, store.get("maya", fid).k)
        store.delete("maya", again)
        bs, nb = 16, 8
        caches = [np.zeros((2, nb, bs, geo.n_kv_heads, geo.head_dim), np.float32) for _ in range(geo.n_layers)]
        layout = infs.KVLayout.vllm(caches)
        table = np.array([6, 2, 5, 0, 7, 1, 3, 4], np.int32)
        n_past = store.inject("maya", [hid, fid], layout, table, 0)
        assert n_past == len(header) + len(fact)
        positions = np.arange(n_past, n_past + len(question))
        mem = model.forward(question, positions, all_logits=True, cache=layout, block_table=table,
                            n_past=n_past).logits
    full = model.forward(np.concatenate([header, fact, question]), all_logits=True).logits[n_past:]
    assert (mem.argmax(-1) == full.argmax(-1)).all()
    assert np.abs(mem - full).max() <= 1e-3 * np.abs(full).max()
    answer = tok.decode([int(full[-1].argmax())])
    assert answer.strip() == "Maya"


def test_capture_fp8_is_what_an_fp8_store_keeps(model, tmp_path):
    tok = model.tokenizer
    header = tok.encode(HEADER, parse_special=True)
    fact = tok.encode("Maya is allergic to peanuts.\n")
    k32, v32 = model.capture(fact, context=header)
    k8, v8 = model.capture(fact, context=header, kv_dtype="fp8")
    assert k8.dtype == v8.dtype == np.float32 and k8.shape == v8.shape == k32.shape
    geo = model.geometry("fp8", embed_dim=4)
    with infs.Store.create(tmp_path / "fp8.infs", geo, model.identity("fp8"), sync="off") as store:
        f = store.get("maya", store.encode("maya", model, fact, np.ones(4), context=header))
    np.testing.assert_array_equal(f.k, k8)
    np.testing.assert_array_equal(f.v, v8)
    for x, got in ((k32, k8), (v32, v8)):
        assert not np.array_equal(got, x)
        # off by at most half an e4m3 step, which is at most 1/28 of the row's largest value
        assert (np.abs(got - x) <= np.abs(x).max(axis=-1, keepdims=True) / 16).all()
    ml_dtypes = pytest.importorskip("ml_dtypes")
    for x, got in ((k32, k8), (v32, v8)):  # per (layer, token, head): e4m3(x / scale) * scale
        scale = (np.abs(x).max(axis=-1, keepdims=True) / np.float32(448)).astype(np.float32)
        np.testing.assert_array_equal(got, (x / scale).astype(ml_dtypes.float8_e4m3fn).astype(np.float32) * scale)


def test_forward_in_a_forked_child(model):
    """A process forked after the model ran (multiprocessing's fork, a
    pre-forking server) gets the parent's logits: the model's threads stay in
    the parent, and the child must not wait for them."""
    ids = model.tokenizer.encode("Maya adopted a grey cat named Pixel last spring.")
    want = model.forward(ids).logits
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            signal.alarm(60)
            got = model.forward(ids).logits
            code = 0 if np.array_equal(got, want) else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    assert np.array_equal(model.forward(ids).logits, want)


def test_int8_activations(model):
    """Calls of one token (decoding's shape) with 8-bit activations: SmolLM2's
    logits (its matrices are Q4_1) move, within llama.cpp's criterion for
    quantized products as the C test bounds it (NMSE <= 4e-3); a non-bool is
    refused."""
    ids = model.tokenizer.encode("Maya adopted a grey cat named Pixel last spring.")
    with infs.Model(SMOLLM2, int8_activations=True) as q:
        for t in ids[:4]:
            want = model.forward([t]).logits
            got = q.forward([t]).logits
            nmse = float(((got - want) ** 2).sum() / (want ** 2).sum())
            assert 0 < nmse <= 4e-3, nmse
    with pytest.raises(TypeError, match="int8_activations"):
        infs.Model(SMOLLM2, int8_activations=1)


def test_device_weights_refused():
    """device_weights is "bf16" or "fp8" (ValueError, from the binding,
    for anything else), and fp8 is the device copy's: without a device the
    library refuses it (INFS_EINVAL, with its message) before reading the
    file; "bf16" on the host loads as the default does."""
    for bad in ("f16", "FP8", "", None, 3, infs.DType.FP8_E4M3, ["fp8"]):
        with pytest.raises(ValueError, match="device_weights must be") as e:
            infs.Model(SMOLLM2, device_weights=bad)
        assert not isinstance(e.value, infs.InferscaleError), bad
    with pytest.raises(infs.InvalidArgumentError, match="device_weights fp8 .* set device to a CUDA device"):
        infs.Model(SMOLLM2, device_weights="fp8")
    with pytest.raises(infs.InvalidArgumentError, match="device_weights fp8"):
        infs.Model(os.path.join(CACHE, "no-such-model.gguf"), device_weights="fp8")
    with infs.Model(SMOLLM2, device_weights="bf16", n_threads=1) as m:
        assert m.info.n_vocab > 0


def test_errors(model):
    with pytest.raises(infs.InferscaleError):
        model.forward([model.info.n_vocab])
    with pytest.raises(ValueError, match="positions"):
        model.forward([1, 2], [0])
    with pytest.raises(infs.UnsupportedError, match="store kv_dtype only"):
        model.forward([1, 2], kv=True, kv_dtype="fp8")
    with pytest.raises(infs.NotFoundError):
        infs.Model(os.path.join(CACHE, "no-such-model.gguf"))
    m = infs.Model(SMOLLM2)
    t = m.tokenizer
    m.close()
    m.close()
    with pytest.raises(infs.InvalidArgumentError, match="closed"):
        m.forward([1])
    with pytest.raises(infs.InvalidArgumentError, match="closed"):
        t.encode("x")
