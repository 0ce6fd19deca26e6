"""Loads the shared library bundled in the package through CFFI in ABI mode.

The library is the ``libinferscale`` that ``pip install`` put next to this
file; the environment variable ``INFERSCALE_LIBRARY`` names another one (a
build tree's, for development). CFFI in ABI mode releases the GIL around
every call into the library, so long calls (retrieval, injection, fsync) let
other Python threads run.

Importing is cheap: the declarations come parsed from ``_cdef.py``, which the
build writes (gen_cdef.py; a source tree without it parses _decl.h here), and
the library, with what it links (BLAS, FAISS, the CUDA runtime), is loaded on
the first use of ``lib``.
"""

from __future__ import annotations

import glob
import hashlib
import os
import threading
from typing import Any, Optional

import numpy as np

from .errors import InvalidArgumentError, RangeError, error_class

_HERE = os.path.dirname(os.path.abspath(__file__))


def _load_ffi():
    with open(os.path.join(_HERE, "_decl.h"), "rb") as f:
        decl = f.read()
    try:
        from . import _cdef
        if _cdef.DECL_SHA256 == hashlib.sha256(decl).hexdigest():
            return _cdef.ffi
    except ImportError:
        pass
    from cffi import FFI
    parsed = FFI()
    parsed.cdef(decl.decode("utf-8"))
    return parsed


ffi = _load_ffi()


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


class _Lib:
    """The library, opened on first use; each name looked up is cached on
    this object, so later lookups cost what a plain attribute does."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lib: Any = None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        with self._lock:
            if self._lib is None:
                self._lib = ffi.dlopen(library_path())
        value = getattr(self._lib, name)
        setattr(self, name, value)
        return value

lib: Any = _Lib()


def check(status: int) -> int:
    """Raises the exception of a negative status with the library's message
    for the calling thread's last error; returns a non-negative status."""
    if status >= 0:
        return status
    message = ffi.string(lib.infs_error_last()).decode("utf-8", "replace")
    if not message:
        message = ffi.string(lib.infs_strerror(status)).decode("utf-8", "replace")
    raise error_class(status)(message, status)


# Integer arguments: the range of each C type they are passed as. They are
# checked before any C call because a cast would wrap or truncate silently
# (numpy's astype), or take True for 1 (CFFI).
_BITS = {"int": 8 * ffi.sizeof("int"), "size_t": 8 * ffi.sizeof("size_t")}
INT_RANGES = {
    "int32": (-2**31, 2**31 - 1), "uint32": (0, 2**32 - 1),
    "int64": (-2**63, 2**63 - 1), "uint64": (0, 2**64 - 1),
    "int": (-2**(_BITS["int"] - 1), 2**(_BITS["int"] - 1) - 1), "size_t": (0, 2**_BITS["size_t"] - 1),
}


def out_of_range(what: str, value: int, ctype: str) -> RangeError:
    lo, hi = INT_RANGES[ctype]
    return RangeError(f"{what} = {value} is out of range for {ctype} [{lo}, {hi}]")


def as_int(value: Any, what: str, ctype: str) -> int:
    """value as a Python int in the range of C type ctype (a key of
    INT_RANGES). Only ints and numpy integer scalars are taken: TypeError
    for a bool, a float (even 2.0) or anything else; RangeError (a
    ValueError) naming what and the range when the value does not fit."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    lo, hi = INT_RANGES[ctype]
    if not lo <= int(value) <= hi:
        raise out_of_range(what, int(value), ctype)
    return int(value)


def device_index(device: Any) -> int:
    """The C options' device: -1 (the host) for None, else the int given
    (checked as as_int does)."""
    return -1 if device is None else as_int(device, "device", "int")


def cstr(s: Optional[str], what: str, *, none_ok: bool = False):
    """A NUL-terminated char* holding the str s as UTF-8 (NULL for None where
    none_ok). TypeError for anything but a str; InvalidArgumentError for a
    NUL character (C would cut the string there) or a lone surrogate."""
    if s is None and none_ok:
        return ffi.NULL
    if not isinstance(s, str):
        raise TypeError(f"{what} must be a str, not {type(s).__name__}")
    if "\0" in s:
        raise InvalidArgumentError(f"{what} contains a NUL character at index {s.index(chr(0))}")
    try:
        return ffi.new("char[]", s.encode("utf-8"))
    except UnicodeEncodeError as e:
        raise InvalidArgumentError(f"{what} is not valid text: {e.reason} at index {e.start}") from None


def cpath(path: Any, what: str = "path"):
    """A NUL-terminated char* holding a file system path (str, bytes or
    os.PathLike) in the file system's encoding; TypeError for anything else,
    InvalidArgumentError for a NUL or a name the encoding cannot hold."""
    try:
        b = os.fsencode(path)
    except TypeError:
        raise TypeError(f"{what} must be a str, bytes or os.PathLike, not {type(path).__name__}") from None
    except UnicodeEncodeError as e:
        raise InvalidArgumentError(f"{what} is not a valid file name: {e.reason} at index {e.start}") from None
    if b"\0" in b:
        raise InvalidArgumentError(f"{what} contains a NUL byte")
    return ffi.new("char[]", b)


def pystr(p) -> str:
    """A Python str for a library-owned char* (empty for NULL)."""
    return "" if p == ffi.NULL else ffi.string(p).decode("utf-8", "replace")
