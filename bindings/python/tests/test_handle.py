"""The locking rule every handle class follows (inferscale.handle.Handle): a
close racing a call on another thread waits for the call and frees once;
double close frees once; use after close names the object; a close from
inside a call on the same thread raises rather than waiting for itself."""

import gc
import os
import threading

import pytest

import inferscale as infs
from inferscale import embedders, engine, model, store, tokenizer
from inferscale._ffi import lib

CACHE = os.environ.get("INFS_CACHE", os.path.expanduser("~/.cache/inferscale"))
SMOLLM2 = os.path.join(CACHE, "smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
MINILM = os.path.join(CACHE, "minilm")
WAIT = 10.0  # seconds a thread may take to get somewhere before the test fails


class GatedLib:
    """The real library, except that the function named gated waits at a gate
    (a call in flight that the test holds open) and frees are recorded."""

    def __init__(self, gated, frees):
        self.gated, self.frees = gated, frees
        self.entered, self.release = threading.Event(), threading.Event()
        self.freed = []

    def __getattr__(self, name):
        real = getattr(lib, name)
        if name == self.gated:
            def gated(*args):
                self.entered.set()
                if not self.release.wait(WAIT):
                    raise AssertionError(f"{name}: the test never released the gate")
                return real(*args)
            return gated
        if name in self.frees:
            def free(*args):
                self.freed.append(name)
                return real(*args)
            return free
        return real


def patch(monkeypatch, gate, *modules):
    for m in modules:
        monkeypatch.setattr(m, "lib", gate)


# (name, modules whose lib is gated, make, call, gated function, free function)
CASES = {
    "tokenizer": ((tokenizer,), lambda tmp: infs.Tokenizer(SMOLLM2), lambda t: t.encode("hello"),
                  "infs_tokenize", "infs_tokenizer_free"),
    "embedder": ((embedders,), lambda tmp: infs.Embedder(MINILM), lambda e: e("hello"),
                 "infs_embed", "infs_embedder_free"),
    "model": ((model,), lambda tmp: infs.Model(SMOLLM2), lambda m: m.forward([1, 2]),
              "infs_model_forward", "infs_model_free"),
    "engine": ((engine,), lambda tmp: infs.Engine(infs.Model(SMOLLM2), n_ctx=256), lambda e: e.max_fact_tokens,
               "infs_engine_fact_limit", "infs_engine_free"),
    "store": ((store,), lambda tmp: infs.Store.create(tmp / "h.infs", infs.Geometry(
        n_layers=1, n_kv_heads=1, head_dim=8, kv_dtype="f32", embed_dim=4), "m", sync="off"),
              lambda s: s.count("alice"), "infs_fact_count", "infs_store_close"),
}


def run(target):
    """target on a thread of its own; its result or exception in out."""
    out = {}

    def body():
        try:
            out["value"] = target()
        except BaseException as e:  # noqa: B036 - reported to the test
            out["error"] = e
    t = threading.Thread(target=body, daemon=True)
    t.start()
    return t, out


@pytest.mark.parametrize("name", sorted(CASES))
def test_close_waits_for_a_call_in_flight_and_frees_once(name, monkeypatch, tmp_path):
    modules, make, call, gated, free = CASES[name]
    gate = GatedLib(gated, {free})
    patch(monkeypatch, gate, *modules)
    obj = make(tmp_path)
    a, a_out = run(lambda: call(obj))
    assert gate.entered.wait(WAIT), f"{name}: the call never reached the library"
    closers = [run(obj.close) for _ in range(2)]  # two closes racing the call and each other
    for t, _ in closers:
        t.join(0.3)
        assert t.is_alive(), f"{name}: close() returned while a call was running"
    assert gate.freed == [], f"{name}: freed under a running call"
    assert obj.closed  # new calls are refused from now on
    gate.release.set()
    for t, out in [(a, a_out)] + closers:
        t.join(WAIT)
        assert not t.is_alive()
        assert "error" not in out, f"{name}: {out.get('error')!r}"
    assert gate.freed == [free], f"{name}: freed {gate.freed}"
    obj.close()  # a double close frees nothing more
    with pytest.raises(infs.InvalidArgumentError, match=f"{name} .*is closed"):
        call(obj)
    del obj
    gc.collect()  # nor does the collector
    assert gate.freed == [free]
    if name == "engine":
        assert "infs_model_free" not in gate.freed


@pytest.mark.parametrize("name", sorted(CASES))
def test_close_from_inside_a_call_raises_instead_of_waiting_for_itself(name, tmp_path):
    _, make, call, _, _ = CASES[name]
    obj = make(tmp_path)
    with obj._use():
        with pytest.raises(infs.InvalidArgumentError, match="from inside a call"):
            obj.close()
        assert not obj.closed
    call(obj)  # still open and usable
    obj.close()
    assert obj.closed


def test_a_callback_that_closes_its_store_gets_an_error(tmp_path):
    m = infs.Model(SMOLLM2)
    geo = m.geometry("f32", embed_dim=4)
    with m, infs.Store.create(tmp_path / "cb.infs", geo, m.identity("f32"), sync="off") as s:
        seen = []

        def progress(done, total):
            try:
                s.close()
            except infs.InvalidArgumentError as e:
                seen.append(str(e))
        ids = s.encode_texts("u", m, ["Maya has a cat."], embeddings=[[1.0, 0.0, 0.0, 0.0]], progress=progress)
        assert len(ids) == 1
        assert len(seen) == 1 and "store" in seen[0] and "from inside a call" in seen[0]
        assert not s.closed and s.count("u") == 1


def test_closing_the_model_waits_for_an_engine_call_and_frees_the_engine_first(monkeypatch):
    gate = GatedLib("infs_engine_fact_limit", {"infs_engine_free", "infs_model_free"})
    patch(monkeypatch, gate, model, engine)
    m = infs.Model(SMOLLM2)
    e = infs.Engine(m, n_ctx=256)
    a, a_out = run(lambda: e.max_fact_tokens)
    assert gate.entered.wait(WAIT)
    b, b_out = run(m.close)
    b.join(0.3)
    assert b.is_alive() and gate.freed == []
    gate.release.set()
    a.join(WAIT)
    b.join(WAIT)
    assert a_out["value"] > 0 and "error" not in b_out
    assert gate.freed == ["infs_engine_free", "infs_model_free"]
    assert e.closed and m.closed and m.tokenizer.closed


def test_a_models_tokenizer_keeps_the_model_until_its_call_returns(monkeypatch):
    gate = GatedLib("infs_tokenize", {"infs_model_free"})
    patch(monkeypatch, gate, model, tokenizer)
    m = infs.Model(SMOLLM2)
    tok = m.tokenizer
    a, a_out = run(lambda: tok.encode("hello"))
    assert gate.entered.wait(WAIT)
    b, _ = run(m.close)
    b.join(0.3)
    assert b.is_alive() and gate.freed == []
    gate.release.set()
    a.join(WAIT)
    b.join(WAIT)
    assert len(a_out["value"]) > 0
    assert gate.freed == ["infs_model_free"]
    with pytest.raises(infs.InvalidArgumentError, match="tokenizer is closed"):
        tok.encode("x")


def test_engine_calls_run_one_at_a_time(monkeypatch):
    gate = GatedLib("infs_engine_fact_limit", set())
    patch(monkeypatch, gate, engine)
    with infs.Engine(infs.Model(SMOLLM2), n_ctx=256) as e:
        a, _ = run(lambda: e.max_fact_tokens)
        assert gate.entered.wait(WAIT)
        gate.entered.clear()
        b, b_out = run(lambda: e.max_fact_tokens)
        assert not gate.entered.wait(0.3), "a second call entered the engine while one was running"
        gate.release.set()
        a.join(WAIT)
        b.join(WAIT)
        assert b_out["value"] > 0
    e.model.close()

