#!/bin/sh
# The inferscale tool end to end on the real models: encode part of the
# example memory, ask with injection and with full recompute, bench with
# JSON output, and errors that are one line and a non-zero exit.
# usage: test_cli.sh INFERSCALE REPO-ROOT
set -eu
cli=$1
root=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/infs-cli-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

head -n 12 "$root/examples/memory/facts.jsonl" > "$tmp/facts.jsonl"
"$cli" encode --quiet --store "$tmp/s.infs" "$tmp/facts.jsonl" > "$tmp/out"
grep -q "encoded 12 facts into 1 namespace" "$tmp/out" || fail "encode: $(cat "$tmp/out")"
"$cli" verify "$tmp/s.infs" | grep -q ": sound: 12 facts" || fail "verify: a sound store"
cp "$tmp/s.infs" "$tmp/bad.infs"
printf 'X' | dd of="$tmp/bad.infs" bs=1 seek=$(( $(stat -c %s "$tmp/bad.infs") - 100 )) conv=notrunc 2>/dev/null
if "$cli" verify "$tmp/bad.infs" 2> "$tmp/err"; then fail "verify: a damaged last record passed"; fi
grep -q "1 acknowledged record lost" "$tmp/err" || fail "verify: $(cat "$tmp/err")"

q="What is the name of Maya's cat?"
"$cli" ask --store "$tmp/s.infs" --namespace maya -k 4 --max-tokens 24 "$q" > "$tmp/inj"
cat "$tmp/inj"
grep -q Biscuit "$tmp/inj" || fail "ask: no Biscuit in the answer"
grep -q "^injection: TTFT .* = embed .* + retrieve .* + inject .* + prefill" "$tmp/inj" || fail "ask: no TTFT split"
[ "$(grep -c '^ *[0-9]*\. [0-9.]*  - ' "$tmp/inj")" = 4 ] || fail "ask: not 4 facts listed"
"$cli" ask --store "$tmp/s.infs" --namespace maya -k 4 --max-tokens 24 --full-recompute "$q" > "$tmp/full"
grep -q Biscuit "$tmp/full" || fail "ask --full-recompute: no Biscuit"
grep -q "^full recompute: TTFT" "$tmp/full" || fail "ask --full-recompute: no TTFT"

printf '{"namespace": "maya", "question": "%s"}\n{"namespace": "maya", "question": "Where does Maya live?"}\n' "$q" > "$tmp/q.jsonl"
"$cli" bench --store "$tmp/s.infs" --questions "$tmp/q.jsonl" --k 2,4 --json "$tmp/b.json" > "$tmp/bench"
cat "$tmp/bench"
grep -q "^ *4 " "$tmp/bench" || fail "bench: no row for k 4"
python3 - "$tmp/b.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
r = d["results"]
assert len(r) == 4, r
assert {x["k"] for x in r} == {2, 4}
assert all(x["kl"] >= 0 and x["facts"] == x["k"] for x in r)
assert all(x["prefilled_tokens"] < x["prompt_tokens"] for x in r)
assert d["hardware"]["cores"] >= 1
PY

# Errors: one line on stderr, non-zero exit.
check_err() { # expected-status args...
	want=$1
	shift
	set +e
	"$cli" "$@" > "$tmp/o" 2> "$tmp/e"
	got=$?
	set -e
	[ "$got" = "$want" ] || fail "$*: exit $got, expected $want"
	[ "$(wc -l < "$tmp/e")" = 1 ] || fail "$*: stderr is not one line: $(cat "$tmp/e")"
	grep -q "^inferscale: " "$tmp/e" || fail "$*: $(cat "$tmp/e")"
}
check_err 2 frobnicate
check_err 2 ask --store "$tmp/s.infs" "no namespace"
check_err 2 ask --store "$tmp/s.infs" --namespace maya -k zero "q"
check_err 2 encode --store "$tmp/s.infs"
check_err 1 ask --store "$tmp/missing.infs" --namespace maya "q"
check_err 1 encode --store "$tmp/s.infs" "$tmp/nothing.jsonl"
echo '{"namespace": "maya"}' > "$tmp/bad.jsonl"
check_err 1 encode --store "$tmp/s.infs" "$tmp/bad.jsonl"
echo '{"text": "x", "namespace": ' > "$tmp/bad.jsonl"
check_err 1 encode --store "$tmp/s.infs" "$tmp/bad.jsonl"
check_err 1 ask --store "$tmp/s.infs" --namespace maya --model "$tmp/none.gguf" "q"
"$cli" --help | grep -q "^usage: inferscale" || fail "--help"
echo "cli: ok"
