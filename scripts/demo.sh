#!/usr/bin/env bash
# The main job on the CPU, from a fresh machine: installs what is needed,
# fetches the small models (SmolLM2-135M-Instruct, all-MiniLM-L6-v2), builds,
# encodes the shipped memory of an invented user (examples/memory/facts.jsonl:
# each fact's pre-RoPE KV and embedding, once), then answers the questions of
# examples/memory/questions.jsonl twice: by retrieving the top facts,
# injecting their KV into the paged cache and prefilling only the question,
# and by full recompute of the same prompt. Answers and TTFTs side by side.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/fetch-models.sh
if [ -d build/meson-private ]; then meson setup --reconfigure build >/dev/null; else meson setup build >/dev/null; fi
ninja -C build >/dev/null

store=build/demo/maya.infs
rm -rf build/demo && mkdir -p build/demo
echo "== encoding $(wc -l < examples/memory/facts.jsonl) facts about Maya (once)"
build/tools/inferscale encode --store "$store" examples/memory/facts.jsonl
echo
echo "== answering: injection vs full recompute (k = 10 facts, greedy)"
build/tools/inferscale ask --store "$store" --questions examples/memory/questions.jsonl \
	--compare -k 10 --max-tokens 32
