#!/usr/bin/env bash
# The main job on the CPU: sets up this machine, builds the library, and runs
# the example (create a store, put facts, retrieve, inject into a paged cache).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
if [ -d build/meson-private ]; then meson setup --reconfigure build >/dev/null; else meson setup build >/dev/null; fi
ninja -C build >/dev/null
build/examples/quickstart
