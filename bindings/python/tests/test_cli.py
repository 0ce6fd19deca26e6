"""The inferscale command: info, stats, list, retrieve."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import inferscale as infs
from conftest import put_random


def cli(*args, check=True):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    run = subprocess.run([sys.executable, "-m", "inferscale", *args], capture_output=True, text=True, env=env)
    if check:
        assert run.returncode == 0, run.stderr
    return run


@pytest.fixture
def path(tmp_path, geometry):
    p = tmp_path / "cli.infs"
    rng = np.random.default_rng(31)
    with infs.Store.create(p, geometry, "cli-model", sync="off") as s:
        ids = [put_random(s, "alice", 2, rng) for _ in range(3)]
        put_random(s, "bob", 2, rng)
        emb = s.get("alice", ids[1]).embedding
    np.save(tmp_path / "q.npy", emb)
    np.savetxt(tmp_path / "q.txt", np.stack([emb, emb]))
    return p, ids


def test_info():
    out = json.loads(cli("--json", "info").stdout)
    assert out["version"] == infs.version() and set(out["features"]) == {"cuda", "faiss", "blas"}
    assert "inferscale " + infs.version() in cli("info").stdout


def test_stats_and_list(path):
    p, ids = path
    stats = json.loads(cli("stats", str(p), "--json").stdout)
    assert stats["identity"] == "cli-model" and stats["stats"]["n_facts"] == 4
    assert stats["geometry"]["kv_dtype"] == "f32"
    assert json.loads(cli("list", str(p), "--json").stdout) == {"alice": 3, "bob": 1}
    assert cli("list", str(p), "alice").stdout.split() == [str(i) for i in sorted(ids)]


def test_retrieve(path, tmp_path):
    p, ids = path
    out = json.loads(cli("retrieve", str(p), "alice", str(tmp_path / "q.npy"), "-k", "2", "--json").stdout)
    assert len(out) == 1 and out[0]["ids"][0] == ids[1] and len(out[0]["ids"]) == 2
    lines = cli("retrieve", str(p), "alice", str(tmp_path / "q.txt"), "-k", "1").stdout.split("\n")
    assert [line.split("\t")[:2] for line in lines if line] == [["0", str(ids[1])], ["1", str(ids[1])]]


def test_errors_are_reported(tmp_path):
    run = cli("stats", str(tmp_path / "missing.infs"), check=False)
    assert run.returncode == 1 and "NotFoundError" in run.stderr


def test_encode_and_ask(tmp_path):
    from conftest import REPO
    cache = os.environ.get("INFS_CACHE", os.path.expanduser("~/.cache/inferscale"))
    assert os.path.exists(os.path.join(cache, "minilm", "model.safetensors")), "run scripts/fetch-models.sh"
    with open(os.path.join(REPO, "examples", "memory", "facts.jsonl")) as f:
        lines = [line for line in f if line.strip()][:8]
    facts = tmp_path / "facts.jsonl"
    facts.write_text("".join(lines))
    store = str(tmp_path / "m.infs")
    out = json.loads(cli("--json", "encode", str(facts), "--store", store, "--kv-dtype", "f32").stdout)
    assert out == {"maya": 8}
    assert json.loads(cli("list", store, "--json").stdout) == {"maya": 9}  # and the header segment
    ans = json.loads(cli("--json", "ask", "What is Maya allergic to?", "--store", store, "-n", "maya",
                         "-k", "3", "--max-tokens", "16").stdout)
    assert "peanut" in ans["answer"] and "allergic" in ans["facts"][0]["text"], ans
    assert ans["prefilled_tokens"] < ans["memory_tokens"]
    run = cli("ask", "Anything?", "--store", store, "-n", "nobody", check=False)
    assert run.returncode == 1 and "no memory" in run.stderr


@pytest.mark.parametrize("line,message", [
    ('{"text": "a\\u0000b", "namespace": "maya"}', 'row["text"] contains a NUL character'),
    ('{"text": "ok", "namespace": "ma\\u0000ya"}', 'row["namespace"] contains a NUL character'),
    ('{"text": "ok", "namespace": "maya", "tags": ["x", "y\\u0000"]}', 'row["tags"][1] contains a NUL'),
    ('{"text": "ok", "namespace": "maya", "a\\u0000b": 1}', 'the member name "a\\u0000b" in row'),
    ('{"text": "ok", "namespace": 5}', '"namespace" must be a string, got int'),
    ('{"namespace": "maya"}', '"text" must be a string, got NoneType'),
    ('["ok"]', "expected a JSON object, got list"),
    ('{"text": "ok",', "not JSON"),
])
def test_encode_refuses_bad_lines_before_loading_anything(tmp_path, line, message):
    facts = tmp_path / "facts.jsonl"
    facts.write_text('{"text": "Maya has a cat.", "namespace": "maya"}\n\n' + line + "\n")
    store = tmp_path / "m.infs"
    run = cli("encode", str(facts), "--store", str(store), "--model", str(tmp_path / "no-model.gguf"), check=False)
    assert run.returncode == 1 and f"FormatError: {facts} line 3: " in run.stderr, run.stderr
    assert message in run.stderr, run.stderr
    assert not store.exists()


def test_encode_refuses_a_file_that_is_not_utf8(tmp_path):
    facts = tmp_path / "facts.jsonl"
    facts.write_bytes(b'{"text": "caf\xe9", "namespace": "maya"}\n')
    run = cli("encode", str(facts), "--store", str(tmp_path / "m.infs"), check=False)
    assert run.returncode == 1 and "FormatError" in run.stderr and "not UTF-8" in run.stderr, run.stderr
