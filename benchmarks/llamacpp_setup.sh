#!/usr/bin/env bash
# Installs llama-cpp-python (from PyPI, built for this CPU) into .venv-bench
# for benchmarks/cpu_llamacpp.py. Not part of the test command.
#   benchmarks/llamacpp_setup.sh [version]   (default 0.3.36)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=${1:-0.3.36}
python3 -m venv "$root/.venv-bench"
# Only libllama and ggml are needed: no multimodal tools, no common library.
CMAKE_ARGS="${CMAKE_ARGS:-} -DLLAVA_BUILD=OFF -DLLAMA_BUILD_COMMON=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" \
CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
	"$root/.venv-bench/bin/pip" install -q --disable-pip-version-check "llama-cpp-python==$version"
"$root/.venv-bench/bin/python" -c 'import llama_cpp; print("llama-cpp-python", llama_cpp.__version__)'
