"""The ``inferscale`` command of the package: the C tool (tools/inferscale.c)
built into the package as inferscale/_bin/inferscale, run in place of this
process with the same arguments, so `pip install .` and `meson install` give
the same command (docs/python.md)."""

import os
import sys

TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bin", "inferscale")


def main() -> int:
    try:
        os.execv(TOOL, ["inferscale", *sys.argv[1:]])
    except OSError as e:
        # One line, no traceback: the package was installed without its tool
        # or the file cannot be run.
        print(f"inferscale: cannot run {TOOL}: {e.strerror} (reinstall the package: pip install .)",
              file=sys.stderr)
    return 1
