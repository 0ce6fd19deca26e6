#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang (AddressSanitizer +
# UndefinedBehaviorSanitizer) in build-fuzz/ and runs each for SECONDS (or
# for RUNS executions) over a copy of its committed corpus, JOBS processes at
# once.
#   scripts/fuzz.sh [-t SECONDS | -r RUNS] [-j JOBS] [TARGET...]   (default: 20 s, 1 job, all)
# Prints one line per target (execs, corpus size, findings) and ends with
# 'fuzz: N passed, N failed'; a target that crashes leaves its input in
# build-fuzz/findings/<target>/ and fails. Needs scripts/fetch-models.sh for
# the tokenizer target.
set -uo pipefail
cd "$(dirname "$0")/.."

seconds=20 jobs=1 runs=
while getopts t:r:j: opt; do
	case $opt in
	t) seconds=$OPTARG ;;
	r) runs=$OPTARG ;;
	j) jobs=$OPTARG ;;
	*) echo "usage: $0 [-t SECONDS | -r RUNS] [-j JOBS] [TARGET...]" >&2; exit 2 ;;
	esac
done
# How long: a time, or a number of executions (per job).
limit=(-max_total_time="$seconds")
[ -n "$runs" ] && limit=(-runs="$runs")
shift $((OPTIND - 1))
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(store gguf safetensors json tokenizer jsonl locomo plot)

if ! command -v clang >/dev/null; then
	echo "fuzz: clang not found, nothing fuzzed"
	exit 0
fi
dir=build-fuzz
if [ ! -d "$dir/meson-private" ]; then
	CC=clang meson setup "$dir" -Dfuzz=true -Dcuda=disabled -Dfaiss=disabled \
		-Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debugoptimized >/dev/null || exit 1
fi
ninja -C "$dir" $(printf 'tests/fuzz/fuzz_%s ' "${targets[@]}") >/dev/null || { ninja -C "$dir"; exit 1; }

export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1
# Targets that read files rewrite one per input: tmpfs makes that cheap.
TMPDIR=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
export TMPDIR
trap 'rm -rf "$TMPDIR"' EXIT
pass=0 fail=0
for t in "${targets[@]}"; do
	work=$dir/corpus/$t findings=$dir/findings/$t log=$dir/fuzz-$t.log
	mkdir -p "$work" "$findings"
	cp -n tests/fuzz/corpus/$t/* "$work/" 2>/dev/null
	par=()
	[ "$jobs" -gt 1 ] && par=(-jobs="$jobs" -workers="$jobs")
	# In jobs mode each worker logs to fuzz-N.log in the current directory.
	start=$(date +%s)
	(cd "$TMPDIR" && "$OLDPWD/$dir/tests/fuzz/fuzz_$t" "$OLDPWD/$work" "${limit[@]}" "${par[@]}" \
		-print_final_stats=1 -artifact_prefix="$OLDPWD/$findings/" -rss_limit_mb=4096 -timeout=30) \
		>"$log" 2>&1
	rc=$?
	cat "$TMPDIR"/fuzz-*.log >>"$log" 2>/dev/null
	rm -f "$TMPDIR"/fuzz-*.log
	execs=$(grep -ah '^stat::number_of_executed_units' "$log" | awk '{ s += $2 } END { print s + 0 }')
	found=$(find "$findings" -type f | wc -l)
	printf '%-12s %10d execs in %s s, corpus %d, %d findings\n' "$t" "$execs" "$(($(date +%s) - start))" \
		"$(ls "$work" | wc -l)" "$found"
	if [ $rc -ne 0 ] || [ "$found" -ne 0 ] || [ "$execs" -eq 0 ]; then
		fail=$((fail + 1))
		grep -aE 'ERROR|SUMMARY|runtime error|==[0-9]+==' "$log" | head -20
	else
		pass=$((pass + 1))
	fi
done
echo "fuzz: $pass passed, $fail failed"
[ $fail -eq 0 ]
