"""The ``inferscale`` command of the package: the C tool (tools/inferscale.c)
built into the package as inferscale/_bin/inferscale, run in place of this
process with the same arguments, so `pip install .` and `meson install` give
the same command (docs/python.md). One command is the package's own:
``fetch-models`` downloads the default models (inferscale.fetch_models), as
scripts/fetch-models.sh does in a source checkout."""

import os
import sys

TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bin", "inferscale")


def main() -> int:
    if sys.argv[1:2] == ["fetch-models"]:
        from .fetch import main as fetch_main
        return fetch_main(sys.argv[2:])
    try:
        os.execv(TOOL, ["inferscale", *sys.argv[1:]])
    except OSError as e:
        # One line, no traceback: the package was installed without its tool
        # or the file cannot be run.
        print(f"inferscale: cannot run {TOOL}: {e.strerror} (reinstall the package: pip install .)",
              file=sys.stderr)
    return 1
