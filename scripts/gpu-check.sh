#!/usr/bin/env bash
# On a machine with a CUDA GPU: configure with CUDA, build, run the test
# suites (the gpu suite included), compute-sanitizer memcheck and racecheck
# over the gpu suite, and the benchmarks. Logs and JSON go to $OUT (default
# ./gpu-out): gpu-check.log, testlog.txt, sanitizer.log, inject.json,
# retrieve.json, serving-api.json, tiers.json, benchmarks.json, benchmarks.md,
# tiers-h200.json (tiers.json with the engine's pinned-tier TTFT), and those of
# scripts/gpu-bench-model.sh (gpu-runtime-h200.json, ...) and
# scripts/gpu-bench-engine.sh (gpu-engine-h200.json, ...), and demo.log: the
# demo's questions answered on the GPU (SmolLM2 and the embedder from
# $INFS_CACHE), then eval --reference-device-weights bf16 and fp8 on the
# tiny LoCoMo fixture. Exits non-zero when a build, test, sanitizer check or
# the demo fails.
#   GPU_CHECK_SKIP=bench   skips the benchmarks; =sanitizer skips the sanitizer;
#   =tests skips the test suites; =demo the demo (words combine:
#   GPU_CHECK_SKIP=tests,bench)
#   GPU_CHECK_SANITIZE="fused inject"   runs the sanitizer on those tests only
#   (the runs take minutes each; each line of the log says how long)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BUILD=${BUILD:-build-gpu}
skip=${GPU_CHECK_SKIP:-}
exec > >(tee "$OUT/gpu-check.log") 2>&1
fail=0

echo "== device"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem,temperature.gpu --format=csv
nvcc --version | tail -1

echo "== build"
if [ ! -d "$BUILD/meson-private" ]; then
	meson setup "$BUILD" -Dcuda=enabled -Dfaiss=disabled -Dblas=disabled -Dwerror=true >/dev/null || exit 1
fi
ninja -C "$BUILD" -j"$(nproc)" >"$OUT/build.log" 2>&1 || { cat "$OUT/build.log"; exit 1; }
rm -f "$OUT/build.log"

if [[ $skip != *tests* ]]; then
	echo "== tests"
	# every suite but 'model', whose real models (scripts/fetch-models.sh)
	# the GPU machine does not have
	meson test -C "$BUILD" --print-errorlogs --num-processes 4 --no-suite model || fail=1
	cp "$BUILD/meson-logs/testlog.txt" "$OUT/testlog.txt"
fi

if [[ $skip != *sanitizer* ]]; then
	echo "== compute-sanitizer"
	: >"$OUT/sanitizer.log"
	# Through meson's test wrapper, so that each test gets its arguments.
	for t in $(meson test -C "$BUILD" --list --suite gpu 2>/dev/null | sed 's/.* \([^ ]*\)$/\1/'); do
		if [ -n "${GPU_CHECK_SANITIZE:-}" ]; then
			want=0
			for w in $GPU_CHECK_SANITIZE; do [[ $t == *"$w"* ]] && want=1; done
			[ $want = 1 ] || continue
		fi
		# racecheck looks at shared memory, which only the kernels of the
		# inject, top-k, fused and model tests use differently; the store
		# and retrieve tests run the same kernels (and cuBLAS) and take many
		# minutes under it.
		tools="memcheck racecheck"
		[[ $t == *store* || $t == *retrieve* || $t == *tiers* ]] && tools=memcheck
		# gpu-engine runs the model, injection and sampling kernels that
		# gpu-model, gpu-graph, gpu-inject and gpu-sample racecheck; under
		# racecheck its process ends with status 9 after some 80 s, having
		# printed nothing, with hazards reported in cuBLAS's nvjet kernels
		# only (2026-12-03), so it runs under memcheck alone.
		[[ $t == *gpu-engine* ]] && tools=memcheck
		for tool in $tools; do
			echo "-- $tool $t" | tee -a "$OUT/sanitizer.log"
			start=$SECONDS
			# racecheck reports hazards in cuBLAS's Hopper GEMMs (nvjet_*),
			# which order shared memory through mbarriers and the async
			# proxy that it does not follow; excluding them by name makes
			# the sanitizer itself fault. So racecheck runs on everything
			# and fails on a hazard in any other kernel (ours).
			log=$(mktemp)
			exitcode="--error-exitcode 99"
			[ $tool = racecheck ] && exitcode=
			INFS_TEST_SMALL=1 meson test -C "$BUILD" --no-rebuild --print-errorlogs --timeout-multiplier 10 \
				--wrapper "compute-sanitizer --tool $tool $exitcode" "$t" >"$log" 2>&1
			rc=$?
			cat "$log" >>"$OUT/sanitizer.log"
			ours=$(grep -E "access at " "$log" | grep -vc "access at nvjet_")
			theirs=$(grep -E "access at nvjet_" "$log" | wc -l)
			rm -f "$log"
			if [ $rc = 0 ] && [ "$ours" = 0 ]; then
				echo "   clean$([ "$theirs" != 0 ] && echo " (hazard reports in cuBLAS's nvjet kernels only: $theirs lines)")"
			else
				echo "FAILED: $tool $t (exit $rc, $ours hazard lines in our kernels)"
				fail=1
			fi
			echo "   $((SECONDS - start)) s" | tee -a "$OUT/sanitizer.log"
		done
	done
fi

if [[ $skip != *demo* ]]; then
	echo "== demo on the GPU (SmolLM2, the example memory)"
	demo=$(mktemp -d)
	if "$BUILD/tools/inferscale" encode --device 0 --store "$demo/maya.infs" examples/memory/facts.jsonl --quiet &&
		"$BUILD/tools/inferscale" ask --device 0 --store "$demo/maya.infs" --questions examples/memory/questions.jsonl \
			--compare -k 10 --max-tokens 32 2>&1 | tee "$OUT/demo.log"; then
		:
	else
		echo "FAILED: the demo on the GPU"
		fail=1
	fi
	rm -rf "$demo"
	echo "== eval --reference-device-weights on the GPU (tests/fixtures/locomo/tiny.json)"
	# bf16 against bf16: the same computation, the same answers; fp8 against
	# bf16: other weights, a first-token KL above 0 on every question.
	ev=$(mktemp -d)
	for w in bf16 fp8; do
		"$BUILD/tools/inferscale" eval tests/fixtures/locomo/tiny.json --device 0 --k 50 --quiet \
			--reference-device-weights $w --json "$ev/$w.json" 2>&1 | tee -a "$OUT/demo.log" || fail=1
	done
	python3 - "$ev" <<'PY' || { echo "FAILED: eval --reference-device-weights"; fail=1; }
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
fi

if [[ $skip != *bench* ]]; then
	echo "== benchmarks"
	"$BUILD/benchmarks/bench_inject" "$OUT/inject.json" || fail=1
	"$BUILD/benchmarks/bench_retrieve" "$OUT/retrieve.json" || fail=1
	"$BUILD/benchmarks/bench_serving" "$OUT/serving-api.json" || fail=1
	"$BUILD/benchmarks/bench_tiers" "$OUT/tiers.json" || fail=1
	PYTHONUNBUFFERED=1 python3 benchmarks/torch_compare.py "$OUT/inject.json" "$OUT/retrieve.json" \
		"$OUT/benchmarks.json" "$OUT/benchmarks.md" || fail=1
	# the model runtime at 8B geometry beside the torch engine and transformers
	OUT=$OUT BUILD=$BUILD scripts/gpu-bench-model.sh || fail=1
	# the engine end to end at 8B geometry, beside the same peers
	OUT=$OUT BUILD=$BUILD scripts/gpu-bench-engine.sh || fail=1
	# the tiers' rows with TTFT from the pinned tier vs full recompute
	python3 - "$OUT/tiers.json" "$OUT/engine_gpu.json" "$OUT/tiers-h200.json" <<'PY' || fail=1
import json, sys
tiers = json.load(open(sys.argv[1]))
try:
    tiers["ttft"] = json.load(open(sys.argv[2]))["host_tier"]
except (OSError, KeyError, ValueError) as e:
    tiers["ttft"] = None
    print(f"no pinned-tier TTFT from the engine benchmark: {e}")
json.dump(tiers, open(sys.argv[3], "w"), indent=1)
PY
fi

echo "== gpu-check: $([ $fail = 0 ] && echo passed || echo FAILED)"
exit $fail
