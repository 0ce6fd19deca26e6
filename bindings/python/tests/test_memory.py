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
