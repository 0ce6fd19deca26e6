"""Writes inferscale/_cdef.py at build time: the CFFI declarations of
_decl.h parsed once (CFFI's out-of-line ABI mode), so that importing the
package does not run pycparser over them. Usage: gen_cdef.py _decl.h OUT."""

import hashlib
import sys

from cffi import FFI

decl_path, out_path = sys.argv[1], sys.argv[2]
with open(decl_path, "rb") as f:
    decl = f.read()
ffi = FFI()
ffi.cdef(decl.decode("utf-8"))
ffi.set_source("inferscale._cdef", None)
ffi.emit_python_code(out_path)
# _ffi.py uses this module only while it matches the _decl.h next to it.
with open(out_path, "a", encoding="utf-8") as f:
    f.write(f"DECL_SHA256 = {hashlib.sha256(decl).hexdigest()!r}\n")
