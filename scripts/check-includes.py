#!/usr/bin/env python3
"""Fails when two subsystem folders of the library include each other.

Reads the `#include "..."` lines of ROOT/libinferscale/**/*.{c,h,cu,cuh} (and
of ROOT/kernels/, which cuda/ reaches by bare names, and ROOT/tools/), maps every file and
every include to its folder, and reports each cycle of the folder graph: a
strongly connected component of more than one folder. `inferscale/...` is the
public ABI (include/), a leaf. With --graph it also prints the graph.

Usage: check-includes.py [--graph] [ROOT]   (ROOT: the repository, default ..)
Exit status: 0 when there is no cycle, 1 when there is one, 2 on bad usage.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SUFFIXES = ('.c', '.h', '.cu', '.cuh')


def sources(root):
    """(folder, path) of every source file: a folder of libinferscale/ by its
    name, kernels/ and tools/ as 'kernels' and 'tools'."""
    lib = os.path.join(root, 'libinferscale')
    for base, name in ((lib, None), (os.path.join(root, 'kernels'), 'kernels'), (os.path.join(root, 'tools'), 'tools')):
        for dirpath, _, files in os.walk(base):
            rel = os.path.relpath(dirpath, base)
            folder = name or (rel.split(os.sep)[0] if rel != '.' else '.')
            for f in sorted(files):
                if f.endswith(SUFFIXES):
                    yield folder, os.path.join(dirpath, f)


def target(root, folder, path, inc):
    """The folder an include names: its first component (library folder or
    the public include/), else the including file's own folder, else
    kernels/ (on the include path of cuda/); None for anything else."""
    if '/' in inc:
        head = inc.split('/')[0]
        if head == 'inferscale':
            return 'include'
        if head in ('kernels', 'tools'):
            return head
        if os.path.isdir(os.path.join(root, 'libinferscale', head)):
            return head
        return None
    if os.path.exists(os.path.join(os.path.dirname(path), inc)):
        return folder
    if os.path.exists(os.path.join(root, 'kernels', inc)):
        return 'kernels'
    return None


def graph(root):
    """folder -> {folder it includes: [(file, include), ...]}"""
    g = {}
    for folder, path in sources(root):
        g.setdefault(folder, {})
        with open(path, encoding='utf-8', errors='replace') as fh:
            text = fh.read()
        for inc in INCLUDE.findall(text):
            to = target(root, folder, path, inc)
            if to is not None and to != folder:
                g[folder].setdefault(to, []).append((os.path.relpath(path, root), inc))
                g.setdefault(to, {})
    return g


def components(g):
    """Tarjan's strongly connected components, iteratively."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for start in sorted(g):
        if start in index:
            continue
        work = [(start, iter(sorted(g[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    out.append(sorted(comp))
    return out


def main(argv):
    args = [a for a in argv if a != '--graph']
    if len(args) > 1 or any(a.startswith('-') for a in args):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    root = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
    if not os.path.isdir(os.path.join(root, 'libinferscale')):
        print(f'check-includes: {root} has no libinferscale/ folder; pass the repository root', file=sys.stderr)
        return 2
    g = graph(root)
    if '--graph' in argv:
        for f in sorted(g):
            print(f'{f} -> {" ".join(sorted(g[f])) or "(nothing)"}')
    cycles = [c for c in components(g) if len(c) > 1]
    for c in cycles:
        print('include cycle between folders: ' + ' '.join(c))
        for a in c:
            for b in sorted(g[a]):
                if b in c:
                    f, inc = g[a][b][0]
                    more = len(g[a][b]) - 1
                    print(f'  {a} -> {b}: {f} includes "{inc}"' + (f' (and {more} more)' if more else ''))
    if cycles:
        print(f'{len(cycles)} include cycle(s); move what both folders need into a folder below both')
        return 1
    print(f'no include cycle between the {len(g)} folders')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
