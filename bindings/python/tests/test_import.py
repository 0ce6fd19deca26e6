"""What `import inferscale` does, in a fresh interpreter: it takes the CFFI
declarations parsed at build time (no pycparser run) and does not load the
library, nor anything it links (BLAS, FAISS, cuBLAS), until first use."""

import glob
import os
import shutil
import subprocess
import sys

import inferscale as infs

PKG = os.path.dirname(os.path.abspath(infs.__file__))

PROBE = r"""
import sys
def mapped():
    with open("/proc/self/maps") as f:
        return sorted({l.split()[-1] for l in f if ".so" in l and ("inferscale" in l or "cublas" in l
                                                                   or "faiss" in l or "cudart" in l)})
import inferscale
print("parsed" if "pycparser" in sys.modules else "cached", "inferscale._cdef" in sys.modules)
print(mapped())
print(inferscale.__version__ == inferscale.version() != "")
print(any("inferscale" in m for m in mapped()))
"""


def probe(pythonpath=None):
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True,
                         cwd=os.path.dirname(PKG) if pythonpath is None else pythonpath)
    return out.stdout.splitlines()


def test_import_parses_nothing_and_loads_no_library():
    assert os.path.exists(os.path.join(PKG, "_cdef.py")), "the build writes _cdef.py next to _decl.h"
    parsed, libs, version_ok, loaded = probe()
    assert parsed == "cached True"
    assert libs == "[]"                       # nothing of the library's mapped after the import
    assert version_ok == "True" and loaded == "True"   # first use opens it


def test_declarations_changed_after_the_build_are_parsed(tmp_path, monkeypatch):
    # A _cdef.py older than _decl.h is not used: the declarations are parsed.
    pkg = tmp_path / "inferscale"
    pkg.mkdir()
    for f in glob.glob(os.path.join(PKG, "*.py")) + [os.path.join(PKG, "_decl.h")]:
        shutil.copy(f, pkg)
    with open(pkg / "_decl.h", "a", encoding="utf-8") as f:
        f.write("\n/* changed */\n")
    monkeypatch.setenv("INFERSCALE_LIBRARY", infs.library_path())
    parsed, libs, version_ok, _ = probe(str(tmp_path))
    assert parsed.startswith("parsed") and libs == "[]" and version_ok == "True"
