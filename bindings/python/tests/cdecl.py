"""Reads C declarations the way the ABI test needs them: a small preprocessor
(comments, line continuations, #include "...", #if/#ifdef with defined(),
object-like #define) and pycparser, giving functions, structs, enums,
typedefs and integer macros as comparable values."""

from __future__ import annotations

import os
import re
from typing import Dict, List, Optional, Tuple

from pycparser import c_ast, c_generator, c_parser

# Types the headers take from <stddef.h>/<stdint.h>; CFFI knows them natively.
PRELUDE = """
typedef unsigned long size_t;
typedef signed char int8_t; typedef unsigned char uint8_t;
typedef short int16_t; typedef unsigned short uint16_t;
typedef int int32_t; typedef unsigned int uint32_t;
typedef long int64_t; typedef unsigned long uint64_t;
typedef long intptr_t; typedef unsigned long uintptr_t;
"""


def _strip_comments(text: str) -> str:
    def repl(m: re.Match) -> str:
        s = m.group(0)
        return s if s.startswith('"') else (" " if s.startswith("/*") else "") + "\n" * s.count("\n")
    return re.sub(r'"(?:\\.|[^"\\])*"|/\*.*?\*/|//[^\n]*', repl, text, flags=re.S)


def _c_int(expr: str, macros: Dict[str, str]) -> Optional[int]:
    """The value of an integer constant expression, or None."""
    for _ in range(16):
        new = re.sub(r"\b([A-Za-z_]\w*)\b", lambda m: f"({macros[m.group(1)]})"
                     if m.group(1) in macros else m.group(1), expr)
        if new == expr:
            break
        expr = new
    expr = re.sub(r"\b(0[xX][0-9a-fA-F]+|\d+)[uUlL]+\b", r"\1", expr)
    if not re.fullmatch(r"[\s\d xXa-fA-F()+\-*/%<>&|^~]*", expr) or not expr.strip():
        return None
    expr = expr.replace("/", "//")
    try:
        value = eval(expr, {"__builtins__": {}})
    except Exception:
        return None
    return value if isinstance(value, int) else None


class Preprocessed:
    def __init__(self) -> None:
        self.code: List[str] = []
        self.macros: Dict[str, str] = {}


def preprocess(path: str, include_dirs: List[str], out: Optional[Preprocessed] = None,
               seen: Optional[set] = None) -> Preprocessed:
    out = out or Preprocessed()
    seen = seen if seen is not None else set()
    path = os.path.realpath(path)
    if path in seen:
        return out
    seen.add(path)
    with open(path, encoding="utf-8") as f:
        text = _strip_comments(f.read()).replace("\\\n", " ")
    stack: List[Tuple[bool, bool]] = []  # (this branch active, some branch taken)

    def active() -> bool:
        return all(a for a, _ in stack)

    def cond(expr: str) -> bool:
        expr = re.sub(r"defined\s*\(\s*(\w+)\s*\)|defined\s+(\w+)",
                      lambda m: "1" if (m.group(1) or m.group(2)) in out.macros else "0", expr)
        expr = expr.replace("&&", " and ").replace("||", " or ")
        expr = re.sub(r"!(?!=)", " not ", expr)
        expr = re.sub(r"\b[A-Za-z_]\w*\b", lambda m: m.group(0) if m.group(0) in ("and", "or", "not")
                      else str(_c_int(m.group(0), out.macros) or 0), expr)
        return bool(eval(expr, {"__builtins__": {}}))

    for line in text.split("\n"):
        s = line.strip()
        m = re.match(r"#\s*(\w+)\s*(.*)", s)
        if not m:
            if active() and s:
                out.code.append(line)
            continue
        d, rest = m.group(1), m.group(2).strip()
        if d in ("ifdef", "ifndef"):
            taken = (rest in out.macros) == (d == "ifdef")
            stack.append((taken, taken))
        elif d == "if":
            taken = active() and cond(rest)
            stack.append((taken, taken))
        elif d == "elif":
            _, done = stack.pop()
            taken = not done and cond(rest)
            stack.append((taken, done or taken))
        elif d == "else":
            _, done = stack.pop()
            stack.append((not done, True))
        elif d == "endif":
            stack.pop()
        elif not active():
            continue
        elif d == "define":
            dm = re.match(r"(\w+)(\([^)]*\))?\s*(.*)", rest)
            if dm.group(2) is None:
                out.macros[dm.group(1)] = dm.group(3).strip()
        elif d == "undef":
            out.macros.pop(rest, None)
        elif d == "include":
            im = re.match(r'"([^"]+)"', rest)
            if im:
                for inc in [os.path.dirname(path)] + include_dirs:
                    cand = os.path.join(inc, im.group(1))
                    if os.path.exists(cand):
                        preprocess(cand, include_dirs, out, seen)
                        break
                else:
                    raise FileNotFoundError(f"{path}: cannot find {im.group(1)}")
    return out


class Declarations:
    """functions: name -> (return type, (param types...)); structs: name ->
    ((field, type)...); enums: name -> ((enumerator, value)...); typedefs:
    name -> type; macros: name -> int value (integer macros only)."""

    def __init__(self, pre: Preprocessed) -> None:
        macros = pre.macros
        code = "\n".join(pre.code)
        # Object-like macros used inside declarations (INFS_API) expand to text.
        for name, value in macros.items():
            if _c_int(value, macros) is None:
                code = re.sub(rf"\b{name}\b", value if not value.startswith("{") else name, code)
        ast = c_parser.CParser().parse(PRELUDE + code)
        self.functions: Dict[str, Tuple[str, Tuple[str, ...]]] = {}
        self.structs: Dict[str, Tuple[Tuple[str, str], ...]] = {}
        self.enums: Dict[str, Tuple[Tuple[str, int], ...]] = {}
        self.typedefs: Dict[str, str] = {}
        self.macros: Dict[str, int] = {}
        self.other_macros: Dict[str, str] = {}
        for name, value in macros.items():
            v = _c_int(value, macros)
            if v is not None:
                self.macros[name] = v
            elif value:
                self.other_macros[name] = value
        prelude_names = set(re.findall(r"(\w+);", PRELUDE))
        for node in ast.ext:
            self._visit(node, prelude_names)

    @staticmethod
    def _type(node: c_ast.Node) -> str:
        node = _without_names(node)
        return " ".join(c_generator.CGenerator().visit(node).split())

    def _record(self, t: c_ast.Node) -> None:
        if isinstance(t, c_ast.Struct) and t.decls is not None:
            self.structs[t.name] = tuple((d.name, self._type(d.type)) for d in t.decls)
        elif isinstance(t, c_ast.Enum) and t.values is not None:
            values, nxt = [], 0
            for e in t.values.enumerators:
                if e.value is not None:
                    nxt = _c_int(c_generator.CGenerator().visit(e.value), {})
                values.append((e.name, nxt))
                nxt += 1
            self.enums[t.name] = tuple(values)

    def _visit(self, node: c_ast.Node, skip: set) -> None:
        if isinstance(node, c_ast.Typedef):
            if node.name in skip:
                return
            inner = node.type.type if isinstance(node.type, c_ast.TypeDecl) else None
            if inner is not None:
                self._record(inner)
            self.typedefs[node.name] = self._type(node.type)
        elif isinstance(node, c_ast.Decl):
            if isinstance(node.type, c_ast.FuncDecl):
                fd = node.type
                params = []
                for p in (fd.args.params if fd.args else []):
                    params.append(self._type(p.type if isinstance(p, c_ast.Decl) else p))
                if params == ["void"]:
                    params = []
                self.functions[node.name] = (self._type(fd.type), tuple(params))
            else:
                self._record(node.type)


def _without_names(node: c_ast.Node) -> c_ast.Node:
    """A copy of a type node with declarator names removed, struct/enum
    bodies dropped (compared separately)."""
    import copy
    node = copy.deepcopy(node)
    for n in _walk(node):
        if isinstance(n, c_ast.TypeDecl):
            n.declname = None
        if isinstance(n, (c_ast.Struct, c_ast.Enum)):
            if isinstance(n, c_ast.Struct):
                n.decls = None
            else:
                n.values = None
    return node


def _walk(node: c_ast.Node):
    yield node
    for _, child in node.children():
        yield from _walk(child)


def parse_header(path: str, include_dirs: List[str]) -> Declarations:
    return Declarations(preprocess(path, include_dirs))
