#!/usr/bin/env bash
# On a machine with a CUDA GPU, in one call: build with CUDA (in $BUILD,
# default build-gpu, reused when configured), run bench_engine_gpu (the
# engine at Llama-3-8B geometry, docs/benchmarks.md), the torch reference
# engine and transformers on the same shapes, and the comparison. Needs
# SmolLM2's GGUF (its tokenizer) and the embedder in $INFS_CACHE.
# Everything goes to $OUT (default ./gpu-out): bench-engine.log,
# engine_gpu.json, ref.json, hf.json, gpu-engine-h200.json, gpu-engine.md;
# ref.json and hf.json are reused when scripts/gpu-bench-model.sh made them
# in the same call.
#   REF  the reference script (default shared/bench/torch_engine_ref.py in
#        the checkout). Without it the ref_* fields are null.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BUILD=${BUILD:-build-gpu}
REF=${REF:-shared/bench/torch_engine_ref.py}
exec > >(tee "$OUT/bench-engine.log") 2>&1

echo "== build"
if [ ! -d "$BUILD/meson-private" ]; then
	meson setup "$BUILD" -Dcuda=enabled -Dfaiss=disabled -Dblas=disabled -Dwerror=true >/dev/null || exit 1
fi
ninja -C "$BUILD" -j"$(nproc)" benchmarks/bench_engine_gpu >"$OUT/build.log" 2>&1 || { cat "$OUT/build.log"; exit 1; }
rm -f "$OUT/build.log"

echo "== bench_engine_gpu"
start=$SECONDS
"$BUILD/benchmarks/bench_engine_gpu" "$OUT/engine_gpu.json" || { echo "bench_engine_gpu FAILED"; exit 1; }
echo "   $((SECONDS - start)) s"

if [ ! -f "$OUT/ref.json" ] && [ -f "$REF" ]; then
	echo "== torch reference ($REF)"
	PYTHONUNBUFFERED=1 python3 "$REF" --out "$OUT/ref.json" --batch 1 || { echo "reference FAILED"; rm -f "$OUT/ref.json"; }
fi
if [ ! -f "$OUT/hf.json" ]; then
	echo "== transformers (benchmarks/hf_runtime.py)"
	PYTHONUNBUFFERED=1 python3 benchmarks/hf_runtime.py --out "$OUT/hf.json" --batch 1 || { echo "transformers FAILED"; rm -f "$OUT/hf.json"; }
fi

echo "== compare"
python3 benchmarks/gpu_engine_compare.py "$OUT/engine_gpu.json" "$OUT/ref.json" "$OUT/gpu-engine-h200.json" \
	--hf "$OUT/hf.json" | tee "$OUT/gpu-engine.md" || exit 1
