"""The wheel installs into a fresh virtual environment (without this machine's
site-packages) and works there with no compiler on the PATH, its
`inferscale` command (the C tool inside the package) included; built with
the defaults, it has the CUDA backend only when the machine has a GPU."""

import glob
import os
import subprocess
import sys
import zipfile

import pytest

from conftest import REPO

CHECK = r"""
import shutil, sys, os
for tool in ("cc", "gcc", "clang", "c++", "nvcc", "meson", "ninja"):
    assert shutil.which(tool) is None, tool
import numpy as np
import inferscale as infs
here = os.path.dirname(infs.__file__)
assert infs.library_path().startswith(here), infs.library_path()
assert os.path.exists(os.path.join(infs.get_include(), "inferscale", "inferscale.h"))
g = infs.Geometry(n_layers=2, n_kv_heads=1, head_dim=4, kv_dtype="f32", embed_dim=3)
with infs.Store.create(sys.argv[1], g, "m") as s:
    k = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 1, 4)
    fid = s.put("a", [5, 6, 7], k, k + 1, [1, 0, 0], text="hello")
    assert s.get("a", fid).text == "hello"
    np.testing.assert_array_equal(s.get("a", fid).k, k)
print("ok", infs.version(), "cuda" if infs.features()["cuda"] else "no-cuda")
"""


def machine_has_gpu() -> bool:
    """What the build asks (meson.build): a device node, or nvidia-smi listing one."""
    if os.path.exists("/dev/nvidia0"):
        return True
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0
    except OSError:
        return False


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    path = os.environ.get("INFERSCALE_WHEEL")
    if path:
        return os.path.abspath(path)
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), REPO],
                   check=True, capture_output=True)
    return glob.glob(str(out / "*.whl"))[0]


def test_wheel_holds_the_library_and_headers_inside_the_package(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "inferscale/libinferscale.so" in names
    assert "inferscale/_bin/inferscale" in names
    assert "inferscale/include/inferscale/inferscale.h" in names
    assert "inferscale/include/inferscale/version.h" in names
    assert "inferscale/_decl.h" in names
    outside = [n for n in names if not n.startswith(("inferscale/", "inferscale-"))]
    assert not outside, outside


def test_fresh_venv_without_compilers(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    subprocess.run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", wheel],
                   check=True, cwd=tmp_path)
    env = {"PATH": str(venv / "bin"), "HOME": os.environ.get("HOME", str(tmp_path))}
    run = subprocess.run([py, "-c", CHECK, "s.infs"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("ok ")
    # Built with the defaults (as scripts/test.sh and the fixture build it):
    # the CUDA backend only on a machine with a GPU, even where nvcc is found.
    assert run.stdout.split()[-1] == ("cuda" if machine_has_gpu() else "no-cuda"), run.stdout
    # The C tool finds the package's library through its rpath.
    cli = subprocess.run([str(venv / "bin" / "inferscale"), "verify", "s.infs"], cwd=tmp_path, env=env,
                         capture_output=True, text=True)
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout.startswith("s.infs: sound: 1 facts"), cli.stdout
