#!/usr/bin/env python3
"""scripts/check-includes.py on tiny trees: it passes a tree whose folders
include each other only downward and fails one with a circle, naming it."""
import os
import subprocess
import sys
import tempfile

CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'scripts', 'check-includes.py')


def tree(files):
    root = tempfile.mkdtemp(prefix='check-includes-')
    for path, text in files.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, 'w') as f:
            f.write(text)
    return root


def run(root):
    p = subprocess.run([sys.executable, CHECK, root], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


failures = 0


def expect(what, cond, out):
    global failures
    if not cond:
        failures += 1
        print(f'FAIL: {what}\n{out}')


base = {
    'libinferscale/util/error.h': '#include <stdio.h>\n',
    'libinferscale/store/store.c': '#include "store/store.h"\n#include "util/error.h"\n#include "inferscale/store.h"\n',
    'libinferscale/store/store.h': '#include "util/error.h"\n',
    'libinferscale/inject/inject.c': '#include "store/store.h"\n#include "inject.h"\n',
    'libinferscale/inject/inject.h': '\n',
    'libinferscale/cuda/device.c': '#include "kernels.h"\n#include "inject/inject.h"\n',
    'kernels/kernels.h': '\n',
    'tools/tool.c': '#include "inferscale/store.h"\n#include "tool.h"\n',
    'tools/tool.h': '\n',
}

rc, out = run(tree(base))
expect('a tree without a circle passes', rc == 0 and 'no include cycle' in out, out)

# Each case adds one file to the tree; a circle must fail (exit 1) and name
# its folders, sorted, and show each edge with the file that makes it.
circles = [
    ('a two-folder circle (store -> inject closes inject -> store)',
     'libinferscale/store/store_check.c', '#include "inject/inject.h"\n',
     ['include cycle between folders: inject store',
      'store -> inject: libinferscale/store/store_check.c includes "inject/inject.h"']),
    ('a three-folder circle (util -> cuda)',
     'libinferscale/util/version.c', '#include "cuda/device.h"\n', ['cuda inject store util']),
    ('a circle through kernels/, which cuda/ reaches by a bare name',
     'kernels/kernels.h', '#include "cuda/device.h"\n', ['cuda kernels']),
    ('an include under #ifdef, which some configuration builds',
     'libinferscale/util/geometry.c', '#ifdef X\n#include "store/store.h"\n#endif\n', ['store util']),
]
for what, path, text, wanted in circles:
    rc, out = run(tree(dict(base, **{path: text})))
    expect(what + ' fails', rc == 1, out)
    for w in wanted:
        expect(f'{what}: the output says {w!r}', w in out, out)

rc, out = run(tempfile.mkdtemp())
expect('a root without libinferscale/ is refused', rc == 2 and 'no libinferscale/' in out, out)

print('check-includes: %s' % ('ok' if not failures else f'{failures} failure(s)'))
sys.exit(1 if failures else 0)
