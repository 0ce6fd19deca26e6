#!/usr/bin/env bash
# Installs llama-cpp-python (from PyPI, built for this CPU) into .venv-bench
# for benchmarks/cpu_llamacpp.py. Not part of the test command.
#   benchmarks/llamacpp_setup.sh [version]   (default 0.3.36)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=${1:-0.3.36}
python3 -m venv "$root/.venv-bench"
"$root/.venv-bench/bin/pip" install -q --disable-pip-version-check "llama-cpp-python==$version"
"$root/.venv-bench/bin/python" -c 'import llama_cpp; print("llama-cpp-python", llama_cpp.__version__)'
