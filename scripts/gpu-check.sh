#!/usr/bin/env bash
# On a machine with a CUDA GPU: configure with CUDA, build, run the test
# suites (the gpu suite included), compute-sanitizer memcheck and racecheck
# over the gpu suite, the demo, and the benchmarks. Logs and JSON go to $OUT
# (default ./gpu-out): gpu-check.log, gpu-check-summary.txt, testlog.txt,
# sanitizer.log, inject.json, retrieve.json, serving-api.json, tiers.json,
# benchmarks.json, benchmarks.md, tiers-h200.json (tiers.json with the
# engine's pinned-tier TTFT), and those of scripts/gpu-bench-model.sh
# (gpu-runtime-h200.json, ...) and scripts/gpu-bench-engine.sh
# (gpu-engine-h200.json, ...), and demo.log: the demo's questions answered on
# the GPU (SmolLM2 and the embedder from $INFS_CACHE), then eval
# --reference-device-weights bf16 and fp8 on the tiny LoCoMo fixture. Exits
# non-zero when a build, test, sanitizer check, the demo or a benchmark fails.
#   GPU_CHECK_SKIP=bench   skips the benchmarks; =sanitizer skips the sanitizer;
#   =tests skips the test suites; =demo the demo; =build takes $BUILD as it
#   is (for a call beside another one's build; words combine:
#   GPU_CHECK_SKIP=tests,bench)
#   GPU_CHECK_SANITIZE="fused inject"   runs the sanitizer on those tests only
#   (the runs take minutes each; each line of the log says how long)
#   GPU_CHECK_JOBS=8   sanitizer runs at once (default 1; each is one process
#   that mostly keeps a CPU core busy)
#   GPU_CHECK_COMMIT   the commit checked (default: git's HEAD), for a copy of a tree
# The final lines are the summary: the date, the commit, the device, and each
# phase's outcome. Phases run by earlier calls over the same $BUILD and commit
# count too ($BUILD/gpu-check.phases keeps them), so that a machine whose
# commands are limited in time runs the check as several calls that skip
# each other's phases; "passed end to end" needs all five phases passed.
# Run the calls one after another: on the H200, 12 sanitizer runs beside the
# tests phase made that phase run past 9 minutes, unfinished.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BUILD=${BUILD:-build-gpu}
skip=${GPU_CHECK_SKIP:-}
jobs=${GPU_CHECK_JOBS:-1}
commit=${GPU_CHECK_COMMIT:-$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)}
exec > >(tee "$OUT/gpu-check.log") 2>&1
fail=0

# A phase's outcome for the summary: name, passed|FAILED, what it counted.
# Kept in $BUILD/gpu-check.phases, one line a phase and commit (the
# newest), under a lock: checks of other phases may run beside this one.
phase() {
	local f="$BUILD/gpu-check.phases"
	(
		flock 9
		touch "$f"
		grep -v "^$commit $1 " "$f" >"$f.new"
		echo "$commit $1 $2 $(date -u +%FT%TZ) $3" >>"$f.new"
		mv "$f.new" "$f"
	) 9>"$f.lock"
}

echo "== device"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem,temperature.gpu --format=csv
nvcc --version | tail -1

echo "== build"
if [ ! -d "$BUILD/meson-private" ]; then
	[[ $skip == *build* ]] && { echo "GPU_CHECK_SKIP=build with no build in $BUILD"; exit 1; }
	meson setup "$BUILD" -Dcuda=enabled -Dfaiss=disabled -Dblas=disabled -Dwerror=true >/dev/null || exit 1
fi
start=$SECONDS
if [[ $skip == *build* ]]; then
	echo "(skipped: $BUILD as it is)"
elif ninja -C "$BUILD" -j"$(nproc)" >"$OUT/build.log" 2>&1; then
	phase build passed "-Dcuda=enabled -Dwerror=true, $((SECONDS - start)) s"
	rm -f "$OUT/build.log"
else
	cat "$OUT/build.log"
	phase build FAILED "see build.log"
	exit 1
fi

if [[ $skip != *tests* ]]; then
	echo "== tests"
	# every suite but 'model', whose real models (scripts/fetch-models.sh)
	# the GPU machine does not have
	meson test -C "$BUILD" --print-errorlogs --num-processes "$(( $(nproc) > 16 ? 8 : ($(nproc) + 1) / 2 ))" --no-suite model | tee "$OUT/tests.txt"
	rc=${PIPESTATUS[0]}
	cp "$BUILD/meson-logs/testlog.txt" "$OUT/testlog.txt"
	counts=$(grep -E "^(Ok|Expected Fail|Fail|Unexpected Pass|Skipped|Timeout): " "$OUT/tests.txt" | tr -s ' ' |
		sed 's/ *$//' | paste -sd, - | sed 's/,/, /g')
	skipped=$(awk '$0 ~ / SKIP / { for (i = 1; i <= NF; i++) if ($i ~ /:/) { sub(/.*:/, "", $i); print $i } }' \
		"$OUT/tests.txt" | paste -sd' ' -)
	rm -f "$OUT/tests.txt"
	# On a machine with a GPU a gpu test that skips lacks something the
	# check needs (the models in $INFS_CACHE, say): the phase fails.
	[[ " $skipped" == *" gpu-"* ]] && rc=77
	[ "$rc" = 0 ] || fail=1
	phase tests "$([ "$rc" = 0 ] && echo passed || echo FAILED)" "$counts${skipped:+ (skipped: $skipped)}"
fi

# Runs tool $1 over gpu test $2 (its command line from meson's
# introspection in $4, so that it gets its arguments and environment) and
# writes its log to $3; the last line of the log is its outcome.
sanitize() {
	local tool=$1 t=$2 log=$3 tests=$4 start=$SECONDS exitcode=
	# racecheck reports hazards in cuBLAS's Hopper GEMMs (nvjet_*), which
	# order shared memory through mbarriers and the async proxy that it
	# does not follow; excluding them by name makes the sanitizer itself
	# fault. So racecheck runs on everything and fails on a hazard in any
	# other kernel (ours).
	[ "$tool" = memcheck ] && exitcode="--error-exitcode 99"
	(
		CMD=()
		eval "$(python3 - "$BUILD" "$t" "$tests" <<'PY'
import json, shlex, sys
tests = json.load(open(sys.argv[3]))
t = next(t for t in tests if t["name"] == sys.argv[2].split(":")[-1])
print(f"cd {shlex.quote(t['workdir'] or sys.argv[1])}")
for k, v in (t.get("env") or {}).items():
    print(f"export {k}={shlex.quote(v)}")
print("CMD=(" + " ".join(shlex.quote(c) for c in t["cmd"]) + ")")
PY
)"
		[ ${#CMD[@]} -gt 0 ] || { echo "no command line for $t in meson's introspection"; exit 1; }
		# The real models only where a test needs them (gpu-engine): the
		# others then run their tiny and random models through the same
		# kernels, which the tests phase has run on SmolLM2 and MiniLM.
		# Under racecheck, SmolLM2's runs take some 20 minutes and end
		# killed (status 9) with hazards reported in cuBLAS's kernels only.
		[[ $t == *gpu-engine* ]] || export INFS_CACHE="$BUILD/gpu-check-no-models"
		INFS_TEST_SMALL=1 timeout "${GPU_CHECK_SANITIZE_TIMEOUT:-1800}" compute-sanitizer --tool "$tool" $exitcode \
			"${CMD[@]}"
	) >"$log" 2>&1
	local rc=$?
	local ours theirs
	ours=$(grep -E "access at " "$log" | grep -vc "access at nvjet_")
	theirs=$(grep -E "access at nvjet_" "$log" | wc -l)
	if [ $rc = 0 ] && [ "$ours" = 0 ]; then
		echo "-- $tool $t: clean$([ "$theirs" != 0 ] && echo " (hazard reports in cuBLAS's nvjet kernels only: $theirs lines)"), $((SECONDS - start)) s" >>"$log"
	else
		echo "-- $tool $t: FAILED (exit $rc, $ours hazard lines in our kernels), $((SECONDS - start)) s" >>"$log"
	fi
}

# The sanitizer's runs, "tool test" a line: memcheck and racecheck over
# the gpu suite.
sanitizer_runs() {
	local t tool
	# the longest first: gpu-engine runs SmolLM2 under memcheck
	for t in $(meson test -C "$BUILD" --list --suite gpu 2>/dev/null | sed 's/.* \([^ ]*\)$/\1/' |
		awk '/gpu-engine/ { print; next } { rest = rest $0 "\n" } END { printf "%s", rest }'); do
		# racecheck looks at shared memory; the store, retrieve and tiers
		# tests run the kernels that gpu-fused, gpu-topk and gpu-inject
		# racecheck (and cuBLAS) and take many minutes under it.
		tools="memcheck racecheck"
		[[ $t == *store* || $t == *retrieve* || $t == *tiers* ]] && tools=memcheck
		# gpu-engine runs the model, injection and sampling kernels that
		# gpu-model, gpu-graph, gpu-inject, gpu-sample and gpu-ask racecheck; under
		# racecheck its process ends with status 9 after some 80 s, having
		# printed nothing, with hazards reported in cuBLAS's nvjet kernels
		# only (2026-12-03), so it runs under memcheck alone.
		[[ $t == *gpu-engine* ]] && tools=memcheck
		for tool in $tools; do echo "$tool $t"; done
	done
}

if [[ $skip != *sanitizer* ]]; then
	echo "== compute-sanitizer ($jobs at once)"
	: >"$OUT/sanitizer.log"
	runs=$(mktemp -d)
	meson introspect --tests "$BUILD" >"$runs/tests.json"
	n=0 pids=""
	while read -r tool t; do
		if [ -n "${GPU_CHECK_SANITIZE:-}" ]; then
			want=0
			for w in $GPU_CHECK_SANITIZE; do [[ $t == *"$w"* ]] && want=1; done
			[ $want = 1 ] || continue
		fi
		while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
		n=$((n + 1))
		sanitize "$tool" "$t" "$runs/$(printf %03d $n) $tool $t.log" "$runs/tests.json" </dev/null &
		pids="$pids $!"
	done < <(sanitizer_runs)
	wait $pids
	for log in "$runs"/*.log; do
		[ -f "$log" ] || continue
		cat "$log" >>"$OUT/sanitizer.log"
		last=$(tail -1 "$log")
		echo "$last"
		set -- $(basename "$log" .log)
		if [[ $last == *": clean"* ]]; then
			phase "sanitize:$2:$3" passed "${last#*: }"
		else
			phase "sanitize:$2:$3" FAILED "${last#*: FAILED }"
			fail=1
		fi
	done
	rm -rf "$runs"
fi

if [[ $skip != *demo* ]]; then
	dfail=0
	echo "== demo on the GPU (SmolLM2, the example memory)"
	demo=$(mktemp -d)
	if "$BUILD/tools/inferscale" encode --device 0 --store "$demo/maya.infs" examples/memory/facts.jsonl --quiet &&
		"$BUILD/tools/inferscale" ask --device 0 --store "$demo/maya.infs" --questions examples/memory/questions.jsonl \
			--compare -k 10 --max-tokens 32 2>&1 | tee "$OUT/demo.log"; then
		:
	else
		echo "FAILED: the demo on the GPU"
		dfail=1
	fi
	rm -rf "$demo"
	echo "== eval --reference-device-weights on the GPU (tests/fixtures/locomo/tiny.json)"
	# bf16 against bf16: the same computation, the same answers; fp8 against
	# bf16: other weights, a first-token KL above 0 on every question.
	ev=$(mktemp -d)
	for w in bf16 fp8; do
		"$BUILD/tools/inferscale" eval tests/fixtures/locomo/tiny.json --device 0 --k 50 --quiet \
			--reference-device-weights $w --json "$ev/$w.json" 2>&1 | tee -a "$OUT/demo.log" || dfail=1
	done
	python3 - "$ev" <<'PY' || { echo "FAILED: eval --reference-device-weights"; dfail=1; }
import json, sys
b, f = (json.load(open(f"{sys.argv[1]}/{w}.json")) for w in ("bf16", "fp8"))
for r, w in ((b, "bf16"), (f, "fp8")):
    assert (r["device_weights"], r["reference_device_weights"]) == ("bf16", w), r
    assert len(r["questions"]) == r["n_questions"] == 3, r
    print(w, {k: r[k] for k in r if k.endswith("reference_weights") or k.endswith("reference_weights_mean")})
assert b["first_token_agreement_full_vs_reference_weights"] == 1, b
assert b["answer_agreement_full_vs_reference_weights"] == 1, b
assert b["kl_first_token_full_vs_reference_weights_mean"] < 1e-6, b
assert all(q["kl_first_token_full_vs_reference_weights"] > 0 for q in f["questions"]), f
PY
	rm -rf "$ev"
	[ $dfail = 0 ] || fail=1
	phase demo "$([ $dfail = 0 ] && echo passed || echo FAILED)" \
		"$(grep -c . "$OUT/demo.log") lines of answers and eval (demo.log)"
fi

if [[ $skip != *bench* ]]; then
	bfail=0
	echo "== benchmarks"
	"$BUILD/benchmarks/bench_inject" "$OUT/inject.json" || bfail=1
	"$BUILD/benchmarks/bench_retrieve" "$OUT/retrieve.json" || bfail=1
	"$BUILD/benchmarks/bench_serving" "$OUT/serving-api.json" || bfail=1
	"$BUILD/benchmarks/bench_tiers" "$OUT/tiers.json" || bfail=1
	PYTHONUNBUFFERED=1 python3 benchmarks/torch_compare.py "$OUT/inject.json" "$OUT/retrieve.json" \
		"$OUT/benchmarks.json" "$OUT/benchmarks.md" || bfail=1
	# the model runtime at 8B geometry beside the torch engine and transformers
	OUT=$OUT BUILD=$BUILD scripts/gpu-bench-model.sh || bfail=1
	# the engine end to end at 8B geometry, beside the same peers
	OUT=$OUT BUILD=$BUILD scripts/gpu-bench-engine.sh || bfail=1
	# the tiers' rows with TTFT from the pinned tier vs full recompute
	python3 - "$OUT/tiers.json" "$OUT/engine_gpu.json" "$OUT/tiers-h200.json" <<'PY' || bfail=1
import json, sys
tiers = json.load(open(sys.argv[1]))
try:
    tiers["ttft"] = json.load(open(sys.argv[2]))["host_tier"]
except (OSError, KeyError, ValueError) as e:
    tiers["ttft"] = None
    print(f"no pinned-tier TTFT from the engine benchmark: {e}")
json.dump(tiers, open(sys.argv[3], "w"), indent=1)
PY
	[ $bfail = 0 ] || fail=1
	head=$(python3 - "$OUT/gpu-engine-h200.json" <<'PY' 2>/dev/null
import json, sys
d = json.load(open(sys.argv[1]))
rows = {r["k"]: r for r in d["rows"]}
r = rows[50]
print(f"TTFT at k = 50 {r['ttft_inject_ms']:.2f} ms by injection, {r['ttft_full_ms']:.2f} ms by full recompute")
PY
)
	phase bench "$([ $bfail = 0 ] && echo passed || echo FAILED)" "${head:-no engine numbers}"
fi

# The summary: every phase of this commit, this call's and earlier ones'.
summary() {
	echo "== gpu-check summary"
	echo "date: $(date -u +%F) ($(date -u +%T) UTC)"
	echo "commit: $commit"
	echo "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $(nvcc --version | tail -1)"
	local ledger="$BUILD/gpu-check.phases" end_to_end=1 p line tool t total=0 clean=0 failed=""
	for p in build tests demo bench; do
		line=$(grep "^$commit $p " "$ledger" 2>/dev/null | tail -1)
		if [ -n "$line" ]; then
			set -- $line
			echo "$p: $3 ($4): ${line#* * * * }"
			[ "$3" = passed ] || end_to_end=0
		else
			echo "$p: not run"
			end_to_end=0
		fi
	done
	while read -r tool t; do
		total=$((total + 1))
		line=$(grep "^$commit sanitize:$tool:$t " "$ledger" 2>/dev/null | tail -1)
		set -- $line
		if [ "${3:-}" = passed ]; then clean=$((clean + 1)); else failed="$failed $tool:$t${3:+ (FAILED)}"; fi
	done < <(sanitizer_runs)
	echo "sanitizer: $clean of $total runs clean (memcheck and racecheck over the gpu suite)${failed:+; not clean or not run:$failed}"
	[ "$clean" = "$total" ] || end_to_end=0
	echo "== gpu-check: $([ $fail = 0 ] && echo passed || echo FAILED) this call; $([ $end_to_end = 1 ] &&
		echo "passed end to end (build, tests, sanitizer, demo, bench)" || echo "not yet passed end to end")"
}
# also in $OUT/gpu-check-summary.txt (benchmarks/results/gpu-check-h200.txt
# is that file from the H200)
summary | tee "$OUT/gpu-check-summary.txt"
exit $fail
