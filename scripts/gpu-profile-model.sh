#!/usr/bin/env bash
# On a machine with a CUDA GPU and ncu: where the time of one forward call
# goes, at Llama-3-8B geometry (bench_model_gpu --profile). For each step
# (full prefill, question, decode over the K-fact prompt) ncu times every
# kernel of one call; the summary (kernel, calls, total and mean time) goes
# to $OUT/profile-STEP.txt, then one detailed ncu report of the attention
# kernel of the full prefill (throughput, occupancy, stalls) to
# $OUT/profile-attention.txt. Usage: scripts/gpu-profile-model.sh [K]
# (default 50); BUILD as in gpu-bench-model.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
BUILD=${BUILD:-build-gpu}
K=${1:-50}
mkdir -p "$OUT"
ninja -C "$BUILD" benchmarks/bench_model_gpu >/dev/null || exit 1
bench="$BUILD/benchmarks/bench_model_gpu"
for step in full question decode; do
	ncu --profile-from-start off --clock-control none --metrics gpu__time_duration.sum --csv \
		"$bench" --profile "$K" "$step" >"$OUT/ncu-$step.csv" 2>"$OUT/ncu-$step.err" || { cat "$OUT/ncu-$step.err"; exit 1; }
	python3 - "$OUT/ncu-$step.csv" "$step" "$K" >"$OUT/profile-$step.txt" <<'PY'
import csv, collections, sys
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"'))
        if r.get("Metric Name") == "gpu__time_duration.sum"]
by = collections.defaultdict(lambda: [0, 0.0])
for r in rows:
    name = r["Kernel Name"].split("(")[0][:70]
    scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}[r["Metric Unit"]]
    by[name][0] += 1
    by[name][1] += float(r["Metric Value"].replace(",", "")) * scale
total = sum(v[1] for v in by.values())
print(f"{sys.argv[2]} step at k = {sys.argv[3]}: {len(rows)} kernels, {total / 1e3:.3f} ms of kernel time")
print(f"{'kernel':72} {'calls':>5} {'total us':>10} {'share':>6}")
for name, (n, us) in sorted(by.items(), key=lambda kv: -kv[1][1]):
    print(f"{name:72} {n:5d} {us:10.1f} {us / total:6.1%}")
PY
	cat "$OUT/profile-$step.txt"
done
ncu --profile-from-start off --clock-control none -k regex:flash_kernel --launch-count 1 \
	--section SpeedOfLight --section Occupancy --section WarpStateStats --section ComputeWorkloadAnalysis \
	"$bench" --profile "$K" full >"$OUT/profile-attention.txt" 2>&1
tail -n 80 "$OUT/profile-attention.txt"
