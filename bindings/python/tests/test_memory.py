"""The five-line memory API on SmolLM2-135M-Instruct and all-MiniLM-L6-v2
from $INFS_CACHE (Memory's defaults): the demo's facts added, searched and
asked about, the file reopened with its facts, and encoding's progress."""

import json
import os

import numpy as np
import pytest

import inferscale as infs

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
CACHE = os.environ.get("INFS_CACHE", os.path.expanduser("~/.cache/inferscale"))
QUESTION = "What is the name of Maya's cat?"
CAT = "Maya and Tomas adopted a three-legged cat named Biscuit in January."


@pytest.fixture(scope="module")
def facts():
    assert os.path.exists(infs.memory.default_model_path()), "run scripts/fetch-models.sh"
    assert os.path.isdir(infs.memory.default_embedder_path()), "run scripts/fetch-models.sh"
    with open(os.path.join(REPO, "examples", "memory", "facts.jsonl"), encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f][:12]


@pytest.fixture(scope="module")
def memory_file(tmp_path_factory, facts):
    path = str(tmp_path_factory.mktemp("memory") / "alice.infs")
    # The five lines.
    mem = infs.Memory(path)
    ids = mem.add(facts)
    hits = mem.search(QUESTION, k=3)
    answer = mem.ask(QUESTION)
    mem.close()
    return path, ids, hits, answer


def test_five_lines_answer_the_demo_question(memory_file, facts):
    path, ids, hits, answer = memory_file
    assert len(ids) == len(facts) and len(set(ids)) == len(facts)
    assert "Biscuit" in answer.text
    assert answer.fact_ids[0] == ids[facts.index(CAT)]
    # search gives the plain text kept with each fact, best first.
    assert [h.text for h in hits][0] == CAT and hits[0].id == ids[facts.index(CAT)]
    assert len(hits) == 3 and [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert all(h.text == facts[ids.index(h.id)] for h in hits)


def test_reopened_file_keeps_the_facts(memory_file, facts):
    path, ids, hits, _ = memory_file
    with infs.Memory(path) as mem:
        assert mem.store.count("default") == len(facts)
        assert mem.search(QUESTION, k=3) == hits
        assert "Biscuit" in mem.ask(QUESTION, k=4, max_tokens=24).text
    assert mem.store.closed and mem.engine.closed and mem.model.closed


def test_add_metadata_and_namespaces(memory_file):
    path = memory_file[0]
    with infs.Memory(path, namespace="bob") as mem:
        (fid,) = mem.add("Bob plays the cello.", metadata={"speaker": "Bob", "date": "2 May 2026"})
        fact = mem.store.get("bob", fid)
        # Stored: the plain text and metadata; encoded: the fact as rendered in the prompt.
        assert fact.text == "Bob plays the cello."
        assert json.loads(fact.metadata) == {"speaker": "Bob", "date": "2 May 2026"}
        rendered = infs.render_fact(fact.text, fact.metadata)
        assert rendered == "- (2 May 2026) Bob: Bob plays the cello.\n"
        assert fact.tokens.tolist() == mem.model.tokenizer.encode(rendered).tolist()
        # Its KV is the model's after the engine's header (as the engine reads it), not without it.
        k, v = mem.model.capture(fact.tokens, mem.engine.header, kv_dtype="f16")
        np.testing.assert_allclose(fact.k, k, atol=2e-2)
        np.testing.assert_allclose(fact.v, v, atol=2e-2)
        k0, _ = mem.model.capture(fact.tokens, None, kv_dtype="f16")
        assert np.abs(fact.k.astype(np.float32) - k0.astype(np.float32)).max() > 0.5
        assert [h.id for h in mem.search("cello", k=5)] == [fid]
        assert mem.search("cello", namespace="default", k=1)[0].id != fid
        with pytest.raises(infs.InvalidArgumentError, match="metadata"):
            mem.add(["a", "b"], metadata=[None])


def test_models_passed_in_stay_open(memory_file):
    model = infs.Model(infs.memory.default_model_path())
    emb = infs.Embedder(infs.memory.default_embedder_path())
    with infs.Memory(memory_file[0], model, emb) as mem:
        assert mem.model is model and mem.embedder is emb
    assert not model.closed and emb(["x"]).shape == (1, emb.dim)
    model.close()
    emb.close()


def test_progress(memory_file, facts):
    with infs.Memory(memory_file[0], namespace="progress") as mem:
        calls = []
        ids = mem.add(facts[:3], progress=lambda done, total: calls.append((done, total)))
        assert calls == [(1, 3), (2, 3), (3, 3)] and len(ids) == 3

        class Bar:  # what tqdm offers: total, n and update(n)
            def __init__(self):
                self.total, self.n = None, 0

            def update(self, n):
                self.n += n

        bar = Bar()
        mem.add(facts[3:7], progress=bar)
        assert bar.total == 4 and bar.n == 4

        # An exception in the callback stops the encoding and comes out of add;
        # the facts stored before stay stored.
        def stop(done, total):
            if done == 2:
                raise KeyboardInterrupt
        before = mem.store.count("progress")
        with pytest.raises(KeyboardInterrupt):
            mem.add(facts[7:12], progress=stop)
        assert mem.store.count("progress") == before + 2
        with pytest.raises(TypeError, match="progress"):
            mem.add(facts[:1], progress=3)


# Each demo question (examples/memory/questions.jsonl) and words of the fact
# that answers it.
DEMO = {
    "What is Maya allergic to?": "allergic to peanuts",
    "What is the name of Maya's cat?": "cat named Biscuit",
    "Which instrument is Maya learning?": "learning to play the cello",
    "Where does Maya's sister work?": "pediatric nurse in Manchester",
    "What does Maya's partner do for a living?": "a furniture maker",
    "When is Maya's birthday?": "birthday is on the 14th",
}


def test_five_lines_answer_every_demo_question(tmp_path):
    with open(os.path.join(REPO, "examples", "memory", "questions.jsonl"), encoding="utf-8") as f:
        questions = [json.loads(line)["question"] for line in f]
    with open(os.path.join(REPO, "examples", "memory", "facts.jsonl"), encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f]
    assert sorted(questions) == sorted(DEMO)
    mem = infs.Memory(str(tmp_path / "maya.infs"))
    ids = mem.add(texts)
    answers = [mem.ask(q, max_tokens=16) for q in questions]
    mem.close()
    for q, a in zip(questions, answers):
        gold = ids[next(i for i, t in enumerate(texts) if DEMO[q] in t)]
        assert a.text.strip(), q
        assert gold in a.fact_ids, (q, a.fact_ids)


# What a new user tripped on (issue 38): a fact too long for the context,
# arguments checked late or named wrongly, k, closed Memories, and facts
# that could not be changed.

TEA = "Maya likes tea. " * 300  # about 1200 tokens


@pytest.fixture(scope="module")
def small(tmp_path_factory, facts):
    """A Memory whose engine holds 1024 tokens, as in the issue."""
    mem = infs.Memory(str(tmp_path_factory.mktemp("small") / "b.infs"), n_ctx=1024)
    yield mem
    mem.close()


def test_a_fact_longer_than_the_context_is_refused_when_added(small):
    before = small.store.count("default")
    with pytest.raises(infs.RangeError, match=r"^facts\[1\]: the fact has \d+ tokens; the engine's context holds "
                                              r"1024 \(n_ctx\) .* split the fact or raise n_ctx$"):
        small.add(["Maya has a cat named Luna.", TEA])
    assert small.store.count("default") == before  # nothing of the call was stored
    assert 0 < small.max_fact_tokens < 1024 - infs.lib.INFS_ENGINE_QUESTION_ROOM
    small.add("Maya has a cat named Luna.")
    assert "Luna" in small.ask("What is the name of Maya's cat?", max_tokens=16).text


def test_a_stored_fact_too_long_for_the_context_is_left_out_with_a_warning(small):
    # Stored without the check (by an older version, or under a larger n_ctx):
    # the questions still answer, from the facts that fit.
    texts = [TEA, CAT]
    ids = small.store.encode_texts("legacy", small.model, [infs.render_fact(t) for t in texts], embed_texts=texts,
                                   embedder=small.embedder, context=small.engine.header)
    assert small.search("Does Maya like tea?", namespace="legacy", k=1)[0].id == ids[0]
    with pytest.warns(UserWarning, match=r"1 of the 2 facts retrieved .* left out"):
        a = small.ask("Does Maya like tea?", namespace="legacy", max_tokens=8)
    assert a.n_left_out == 1 and a.fact_ids.tolist() == [ids[1]]
    answers = small.engine.ask_batch(small.store, ["Does Maya like tea?", QUESTION], namespace="legacy",
                                     embedder=small.embedder, max_tokens=8)
    assert [x.n_left_out for x in answers] == [1, 1]
    assert "Biscuit" in small.ask(QUESTION, namespace="legacy", k=1, max_tokens=16).text


def test_asking_a_namespace_without_facts_warns(small):
    with pytest.warns(UserWarning, match="namespace 'nobody' has no facts"):
        small.ask(QUESTION, namespace="nobody", max_tokens=4)


@pytest.mark.parametrize("call,exc,message", [
    (lambda m: m.add(""), infs.InvalidArgumentError, r"facts\[0\] is empty"),
    (lambda m: m.add(["Maya sings.", " \n\t"]), infs.InvalidArgumentError, r"facts\[1\] is only white space"),
    (lambda m: m.add(b"Maya sings."), TypeError, "facts must be a str or a list of str, not bytes"),
    (lambda m: m.add(123), TypeError, "facts must be a str or a list of str, not int"),
    (lambda m: m.add(["Maya sings.", 3]), TypeError, r"facts\[1\] must be a str, not int"),
    (lambda m: m.search(""), infs.InvalidArgumentError, "query is empty"),
    (lambda m: m.search("  "), infs.InvalidArgumentError, "query is only white space"),
    (lambda m: m.search(b"cat"), TypeError, "query must be a str, not bytes"),
    (lambda m: m.ask(""), infs.InvalidArgumentError, "question is empty"),
    (lambda m: m.ask(7), TypeError, "question must be a str, not int"),
    (lambda m: m.search("cat", k=0), infs.RangeError, "k = 0 is not in 1..4096"),
    (lambda m: m.ask("cat?", k=0), infs.RangeError, "k = 0 is not in 1..4096"),
    (lambda m: m.ask("cat?", k=5000), infs.RangeError, "k = 5000 is not in 1..4096"),
    (lambda m: m.search("cat", k=2.0), TypeError, "k must be an int, not float"),
    (lambda m: m.add("x", namespace="ma\0ya"), infs.InvalidArgumentError, "namespace contains a NUL"),
    (lambda m: m.update(1, ""), infs.InvalidArgumentError, "text is empty"),
    (lambda m: m.update("1", "x"), TypeError, "fact_id must be an int, not str"),
])
def test_bad_arguments_are_refused_naming_them(small, call, exc, message):
    before = small.store.count("default")
    with pytest.raises(exc, match=message):
        call(small)
    assert small.store.count("default") == before


def test_ask_and_search_take_k_alike():
    import inspect
    assert (inspect.signature(infs.Memory.ask).parameters["k"].default ==
            inspect.signature(infs.Memory.search).parameters["k"].default == 10)


@pytest.mark.parametrize("args,kwargs,exc,message", [
    ((123,), {}, TypeError, "path must be a str or os.PathLike, not int"),
    (("/nonexistent_dir/x.infs",), {}, infs.NotFoundError, "directory /nonexistent_dir does not exist"),
    ((".",), {}, infs.InvalidArgumentError, "is a directory"),
    (("m.infs",), {"namespace": "ma\0ya"}, infs.InvalidArgumentError, "namespace contains a NUL"),
    (("m.infs",), {"namespace": ""}, infs.InvalidArgumentError, "namespace is empty"),
    (("m.infs",), {"namespace": "a\x07b"}, infs.InvalidArgumentError, "namespace contains a control character"),
    (("m.infs",), {"namespace": "x" * 256}, infs.InvalidArgumentError, "namespace is longer than 255 bytes"),
    (("m.infs",), {"namespace": "inferscale.x"}, infs.InvalidArgumentError, "reserved"),
    (("m.infs",), {"namespace": 5}, TypeError, "namespace must be a str, not int"),
    (("m.infs",), {"n_ctx": 0}, infs.RangeError, "n_ctx = 0 is not in 65..16777216"),
    (("m.infs",), {"n_ctx": 1024.0}, TypeError, "n_ctx must be an int, not float"),
    (("m.infs",), {"kv_dtype": "f64"}, ValueError, "f64"),
    (("m.infs",), {"model": 3}, TypeError, "model must be an inferscale.Model, a path or None, not int"),
    (("m.infs",), {"model": "no-model.gguf"}, infs.NotFoundError, "model no-model.gguf does not exist"),
    (("m.infs",), {"embedder": b"x"}, TypeError, "embedder must be an inferscale.Embedder, a path or None"),
    (("m.infs",), {"embedder": "no-minilm"}, infs.NotFoundError, "embedder no-minilm does not exist"),
])
def test_the_constructor_checks_every_argument_before_loading_a_model(tmp_path, monkeypatch, args, kwargs, exc,
                                                                     message):
    def loaded(*a, **k):
        raise AssertionError("a model was loaded before the arguments were checked")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(infs.Model, "__init__", loaded)
    monkeypatch.setattr(infs.Embedder, "__init__", loaded)
    with pytest.raises(exc, match=message):
        infs.Memory(*args, **kwargs)
    assert os.listdir(tmp_path) == []


def test_missing_default_models_say_how_to_fetch_them(tmp_path, monkeypatch):
    monkeypatch.setenv("INFS_CACHE", str(tmp_path / "cache"))
    with pytest.raises(infs.NotFoundError, match=r"inferscale.fetch_models\(\)"):
        infs.Memory(str(tmp_path / "m.infs"))
    assert not os.path.exists(tmp_path / "m.infs")


def test_a_closed_memory_says_so(tmp_path):
    mem = infs.Memory(str(tmp_path / "c.infs"))
    (fid,) = mem.add("Maya sings.")
    mem.close()
    mem.close()
    for call in (lambda: mem.add("x"), lambda: mem.search("x"), lambda: mem.ask("x?"),
                 lambda: mem.update(fid, "y"), lambda: mem.delete(fid)):
        with pytest.raises(infs.InvalidArgumentError) as e:
            call()
        assert str(e.value) == f"Memory {str(tmp_path / 'c.infs')!r} is closed", str(e.value)


def test_update_and_delete(tmp_path):
    path = str(tmp_path / "u.infs")
    with infs.Memory(path) as mem:
        luna, lisbon = mem.add(["Maya has a cat named Luna.", "Maya lives in Lisbon."],
                               metadata=[{"speaker": "Maya"}, None])
        biscuit = mem.update(luna, "Maya has a cat named Biscuit.")
        assert biscuit not in (luna, lisbon)
        fact = mem.store.get("default", biscuit)
        # The new text, the old metadata, encoded as add encodes it.
        assert fact.text == "Maya has a cat named Biscuit." and json.loads(fact.metadata) == {"speaker": "Maya"}
        assert fact.tokens.tolist() == mem.model.tokenizer.encode(
            infs.render_fact(fact.text, fact.metadata)).tolist()
        with pytest.raises(infs.NotFoundError):
            mem.store.get("default", luna)
        with pytest.raises(infs.NotFoundError):
            mem.update(luna, "Maya has a dog.")
        # Refused input leaves the fact as it was.
        with pytest.raises(infs.InvalidArgumentError):
            mem.update(biscuit, " ")
        assert sorted(h.id for h in mem.search("Maya", k=5)) == sorted([biscuit, lisbon])
        mem.delete(lisbon)
        with pytest.raises(infs.NotFoundError):
            mem.delete(lisbon)
        assert "Biscuit" in mem.ask(QUESTION, max_tokens=16).text
    with infs.Memory(path) as mem:
        assert [h.id for h in mem.search("Maya", k=5)] == [biscuit]
