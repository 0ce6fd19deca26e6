"""The library's engine from Python, on SmolLM2-135M-Instruct and
all-MiniLM-L6-v2 from $INFS_CACHE: the first facts of the example memory
encoded after the engine's header, the demo question answered by injection
and by full recompute, a batch equal to asking one by one, the answer's
fields, and the library's errors as exceptions."""

import dataclasses
import json
import os

import numpy as np
import pytest

import inferscale as infs

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
CACHE = os.environ.get("INFS_CACHE", os.path.expanduser("~/.cache/inferscale"))
SMOLLM2 = os.path.join(CACHE, "smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
MINILM = os.path.join(CACHE, "minilm")
QUESTION = "What is the name of Maya's cat?"
N_FACTS = 12


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    assert os.path.exists(SMOLLM2) and os.path.isdir(MINILM), "run scripts/fetch-models.sh"
    model = infs.Model(SMOLLM2)
    emb = infs.Embedder(MINILM)
    engine = infs.Engine(model, n_ctx=1024)
    geo = model.geometry("f16", embed_dim=emb.dim)
    store = infs.Store.create(tmp_path_factory.mktemp("engine") / "maya.infs", geo, model.identity("f16"),
                              sync="off")
    with pytest.raises(infs.InvalidArgumentError, match="infs_engine_prepare on this store first"):
        engine.ask(store, QUESTION, namespace="maya", embedder=emb)
    engine.prepare(store)
    assert store.count(infs.RESERVED_PREFIX + "segments") == 2
    engine.prepare(store)  # once per store
    assert store.count(infs.RESERVED_PREFIX + "segments") == 2

    with open(os.path.join(REPO, "examples", "memory", "facts.jsonl"), encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f][:N_FACTS]
    ids = []
    for text in texts:
        rendered = infs.render_fact(text)
        tokens = model.tokenizer.encode(rendered)
        ids.append(store.encode("maya", model, tokens, emb(text), context=engine.header, text=rendered))
    yield model, emb, engine, store, ids
    engine.close()
    store.close()
    emb.close()
    model.close()


def test_render_fact():
    assert infs.render_fact("Maya has a cat.") == "- Maya has a cat.\n"
    assert (infs.render_fact("Maya has a cat.", {"speaker": "Maya", "date": "5 March 2026", "x": "y"})
            == "- (5 March 2026) Maya: Maya has a cat.\n")
    assert infs.render_fact("t", '{"speaker": "Tomas"}') == "- Tomas: t\n"
    with pytest.raises(infs.InvalidArgumentError, match="NUL"):
        infs.render_fact("a\0b")


def test_demo_question_both_ways(setup):
    model, emb, engine, store, ids = setup
    inj = engine.ask(store, QUESTION, namespace="maya", embedder=emb, k=4, max_tokens=24)
    full = engine.ask(store, QUESTION, namespace="maya", embedder=emb, k=4, max_tokens=24, full_recompute=True)
    assert "Biscuit" in inj.text and "Biscuit" in full.text
    # The cat is the fifth line of the memory, the best hit.
    assert inj.fact_ids.dtype == np.uint64 and inj.fact_ids.tolist() == full.fact_ids.tolist()
    assert len(inj.fact_ids) == 4 and inj.fact_ids[0] == ids[4]
    assert inj.scores.dtype == np.float32 and list(inj.scores) == sorted(inj.scores, reverse=True)
    assert inj.n_prompt == full.n_prompt
    assert inj.n_prefilled < 25 and full.n_prefilled == full.n_prompt  # the footer and the question
    assert 1 <= inj.n_tokens <= 24
    assert inj.first_logits.shape == (model.info.n_vocab,) and inj.first_logits.dtype == np.float32
    # Greedy: the answer starts with the first logits' argmax.
    assert inj.text.startswith(model.tokenizer.decode([int(np.argmax(inj.first_logits))]).strip())
    assert inj.prefill_ms > 0 and inj.embed_ms >= 0 and inj.retrieve_ms >= 0 and inj.inject_ms >= 0
    assert inj.ttft_ms == pytest.approx(inj.embed_ms + inj.retrieve_ms + inj.inject_ms + inj.prefill_ms, rel=1e-6)
    assert inj.decode_ms >= 0 and inj.n_recomputable == 0 and inj.n_recomputed == 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        inj.text = "x"


def test_calibration_reaches_the_library(setup):
    model, emb, engine, store, ids = setup
    facts = [ids[4], ids[1], ids[7], ids[2]]
    off = engine.ask(store, QUESTION, namespace="maya", fact_ids=facts, max_tokens=1, fact_scale=1.0)
    same = engine.ask(store, QUESTION, namespace="maya", fact_ids=facts, max_tokens=1, fact_temperature=1.0,
                      fact_scale=1.0)
    default = engine.ask(store, QUESTION, namespace="maya", fact_ids=facts, max_tokens=1)
    auto = engine.ask(store, QUESTION, namespace="maya", fact_ids=facts, max_tokens=1, fact_scale=0.0)
    half = engine.ask(store, QUESTION, namespace="maya", fact_ids=facts, max_tokens=1, fact_scale=0.5)
    assert np.array_equal(off.first_logits, same.first_logits)
    assert np.array_equal(default.first_logits, off.first_logits)  # off by default
    assert np.array_equal(auto.first_logits, half.first_logits)  # 1 / sqrt(4 facts)
    assert np.abs(auto.first_logits - off.first_logits).max() > 0.1
    for bad in ({"fact_temperature": 0.0}, {"fact_scale": -1.0}, {"fact_temperature": float("nan")}):
        with pytest.raises(infs.RangeError, match="fact_temperature"):
            engine.ask(store, QUESTION, namespace="maya", fact_ids=facts, max_tokens=1, **bad)
    with pytest.raises(TypeError, match="fact_scale"):
        engine.ask(store, QUESTION, namespace="maya", fact_ids=facts, fact_scale="0.5")


def test_options_reach_the_library(setup):
    model, emb, engine, store, ids = setup
    # Given facts skip retrieval (no embedder), the budget holds, the stop string is cut.
    a = engine.ask(store, QUESTION, namespace="maya", fact_ids=[ids[4]], max_tokens=3)
    assert a.fact_ids.tolist() == [ids[4]] and a.scores.tolist() == [0.0] and a.n_tokens <= 3 and a.embed_ms == 0
    a = engine.ask(store, QUESTION, namespace="maya", fact_ids=np.array([ids[4]], np.uint64), stop="Biscuit")
    assert "Biscuit" not in a.text
    none = engine.ask(store, QUESTION, namespace="maya", fact_ids=[], max_tokens=4)
    assert len(none.fact_ids) == 0 and none.n_prompt < a.n_prompt
    # One seed, one answer.
    s1, s2 = (engine.ask(store, QUESTION, namespace="maya", fact_ids=[ids[4]], temperature=1.0, top_p=0.9,
                         seed=5, max_tokens=12) for _ in range(2))
    assert s1.text == s2.text
    # ignore_eos spends the budget; recovery recomputes what it says.
    a = engine.ask(store, QUESTION, namespace="maya", embedder=emb, k=2, max_tokens=40, ignore_eos=True)
    assert a.n_tokens == 40
    r = engine.ask(store, QUESTION, namespace="maya", embedder=emb, k=4, max_tokens=1, recompute_ratio=0.5,
                   check_layer=2)
    assert r.n_recomputable > 0 and 0 < r.n_recomputed < r.n_recomputable
    # system changes the header.
    with infs.Engine(model, n_ctx=256, system="Answer in French.") as other:
        assert other.header.tolist() != engine.header.tolist()


def test_ask_batch_equals_ask(setup):
    model, emb, engine, store, ids = setup
    qs = [QUESTION, "Where does Maya live?"]
    many = engine.ask_batch(store, qs, namespace="maya", embedder=emb, k=4, max_tokens=8)
    assert len(many) == 2
    for q, got in zip(qs, many):
        one = engine.ask(store, q, namespace="maya", embedder=emb, k=4, max_tokens=8)
        assert got.text == one.text and got.n_prompt == one.n_prompt and got.n_tokens == one.n_tokens
        assert got.fact_ids.tolist() == one.fact_ids.tolist()
        assert np.array_equal(got.first_logits, one.first_logits)
    assert many[0].text != many[1].text
    assert engine.ask_batch(store, [], namespace="maya", embedder=emb) == []


def test_errors(setup, tmp_path):
    model, emb, engine, store, ids = setup
    with pytest.raises(infs.RangeError, match="k 5000 is above 4096"):
        engine.ask(store, QUESTION, namespace="maya", embedder=emb, k=5000)
    with pytest.raises(infs.RangeError, match="k = -1 is out of range"):
        engine.ask(store, QUESTION, namespace="maya", embedder=emb, k=-1)
    with pytest.raises(infs.RangeError, match="top_p"):
        engine.ask(store, QUESTION, namespace="maya", embedder=emb, top_p=0.0)
    with pytest.raises(infs.RangeError, match="check_layer 30"):
        engine.ask(store, QUESTION, namespace="maya", embedder=emb, check_layer=30)
    with pytest.raises(infs.InvalidArgumentError, match="no embedder"):
        engine.ask(store, QUESTION, namespace="maya")
    with pytest.raises(infs.InvalidArgumentError, match="question contains a NUL"):
        engine.ask(store, "a\0b", namespace="maya", embedder=emb)
    with pytest.raises(TypeError, match="questions must be a sequence"):
        engine.ask_batch(store, QUESTION, namespace="maya", embedder=emb)
    with pytest.raises(TypeError, match="store must be an inferscale.Store"):
        engine.prepare(None)
    with pytest.raises(TypeError, match="embedder must be an inferscale.Embedder"):
        engine.ask(store, QUESTION, namespace="maya", embedder=lambda t: np.zeros(384, np.float32))
    with pytest.raises(TypeError, match="temperature must be a number"):
        engine.ask(store, QUESTION, namespace="maya", embedder=emb, temperature="hot")
    with pytest.raises(infs.RangeError, match="n_ctx"):
        infs.Engine(model, n_ctx=8, block_size=16)
    with pytest.raises(ValueError, match="unknown DType"):
        infs.Engine(model, kv_dtype="f8")
    # A store the engine was not prepared on.
    other = infs.Store.create(tmp_path / "other.infs", store.geometry, store.identity, sync="off")
    with other, pytest.raises(infs.InvalidArgumentError, match="infs_engine_prepare on this store first"):
        engine.ask_batch(other, [QUESTION], namespace="maya", embedder=emb)
    # Closed handles.
    e2 = infs.Engine(model, n_ctx=256)
    e2.close()
    e2.close()
    with pytest.raises(infs.InvalidArgumentError, match="engine is closed"):
        e2.prepare(store)


def test_closing_the_model_closes_its_engines():
    m = infs.Model(SMOLLM2)
    e = infs.Engine(m, n_ctx=256)
    assert len(e.header) > 0
    m.close()
    assert e.closed
    with pytest.raises(infs.InvalidArgumentError, match="model is closed"):
        infs.Engine(m)


def test_device_zero(setup):
    """device=0: on a machine with a CUDA GPU the model loads there and a
    device engine answers the demo question; without one (or in a build
    without CUDA) the library's error comes back as an exception."""
    model, emb, engine, store, ids = setup
    with pytest.raises(infs.InferscaleError) as err:
        infs.Engine(model, device=0)
    assert err.value.code in (infs.UnsupportedError.code, infs.InvalidArgumentError.code)
    assert "device 0" in str(err.value)
    try:
        dev_model = infs.Model(SMOLLM2, device=0, device_max_tokens=1024)
    except infs.InferscaleError as e:
        # A build without CUDA says so; a CUDA build on a machine without a GPU gives CUDA's error.
        if not infs.features()["cuda"]:
            assert isinstance(e, infs.UnsupportedError) and "no CUDA support" in str(e)
        assert "device" in str(e).lower()
        return
    with dev_model, infs.Engine(dev_model, n_ctx=1024, device=0, max_seqs=4) as dev:
        assert dev.header.tolist() == engine.header.tolist()
        got = dev.ask_batch(store, [QUESTION, QUESTION], namespace="maya", embedder=emb, k=4, max_tokens=24)
        assert all("Biscuit" in a.text for a in got)
