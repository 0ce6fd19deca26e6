"""Reserved namespaces: names under "inferscale." (the engine keeps its prompt
segments in "inferscale.segments") are refused for every write from Python
and from the package's command (the C tool), so nobody can poison the shared prompt; reads
stay allowed. Strings with a NUL are refused, not cut."""

import json

import numpy as np
import pytest

import inferscale as infs
from conftest import put_random, random_kv
from test_cli import cli

RESERVED = ["inferscale.segments", "inferscale.", "inferscale.other"]


@pytest.mark.parametrize("ns", RESERVED)
def test_writes_to_reserved_namespaces_are_refused(store, geometry, ns):
    rng = np.random.default_rng(5)
    put_random(store, "alice", 2, rng)
    before = store.stats().file_bytes
    k, v = random_kv(geometry, 3, rng)
    emb = rng.standard_normal(geometry.embed_dim).astype(np.float32)
    # The attack: a record with the header's tokens and random KV where the
    # engine looks for its header, after deleting or dropping the real one.
    with pytest.raises(infs.InvalidArgumentError, match="reserved"):
        store.put_segment(ns, [1, 2, 3], k, v, metadata={"segment": "header"})
    with pytest.raises(infs.InvalidArgumentError, match="reserved"):
        store.put(ns, [1, 2, 3], k, v, emb)
    with pytest.raises(infs.InvalidArgumentError, match="reserved"):
        store.delete(ns, 1)
    with pytest.raises(infs.InvalidArgumentError, match="reserved"):
        store.drop(ns)
    assert store.stats().file_bytes == before
    # Reads are allowed.
    assert store.count(ns) == 0 and store.list(ns).size == 0
    assert len(store.retrieve(ns, emb, 3).ids) == 0
    assert store.namespaces() == ["alice"]


def test_names_that_only_look_reserved_are_ordinary(store):
    rng = np.random.default_rng(6)
    for ns in ("inferscale", "Inferscale.segments", "my.inferscale.segments"):
        fid = put_random(store, ns, 2, rng)
        store.delete(ns, fid)
        put_random(store, ns, 2, rng)
        store.drop(ns)
    assert infs.RESERVED_PREFIX == "inferscale."


def test_strings_with_a_nul_are_refused(store):
    rng = np.random.default_rng(7)
    with pytest.raises(ValueError, match="NUL"):
        put_random(store, "alice\0mallory", 2, rng)
    with pytest.raises(ValueError, match="NUL"):
        put_random(store, "alice", 2, rng, text="ab\0cd")
    assert store.namespaces() == []


@pytest.mark.parametrize("row,message", [
    ({"text": "x", "namespace": "inferscale.segments"},
     'facts.jsonl:2: namespace "inferscale.segments" is reserved'),
    ({"text": "Mallory likes chess.", "namespace": "alice\0mallory"},
     'facts.jsonl:2: "namespace" holds a NUL character'),
    ({"text": "ab\0cd", "namespace": "alice"}, 'facts.jsonl:2: "text" holds a NUL character'),
])
def test_the_command_refuses_before_touching_the_store(tmp_path, row, message):
    facts = tmp_path / "facts.jsonl"
    facts.write_text(json.dumps({"text": "Alice likes tea.", "namespace": "alice"}) + "\n" + json.dumps(row) + "\n")
    store = tmp_path / "m.infs"
    run = cli("encode", str(facts), "--store", str(store), "--model", str(tmp_path / "none.gguf"), check=False)
    assert run.returncode == 1 and message in run.stderr, run.stderr
    assert not store.exists()
