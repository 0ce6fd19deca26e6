#!/bin/sh
# inferscale plot on a hand-written file of each shape it knows (bench
# --json output, an eval sweep, the GPU engine benchmark): a valid PNG of
# the documented size with its data's colours in it, and errors that are
# one line and a non-zero exit. No model needed.
# usage: test_cli_plot.sh INFERSCALE REPO-ROOT
set -eu
cli=$1
root=$2
fx=$root/tests/fixtures/plot
png() { python3 "$root/tests/check_png.py" "$@"; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/infs-plot-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# Colours (tools/charts.c): the parts embed 4c72b0, retrieve 8172b3, inject
# dd8452, prefill 55a868; full recompute c44e52; the GPU peers 937860,
# da8bc3, 404040; the sweep's group markers 707070. A bar's legend swatch
# is 324 pixels, a line's under 150: the counts below need the data drawn.
"$cli" plot "$fx/bench.json" "$tmp/bench.png" > "$tmp/out"
grep -qx "$tmp/bench.png: bench chart of $fx/bench.json" "$tmp/out" || fail "bench: $(cat "$tmp/out")"
png "$tmp/bench.png" 1200 1060 c44e52:50000 55a868:10000 4c72b0:2000 dd8452:1000 8172b3:400

"$cli" plot "$fx/sweep.json" "$tmp/sweep.png" | grep -q "eval sweep chart" || fail "sweep"
png "$tmp/sweep.png" 1200 1060 4c72b0:1500 c44e52:1500 dd8452:600 707070:300
# The same runs under "runs" of an object, as benchmarks/results keeps them.
{ printf '{"runs": '; cat "$fx/sweep.json"; printf '}\n'; } > "$tmp/runs.json"
"$cli" plot "$tmp/runs.json" "$tmp/runs.png" | grep -q "eval sweep chart" || fail "sweep under runs"
cmp -s "$tmp/sweep.png" "$tmp/runs.png" || fail "sweep: the same runs drew another chart"

"$cli" plot "$fx/gpu-engine.json" "$tmp/gpu.png" | grep -q "GPU engine benchmark chart" || fail "gpu"
png "$tmp/gpu.png" 1200 700 c44e52:50000 937860:600 da8bc3:1000 404040:150 8172b3:400

# Errors: one line on stderr, non-zero exit, nothing written.
check_err() { # expected-status args...
	want=$1
	shift
	rm -f "$tmp/x.png"
	set +e
	"$cli" "$@" > "$tmp/o" 2> "$tmp/e"
	got=$?
	set -e
	[ "$got" = "$want" ] || fail "$*: exit $got, expected $want"
	[ "$(wc -l < "$tmp/e")" = 1 ] || fail "$*: stderr is not one line: $(cat "$tmp/e")"
	grep -q "^inferscale: " "$tmp/e" || fail "$*: $(cat "$tmp/e")"
	[ ! -e "$tmp/x.png" ] || fail "$*: wrote a chart"
}
check_err 2 plot
check_err 2 plot "$fx/bench.json"
check_err 2 plot "$fx/bench.json" "$tmp/x.png" extra
check_err 1 plot "$tmp/missing.json" "$tmp/x.png"
grep -q "missing.json: No such file" "$tmp/e" || fail "missing: $(cat "$tmp/e")"
printf '{"results": [\n  {"k": 2,}\n]}\n' > "$tmp/bad.json"
check_err 1 plot "$tmp/bad.json" "$tmp/x.png"
grep -q "bad.json:2:11: " "$tmp/e" || fail "malformed: $(cat "$tmp/e")"
for doc in '{"a": 1}' '[]' '[1, 2]' '{"results": []}' '{"rows": [{"x": 1}]}' '"text"'; do
	echo "$doc" > "$tmp/other.json"
	check_err 1 plot "$tmp/other.json" "$tmp/x.png"
	grep -q "not a result inferscale plot knows" "$tmp/e" || fail "$doc: $(cat "$tmp/e")"
done
sed 's/"prefill": 34.0/"prefill": "34"/' "$fx/bench.json" > "$tmp/b.json"
check_err 1 plot "$tmp/b.json" "$tmp/x.png"
grep -q 'b.json: results\[3\]: "injection_ms.prefill" is not a number' "$tmp/e" || fail "bench: $(cat "$tmp/e")"
sed '0,/"answer_agree": false/s//"answer_agree": 0/' "$fx/bench.json" > "$tmp/b.json"
check_err 1 plot "$tmp/b.json" "$tmp/x.png"
grep -q 'results\[0\]: "answer_agree" is not true or false' "$tmp/e" || fail "bench: $(cat "$tmp/e")"
sed 's/"mode": "none"/"mode": 0/' "$fx/sweep.json" > "$tmp/s.json"
check_err 1 plot "$tmp/s.json" "$tmp/x.png"
grep -q 'runs\[0\]: "mode" is not a string' "$tmp/e" || fail "sweep: $(cat "$tmp/e")"
sed 's/"f1_full": 0.13, "evidence_recall": 0.47, "ttft_inject_ms": 1500.0/"evidence_recall": 0.47, "ttft_inject_ms": 1500.0/' \
	"$fx/sweep.json" > "$tmp/s.json"
check_err 1 plot "$tmp/s.json" "$tmp/x.png"
grep -q 'runs\[2\]: "f1_full" is not a number' "$tmp/e" || fail "sweep: $(cat "$tmp/e")"
sed 's/"hf_full_ms": 71.2/"hf_full_ms": "fast"/' "$fx/gpu-engine.json" > "$tmp/g.json"
check_err 1 plot "$tmp/g.json" "$tmp/x.png"
grep -q 'rows\[2\]: "hf_full_ms" is not a number' "$tmp/e" || fail "gpu: $(cat "$tmp/e")"
# Values out of their range are refused, naming the run and the member:
# recompute fractions of 1e308 and -1e308 once hung the axis (2^63 ticks).
refused() { # file expected-message
	rm -f "$tmp/x.png"
	set +e
	timeout 30 "$cli" plot "$1" "$tmp/x.png" > "$tmp/o" 2> "$tmp/e"
	got=$?
	set -e
	[ "$got" = 1 ] || fail "$1: exit $got, expected 1: $(cat "$tmp/e")"
	[ "$(wc -l < "$tmp/e")" = 1 ] || fail "$1: stderr is not one line: $(cat "$tmp/e")"
	grep -qF -- "$2" "$tmp/e" || fail "$1: \"$(cat "$tmp/e")\" does not say \"$2\""
	[ ! -e "$tmp/x.png" ] || fail "$1: wrote a chart"
}
sed 's/"recompute_fraction": 0.0,/"recompute_fraction": 1e308,/; s/"recompute_fraction": 0.3,/"recompute_fraction": -1e308,/' \
	"$fx/sweep.json" > "$tmp/s.json"
refused "$tmp/s.json" 's.json: runs[0]: "recompute_fraction" 1e+308 is out of its range 0..1'
sed 's/"kl_first_token_mean": 0.41/"kl_first_token_mean": -0.41/' "$fx/sweep.json" > "$tmp/s.json"
refused "$tmp/s.json" 'runs[0]: "kl_first_token_mean" -0.41 is out of its range (at least 0)'
sed 's/"check_layer": 2/"check_layer": 2.5/' "$fx/sweep.json" > "$tmp/s.json"
refused "$tmp/s.json" 'runs[1]: "check_layer" 2.5 is not a layer (an integer from 0)'
sed 's/"prefill": 34.0/"prefill": -1e308/' "$fx/bench.json" > "$tmp/b.json"
refused "$tmp/b.json" 'results[3]: "injection_ms.prefill" -1e+308 is out of its range (at least 0)'
sed 's/"hf_full_ms": 71.2/"hf_full_ms": -71.2/' "$fx/gpu-engine.json" > "$tmp/g.json"
refused "$tmp/g.json" 'rows[2]: "hf_full_ms" -71.2 is out of its range (at least 0)'
sed 's/"max_tokens": [0-9]*/"max_tokens": 2.5/' "$fx/bench.json" > "$tmp/b.json"
grep -q '"max_tokens": 2.5' "$tmp/b.json" || fail "bench.json has no max_tokens"
refused "$tmp/b.json" 'b.json: "max_tokens" is not a count of tokens (1..8192)'
# Huge values in range still draw, in bounded time.
sed 's/"ttft_full_ms": 5300.0/"ttft_full_ms": 1e308/g' "$fx/sweep.json" > "$tmp/s.json"
timeout 30 "$cli" plot "$tmp/s.json" "$tmp/big.png" > /dev/null || fail "a sweep with 1e308 ms"
check_err 1 plot "$fx/bench.json" "$tmp/no-such-dir/x.png"
grep -q "x.png: No such file" "$tmp/e" || fail "unwritable: $(cat "$tmp/e")"
check_err 2 ask --store "$tmp/s.infs" --namespace maya --plot "$tmp/x.png" "q"
grep -q -- "ask: --plot does not apply" "$tmp/e" || fail "--plot with ask: $(cat "$tmp/e")"
echo "cli-plot: ok"
