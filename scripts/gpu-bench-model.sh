#!/usr/bin/env bash
# On a machine with a CUDA GPU, in one call: build with CUDA (in $BUILD,
# default build-gpu, reused when configured), run bench_model_gpu (the
# model runtime at Llama-3-8B geometry, docs/benchmarks.md), the torch
# reference engine on the same shapes at batch 1 and 32, transformers
# (benchmarks/hf_runtime.py), and the comparison.
# Everything goes to $OUT (default ./gpu-out): bench-model.log,
# model_gpu.json, ref.json, hf.json, gpu-runtime-h200.json, gpu-runtime.md.
#   REF  the reference script (default shared/bench/torch_engine_ref.py in
#        the checkout: ../shared does not travel to the GPU machine, so the
#        integrator copies it there). Without it the ref_* fields are null.
# Exits non-zero when the build or our benchmark fails; a failing reference
# or transformers run is reported and leaves its fields null.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BUILD=${BUILD:-build-gpu}
REF=${REF:-shared/bench/torch_engine_ref.py}
exec > >(tee "$OUT/bench-model.log") 2>&1

echo "== device"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem,temperature.gpu --format=csv

echo "== build"
if [ ! -d "$BUILD/meson-private" ]; then
	meson setup "$BUILD" -Dcuda=enabled -Dfaiss=disabled -Dblas=disabled -Dwerror=true >/dev/null || exit 1
fi
ninja -C "$BUILD" -j"$(nproc)" benchmarks/bench_model_gpu >"$OUT/build.log" 2>&1 || { cat "$OUT/build.log"; exit 1; }
rm -f "$OUT/build.log"

echo "== bench_model_gpu"
start=$SECONDS
"$BUILD/benchmarks/bench_model_gpu" "$OUT/model_gpu.json" || { echo "bench_model_gpu FAILED"; exit 1; }
echo "   $((SECONDS - start)) s"

echo "== torch reference ($REF)"
start=$SECONDS
if [ -f "$REF" ]; then
	PYTHONUNBUFFERED=1 python3 "$REF" --out "$OUT/ref.json" --batch 1,32 || { echo "reference FAILED"; rm -f "$OUT/ref.json"; }
else
	echo "no $REF: ref_* fields stay null"
fi
echo "   $((SECONDS - start)) s"

echo "== transformers (benchmarks/hf_runtime.py)"
start=$SECONDS
PYTHONUNBUFFERED=1 python3 benchmarks/hf_runtime.py --out "$OUT/hf.json" || { echo "transformers FAILED"; rm -f "$OUT/hf.json"; }
echo "   $((SECONDS - start)) s"

echo "== compare"
python3 benchmarks/gpu_runtime_compare.py "$OUT/model_gpu.json" "$OUT/ref.json" "$OUT/gpu-runtime-h200.json" \
	--hf "$OUT/hf.json" \
	| tee "$OUT/gpu-runtime.md" || exit 1
