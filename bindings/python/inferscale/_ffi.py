"""Loads the shared library bundled in the package through CFFI in ABI mode.

The library is the ``libinferscale`` that ``pip install`` put next to this
file; the environment variable ``INFERSCALE_LIBRARY`` names another one (a
build tree's, for development). CFFI in ABI mode releases the GIL around
every call into the library, so long calls (retrieval, injection, fsync) let
other Python threads run.
"""

from __future__ import annotations

import glob
import os

from cffi import FFI

from .errors import error_class

_HERE = os.path.dirname(os.path.abspath(__file__))

ffi = FFI()
with open(os.path.join(_HERE, "_decl.h"), encoding="utf-8") as _f:
    ffi.cdef(_f.read())


def library_path() -> str:
    """The path of the shared library this package loads."""
    env = os.environ.get("INFERSCALE_LIBRARY")
    if env:
        return env
    for pattern in ("libinferscale.so", "libinferscale*.dylib", "inferscale*.dll", "libinferscale.so.*"):
        found = sorted(glob.glob(os.path.join(_HERE, pattern)))
        if found:
            return found[0]
    raise ImportError(f"inferscale: no libinferscale next to {__file__}; "
                      "install the package with pip, or set INFERSCALE_LIBRARY")


lib = ffi.dlopen(library_path())


def check(status: int) -> int:
    """Raises the exception of a negative status with the library's message
    for the calling thread's last error; returns a non-negative status."""
    if status >= 0:
        return status
    message = ffi.string(lib.infs_error_last()).decode("utf-8", "replace")
    if not message:
        message = ffi.string(lib.infs_strerror(status)).decode("utf-8", "replace")
    raise error_class(status)(message, status)


def cstr(s: str | bytes | None, what: str = "string"):
    """A NUL-terminated char* for s (NULL for None)."""
    if s is None:
        return ffi.NULL
    b = s.encode("utf-8") if isinstance(s, str) else bytes(s)
    if b"\0" in b:
        raise ValueError(f"{what} contains a NUL byte")
    return ffi.new("char[]", b)


def pystr(p) -> str:
    """A Python str for a library-owned char* (empty for NULL)."""
    return "" if p == ffi.NULL else ffi.string(p).decode("utf-8", "replace")
