#!/usr/bin/env python3
"""Checks that the repository paths the documentation names exist.

Reads README.md and docs/**/*.md and checks, against the checkout it lives in:
- every repository path named in backticks or in a code block of README.md
  and docs/*.md (a word starting with one of the repository's top-level
  folders, such as `libinferscale/store/log.c` or `scripts/demo.sh`; globs
  must match something; `FILE:LINE` and `#anchor` suffixes are dropped);
- every relative Markdown link target, in docs/history/ too, and its
  #anchor where it names a heading of a Markdown file.
docs/history/ may name files that are gone (it records the past) outside
its links. Paths under build folders, ../shared or $VARIABLES are what
commands make or the machine holds, and are not checked.

Usage: scripts/check-docs.py [ROOT]   (default: the checkout holding this script)
Prints each missing path as FILE:LINE: PATH and exits 1 if there is one.
"""

import glob
import os
import re
import sys

TOP = ("include", "libinferscale", "kernels", "tools", "bindings", "tests", "benchmarks",
       "examples", "docs", "scripts", "subprojects")
# A repository path: a top-level folder, then path characters (globs allowed).
PATH = re.compile(r"(?<![\w./$~-])((?:%s)/[\w./*+-]*)" % "|".join(TOP))
LINK = re.compile(r"\]\(([^)\s]+)\)")
TICK = re.compile(r"`([^`\n]+)`")
NINJA = re.compile(r"ninja -C \S+( [\w./-]+)+")


def exists(root, path):
    path = path.rstrip(".,:;")
    if any(c in path for c in "*?["):
        return bool(glob.glob(os.path.join(root, path)))
    return os.path.exists(os.path.join(root, path))


def named_paths(line, in_code):
    """Repository paths named on a line: all of a code block's line, or what
    backticks hold elsewhere."""
    spans = [line] if in_code else TICK.findall(line)
    for span in spans:
        span = NINJA.sub("", span)  # ninja's targets are build outputs
        for m in PATH.finditer(span):
            p = m.group(1).split("#")[0]
            yield re.sub(r":\d+(-\d+)?$", "", p)  # FILE:LINE names FILE


def anchors(path):
    """The anchors GitHub gives a Markdown file's headings: lower case, only
    letters, digits, spaces, hyphens and underscores kept, spaces made
    hyphens, repeats numbered."""
    out, seen, in_code = set(), {}, False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.lstrip().startswith("```"):
                in_code = not in_code
            if in_code or not line.startswith("#"):
                continue
            slug = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def check_file(root, path, history):
    bad = []
    rel = os.path.relpath(path, root)
    in_code = False
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.lstrip().startswith("```"):
                in_code = not in_code
                continue
            if not history:
                for p in named_paths(line, in_code):
                    if not exists(root, p):
                        bad.append((rel, n, p))
            if in_code:
                continue
            for target in LINK.findall(line):
                if re.match(r"^[a-z]+:", target):  # a URL
                    continue
                file, _, anchor = target.partition("#")
                full = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
                if not os.path.exists(full):
                    bad.append((rel, n, target))
                elif anchor and full.endswith(".md") and anchor not in anchors(full):
                    bad.append((rel, n, target))
    return bad


def main(argv):
    root = os.path.abspath(argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    files = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    history = sorted(glob.glob(os.path.join(root, "docs", "history", "*.md")))
    if not os.path.exists(files[0]) or len(files) < 2:
        print(f"check-docs: no README.md and docs/*.md under {root}", file=sys.stderr)
        return 2
    bad = []
    for path in files:
        bad += check_file(root, path, False)
    for path in history:
        bad += check_file(root, path, True)
    for rel, n, p in bad:
        print(f"{rel}:{n}: {p} does not exist")
    print(f"check-docs: {len(files) + len(history)} files, {len(bad)} missing paths")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
