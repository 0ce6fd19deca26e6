#!/usr/bin/env bash
# Crash soak of the store: runs the SIGKILL test (tests/test_store_crash.c,
# 65 kills per run, every sync mode, with and without compaction, each run
# with a new random seed) until at least TRIALS kills have been checked, and
# reports the totals, ending with 'soak: TRIALS passed, RUNS failed'. Every acknowledged fact is verified after every kill;
# a run that finds a loss fails the soak and prints its seed for replay
# (INFS_CRASH_SEED=seed build/tests/test_store_crash).
#   scripts/soak.sh [TRIALS]   (default 1000; CI runs a short round)
set -uo pipefail
cd "$(dirname "$0")/.."

want=${1:-1000}
dir=build
if [ ! -x "$dir/tests/test_store_crash" ]; then
	[ -d "$dir/meson-private" ] || meson setup "$dir" >/dev/null || exit 1
	ninja -C "$dir" tests/test_store_crash >/dev/null || exit 1
fi
trials=0 runs=0 torn=0 cut=0 failed=0
seed=${INFS_CRASH_SEED:-$(date +%s)}
start=$(date +%s)
while [ "$trials" -lt "$want" ]; do
	log=$(INFS_CRASH_SEED=$((seed + runs)) "$dir/tests/test_store_crash" 2>&1)
	rc=$?
	line=$(grep -E '^[0-9]+ trials:' <<<"$log")
	runs=$((runs + 1))
	if [ $rc -ne 0 ] || [ -z "$line" ]; then
		failed=$((failed + 1))
		echo "run $runs (INFS_CRASH_SEED=$((seed + runs - 1))) failed:"
		tail -20 <<<"$log"
		break
	fi
	read -r n t c < <(sed -E 's/^([0-9]+) trials:.* ([0-9]+) kills tore a record, ([0-9]+) cut.*/\1 \2 \3/' <<<"$line")
	trials=$((trials + n)) torn=$((torn + t)) cut=$((cut + c))
done
echo "$trials trials in $runs runs ($(($(date +%s) - start)) s, seeds from $seed): $failed runs lost acknowledged data;" \
	"$torn kills tore a record, $cut cut a compaction short"
echo "soak: $trials passed, $failed failed"
[ $failed -eq 0 ]
