#!/usr/bin/env bash
# The accuracy sweep of docs/eval.md on a CUDA machine: `inferscale eval`
# over every question of each LoCoMo conversation given, at each k, for
# each recovery mode, at each attention calibration, several runs at once
# on the one GPU. One JSON file per (conversation, k, mode) under $OUT, then
# scripts/eval-summary.py's table of them all (summary.md, summary.json).
#   BUILD (default build-gpu): a CUDA build with tools/inferscale
#   KS (default "10 20"), MODES (default "none prefix"), CAL (default
#   "off,0.9:0.9,0.8:0.8,1:0.8,1:0.6,0.8:0.6,0.9:1,1.1:1"), JOBS (default 8)
#   EVAL_ARGS: more options of every run (e.g. "--limit 50 --seed 1")
#   INFS_CACHE: SmolLM2 and the embedder (scripts/fetch-models.sh)
# usage: scripts/gpu-eval.sh conv-26.json conv-30.json ...
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
BUILD=${BUILD:-build-gpu}
KS=${KS:-10 20}
MODES=${MODES:-none prefix}
CAL=${CAL:-off,0.9:0.9,0.8:0.8,1:0.8,1:0.6,0.8:0.6,0.9:1,1.1:1}
JOBS=${JOBS:-8}
[ $# -gt 0 ] || { echo "usage: $0 CONV.json ..." >&2; exit 2; }
mkdir -p "$OUT"
runs=()
for f in "$@"; do
	for k in $KS; do
		for m in $MODES; do
			runs+=("$f $k $m")
		done
	done
done
one() {
	local f=$1 k=$2 m=$3 name
	name=$(basename "$f" .json)-k$k-$m
	"$BUILD/tools/inferscale" eval "$f" --device 0 --k "$k" --recovery "$m" --calibration "$CAL" --quiet ${EVAL_ARGS:-} \
		--json "$OUT/$name.json" 2>"$OUT/$name.log" || { echo "$name failed:"; tail -3 "$OUT/$name.log"; }
}
export -f one
export BUILD OUT CAL EVAL_ARGS
start=$(date +%s)
printf '%s\n' "${runs[@]}" | xargs -P "$JOBS" -L 1 bash -c 'one $0 $1 $2'
echo "${#runs[@]} runs in $(($(date +%s) - start)) s"
python3 scripts/eval-summary.py "$OUT"/*-k*-*.json --md "$OUT/summary.md" --json "$OUT/summary.json"
