"""The CFFI declarations (inferscale/_decl.h) against the public headers
installed with the package, and the headers' version against the library's."""

from __future__ import annotations

import os
import re

import pytest

import inferscale
from cdecl import Declarations, parse_header, preprocess

HEADER = os.path.join(inferscale.get_include(), "inferscale", "inferscale.h")
DECL = os.path.join(os.path.dirname(inferscale.__file__), "_decl.h")


def diff(header: Declarations, decl: Declarations) -> list:
    """Every difference between the headers' declarations and the cdef."""
    out = []
    for kind in ("functions", "structs", "enums", "typedefs"):
        h, d = getattr(header, kind), getattr(decl, kind)
        for name in sorted(set(h) | set(d)):
            if name not in d:
                out.append(f"{kind}: {name} is in the headers, not in the cdef")
            elif name not in h:
                out.append(f"{kind}: {name} is in the cdef, not in the headers")
            elif h[name] != d[name]:
                out.append(f"{kind}: {name} differs:\n  header {h[name]}\n  cdef   {d[name]}")
    for name, value in sorted(header.macros.items()):
        if name.startswith("INFS_VERSION_"):
            continue  # checked against the library below
        if name not in decl.macros:
            out.append(f"macros: {name} = {value} is in the headers, not in the cdef")
        elif decl.macros[name] != value:
            out.append(f"macros: {name} is {value} in the headers, {decl.macros[name]} in the cdef")
    for name in sorted(set(decl.macros) - set(header.macros)):
        out.append(f"macros: {name} is in the cdef, not in the headers")
    return out


@pytest.fixture(scope="module")
def header() -> Declarations:
    return parse_header(HEADER, [inferscale.get_include()])


@pytest.fixture(scope="module")
def decl() -> Declarations:
    return parse_header(DECL, [])


def test_headers_are_installed_with_the_package():
    names = sorted(os.listdir(os.path.dirname(HEADER)))
    assert "version.h" in names and "inferscale.h" in names
    # The umbrella header includes every other public header.
    included = set(re.findall(r'#include "inferscale/(\w+\.h)"', open(HEADER).read()))
    assert set(names) - {"inferscale.h"} <= included | {"version.h"}, names


def test_cdef_matches_headers(header, decl):
    assert header.functions and header.structs and header.enums and header.macros
    problems = diff(header, decl)
    assert not problems, "\n".join(problems)


def test_every_header_function_is_in_the_library(header):
    missing = [name for name in header.functions if not hasattr(inferscale.lib, name)]
    assert not missing, f"declared but not exported by {inferscale.library_path()}: {missing}"


def test_header_version_is_the_library_version(header):
    assert header.macros["INFS_VERSION_NUMBER"] == inferscale.lib.infs_version_number()
    assert header.other_macros["INFS_VERSION_STRING"] == f'"{inferscale.version()}"'
    m = header.macros
    assert inferscale.__version__ == f"{m['INFS_VERSION_MAJOR']}.{m['INFS_VERSION_MINOR']}.{m['INFS_VERSION_PATCH']}"


@pytest.mark.parametrize("old,new,expect", [
    ("\tuint32_t head_dim;\n\tuint32_t rotary_dim;", "\tuint32_t rotary_dim;\n\tuint32_t head_dim;",
     "structs: infs_geometry differs"),
    ("\tint64_t stride_dim;", "\tint32_t stride_dim;", "structs: infs_kv_layout differs"),
    ("INFS_EBUSY = -7", "INFS_EBUSY = -70", "enums: infs_status differs"),
    ("#define INFS_TEXT_MAX 1048576", "#define INFS_TEXT_MAX 1048575", "macros: INFS_TEXT_MAX"),
    ("size_t n_ids, uint32_t start_pos", "uint32_t n_ids, uint32_t start_pos",
     "functions: infs_inject_into_blocks differs"),
    ("int infs_store_sync(infs_store *store);\n", "", "functions: infs_store_sync is in the headers"),
])
def test_drift_is_detected(tmp_path, header, old, new, expect):
    text = open(DECL).read()
    assert old in text
    path = tmp_path / "drifted.h"
    path.write_text(text.replace(old, new, 1))
    problems = diff(header, Declarations(preprocess(str(path), [])))
    assert any(p.startswith(expect) for p in problems), problems
