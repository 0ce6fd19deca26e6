#!/bin/sh
# The inferscale tool and facts that do not fit its context (8192 tokens),
# on the real models: encode refuses a fact too long for any prompt before
# anything is stored, naming the file's line and the limit; ask leaves out
# the retrieved facts that do not fit next to the question, with a warning;
# asking a namespace without facts warns too. With "quick" (the sanitizer
# build) the 8000 tokens of the left-out case are not encoded: the engine's
# leaving out is tested on a small context by test_engine_fit.c.
# usage: test_cli_facts.sh INFERSCALE [quick]
set -eu
cli=$1
quick=${2:-}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/infs-facts-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# repeat N TEXT: TEXT N times.
repeat() { python3 -c 'import sys; print(sys.argv[2] * int(sys.argv[1]), end="")' "$1" "$2"; }

# About 9600 tokens: more than the context holds.
printf '{"namespace": "maya", "text": "Maya has a cat named Luna."}\n' > "$tmp/long.jsonl"
printf '{"namespace": "maya", "text": "%s"}\n' "$(repeat 2400 "Maya likes tea. ")" >> "$tmp/long.jsonl"
if "$cli" encode --store "$tmp/s.infs" --quiet "$tmp/long.jsonl" > "$tmp/out" 2> "$tmp/err"; then
	fail "encode took a fact longer than the context"
fi
cat "$tmp/err"
[ "$(wc -l < "$tmp/err")" = 1 ] || fail "encode: not one line: $(cat "$tmp/err")"
grep -qE "long.jsonl:2: the fact has [0-9]+ tokens; the engine's context holds 8192 \(n_ctx\) .* split the fact" \
	"$tmp/err" || fail "encode: $(cat "$tmp/err")"
"$cli" verify "$tmp/s.infs" | grep -q ": sound: 0 facts" || fail "encode stored facts of a refused file"

# Two facts of about 4100 tokens fit one by one, not together: the best
# ranked is kept, the other left out, with a warning; the answer comes.
if [ "$quick" = quick ]; then
	printf '{"namespace": "maya", "text": "Maya likes tea."}\n' > "$tmp/two.jsonl"
	"$cli" encode --store "$tmp/two.infs" --quiet "$tmp/two.jsonl" > "$tmp/out" || fail "encode: a fact"
else
	printf '{"namespace": "maya", "text": "%s"}\n' "$(repeat 1020 "Maya likes tea. ")" > "$tmp/two.jsonl"
	printf '{"namespace": "maya", "text": "%s"}\n' "$(repeat 1020 "Maya likes coffee. ")" >> "$tmp/two.jsonl"
	"$cli" encode --store "$tmp/two.infs" --quiet "$tmp/two.jsonl" > "$tmp/out" || fail "encode: two long facts"
	"$cli" ask --store "$tmp/two.infs" --namespace maya -k 2 --max-tokens 4 "Does Maya like tea?" > "$tmp/out" 2> "$tmp/err" ||
		fail "ask: $(cat "$tmp/err")"
	grep -q "warning: 1 of the 2 facts retrieved did not fit the context (8192 tokens) next to the question and was left out" \
		"$tmp/err" || fail "ask: no warning of the fact left out: $(cat "$tmp/err")"
	[ "$(grep -c '^ *[0-9]*\. [0-9.]*  ' "$tmp/out")" = 1 ] || fail "ask: not 1 fact used: $(cat "$tmp/out")"
fi

# A namespace without facts: answered, with a warning.
"$cli" ask --store "$tmp/two.infs" --namespace nobody --max-tokens 4 "Who?" > "$tmp/out" 2> "$tmp/err" ||
	fail "ask nobody: $(cat "$tmp/err")"
grep -q 'warning: namespace "nobody" has no facts' "$tmp/err" || fail "ask nobody: no warning: $(cat "$tmp/err")"
if grep -q 'warning: namespace "maya"' "$tmp/err"; then fail "a namespace with facts warned"; fi
echo "cli-facts: ok"
