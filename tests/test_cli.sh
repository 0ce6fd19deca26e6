#!/bin/sh
# The inferscale tool end to end on the real models: encode part of the
# example memory (also into an fp8 store), ask with injection and with full
# recompute, bench with JSON output, and errors that are one line and a
# non-zero exit.
# usage: test_cli.sh INFERSCALE REPO-ROOT
set -eu
cli=$1
root=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/infs-cli-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

head -n 11 "$root/examples/memory/facts.jsonl" > "$tmp/facts.jsonl"
# a member the fact cannot keep is warned about, not dropped in silence
sed -n 12p "$root/examples/memory/facts.jsonl" | sed 's/}$/, "meta": {"speaker": "Maya"}}/' >> "$tmp/facts.jsonl"
"$cli" encode --store "$tmp/s.infs" "$tmp/facts.jsonl" > "$tmp/out" 2> "$tmp/err"
grep -q "encoded 12 facts into 1 namespace" "$tmp/out" || fail "encode: $(cat "$tmp/out")"
grep -q 'warning: .*facts.jsonl:12: "meta" is not a string' "$tmp/err" || fail "encode: no warning: $(cat "$tmp/err")"
# not on a terminal: progress as lines, with the rate
grep -q "^encoding: 12/12 facts, .* facts/s" "$tmp/err" || fail "encode: no progress line: $(cat "$tmp/err")"
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
# 8-bit activations in decoding: the same fact found, the answer still names it
"$cli" ask --store "$tmp/s.infs" --namespace maya -k 4 --max-tokens 24 --int8-activations "$q" > "$tmp/inj_i8"
grep -q Biscuit "$tmp/inj_i8" || fail "ask --int8-activations: no Biscuit: $(cat "$tmp/inj_i8")"

# An fp8 store (e4m3 codes and a scale per token and KV head): its KV about
# half the f16 store's, sound, and its facts answer.
"$cli" encode --store "$tmp/s8.infs" --kv-dtype fp8 --quiet "$tmp/facts.jsonl" > "$tmp/out" 2> /dev/null
grep -q "encoded 12 facts into 1 namespace" "$tmp/out" || fail "encode --kv-dtype fp8: $(cat "$tmp/out")"
"$cli" verify "$tmp/s8.infs" | grep -q ": sound: 12 facts" || fail "verify: an fp8 store"
[ $(( $(wc -c < "$tmp/s8.infs") * 10 )) -lt $(( $(wc -c < "$tmp/s.infs") * 7 )) ] ||
	fail "fp8 store $(wc -c < "$tmp/s8.infs") bytes, f16 $(wc -c < "$tmp/s.infs")"
"$cli" ask --store "$tmp/s8.infs" --namespace maya -k 4 --max-tokens 24 "$q" > "$tmp/inj8"
grep -q Biscuit "$tmp/inj8" || fail "ask on an fp8 store: no Biscuit: $(cat "$tmp/inj8")"
[ "$(grep -c '^ *[0-9]*\. [0-9.]*  - ' "$tmp/inj8")" = 4 ] || fail "ask on an fp8 store: not 4 facts listed"

printf '{"namespace": "maya", "question": "%s"}\n{"namespace": "maya", "question": "Where does Maya live?"}\n' "$q" > "$tmp/q.jsonl"
# ask --json: every answer with its facts and timings; "-" keeps stdout to the JSON
"$cli" ask --store "$tmp/s.infs" --questions "$tmp/q.jsonl" -k 3 --max-tokens 8 --compare --json "$tmp/a.json" > /dev/null
"$cli" ask --store "$tmp/s.infs" --namespace maya --k 3 --max-tokens 16 --json - "$q" > "$tmp/a1.json" 2> /dev/null
python3 - "$tmp" <<'PY' || fail "ask --json"
import json, sys
t = sys.argv[1]
a = json.load(open(t + "/a.json"))
assert [x["mode"] for x in a] == ["injection", "full_recompute"] * 2, a
for x in a:
    assert set(x) == {"question", "namespace", "mode", "answer", "n_tokens", "n_prompt", "n_prefilled", "facts",
                      "ttft_ms", "embed_ms", "retrieve_ms", "inject_ms", "prefill_ms", "decode_ms"}, x
    assert x["namespace"] == "maya" and len(x["facts"]) == 3 and 1 <= x["n_tokens"] <= 8, x
    parts = x["embed_ms"] + x["retrieve_ms"] + x["inject_ms"] + x["prefill_ms"]
    assert abs(x["ttft_ms"] - parts) < 0.01, x
assert a[0]["facts"] == a[1]["facts"] and a[0]["n_prompt"] == a[1]["n_prompt"], a[:2]
assert a[1]["n_prefilled"] == a[1]["n_prompt"] and a[0]["n_prefilled"] < a[0]["n_prompt"], a[:2]
one = json.load(open(t + "/a1.json"))
assert len(one) == 1 and "Biscuit" in one[0]["answer"] and len(one[0]["facts"]) == 3, one
PY
"$cli" bench --store "$tmp/s.infs" --questions "$tmp/q.jsonl" --k 2,4 --json "$tmp/b.json" --plot "$tmp/b.png" > "$tmp/bench"
cat "$tmp/bench"
grep -q "^ *4 " "$tmp/bench" || fail "bench: no row for k 4"
grep -q "injection, mean ms" "$tmp/bench" || fail "bench: the table does not say its statistic"
python3 - "$tmp/b.json" "$tmp/bench" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
r = d["results"]
assert len(r) == 4, r
assert {x["k"] for x in r} == {2, 4}
assert all(x["kl"] >= 0 and x["facts"] == x["k"] for x in r)
assert all(x["prefilled_tokens"] < x["prompt_tokens"] for x in r)
assert d["hardware"]["cores"] >= 1
# The summary: one statistic, the mean, for the parts and the totals alike,
# so the parts add up to the TTFT; the text's rows show the same numbers.
assert d["statistic"] == "mean", d.get("statistic")
assert [x["k"] for x in d["summary"]] == [2, 4], d["summary"]
cells = [[c for c in line.split() if c != "|"] for line in open(sys.argv[2])]
text = {int(c[0]): c for c in cells if c and c[0] in ("2", "4")}
for x in d["summary"]:
    rows = [y for y in r if y["k"] == x["k"]]
    for way, parts in (("injection_ms", ("ttft", "embed", "retrieve", "inject", "prefill")),
                       ("full_ms", ("ttft", "read_tokens", "prefill"))):
        for part in parts:
            mean = sum(y[way][part] for y in rows) / len(rows)
            assert abs(x[way][part] - mean) < 0.01, (x, way, part, mean)
    inj, full = x["injection_ms"], x["full_ms"]
    assert abs(inj["ttft"] - inj["embed"] - inj["retrieve"] - inj["inject"] - inj["prefill"]) < 0.01, x
    assert abs(full["ttft"] - inj["embed"] - inj["retrieve"] - full["read_tokens"] - full["prefill"]) < 0.01, x
    assert abs(x["kl"] - sum(y["kl"] for y in rows) / len(rows)) < 1e-4, x
    assert x["top1_agree"] == sum(y["top1_agree"] for y in rows) / len(rows), x
    # k prompt | TTFT embed retr inject prefill | TTFT read prefill | ...
    row = text[x["k"]]
    assert abs(float(row[2]) - inj["ttft"]) < 0.06 and abs(float(row[7]) - full["ttft"]) < 0.06, (row, x)
    assert abs(float(row[6]) - inj["prefill"]) < 0.06 and abs(float(row[9]) - full["prefill"]) < 0.06, (row, x)
PY
# --plot: the bench chart (tests/test_cli_plot.sh), full recompute's bars in it.
python3 "$root/tests/check_png.py" "$tmp/b.png" 1200 1060 c44e52:20000 55a868:2000 || fail "bench --plot"
"$cli" plot "$tmp/b.json" "$tmp/b2.png" | grep -q "bench chart" || fail "plot of bench --json"

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

# Flags out of range or malformed: refused before anything runs.
for bad in "--k ," "--k 1,,2" "--k abc" "--k 2," "--k 0" "--k 99999" "--k 1,5000" "-k 0" "-k 4097" \
	"--temperature -1" "--temperature nan" "--temperature inf" "--top-p 0" "--max-tokens 0" \
	"--max-tokens 9000" "--threads 2000" "--seed -1" "--seed x"; do
	# shellcheck disable=SC2086
	check_err 2 bench --store "$tmp/s.infs" --questions "$tmp/q.jsonl" $bad
	[ ! -s "$tmp/o" ] || fail "bench $bad printed: $(cat "$tmp/o")"
done
check_err 2 bench --store "$tmp/s.infs" --questions "$tmp/q.jsonl" --k ""
check_err 1 bench --store "$tmp/s.infs" --questions "$tmp/q.jsonl" --plot "$tmp/no-such-dir/b.png"
[ ! -s "$tmp/o" ] || fail "bench with an unwritable --plot printed: $(cat "$tmp/o")"

# The reserved namespace: nothing is written, not even the facts before it.
size=$(wc -c < "$tmp/s.infs")
printf '{"text": "Maya likes tea.", "namespace": "maya"}\n{"text": "x", "namespace": "inferscale.segments"}\n' > "$tmp/bad.jsonl"
check_err 1 encode --store "$tmp/s.infs" "$tmp/bad.jsonl"
grep -q 'bad.jsonl:2: namespace "inferscale.segments" is reserved' "$tmp/e" || fail "reserved: $(cat "$tmp/e")"
printf '{"text": "Maya likes tea."}\n' > "$tmp/bad.jsonl"
check_err 1 encode --store "$tmp/s.infs" --namespace inferscale.other "$tmp/bad.jsonl"
grep -q "is reserved" "$tmp/e" || fail "reserved --namespace: $(cat "$tmp/e")"
[ "$(wc -c < "$tmp/s.infs")" = "$size" ] || fail "a refused encode wrote to the store"

# Strings with an embedded NUL are refused, naming the line and the field.
nul_err() { # field file command...
	field=$1
	file=$2
	shift 2
	check_err 1 "$@"
	grep -q "$file:2: \"$field\" holds a NUL character" "$tmp/e" || fail "NUL in $field: $(cat "$tmp/e")"
}
ok='{"text": "Maya likes tea.", "namespace": "maya"}'
printf '%s\n{"text": "Mallory likes chess.", "namespace": "maya\\u0000mallory"}\n' "$ok" > "$tmp/nul.jsonl"
nul_err namespace "$tmp/nul.jsonl" encode --store "$tmp/s.infs" "$tmp/nul.jsonl"
printf '%s\n{"text": "ab\\u0000cd", "namespace": "maya"}\n' "$ok" > "$tmp/nul.jsonl"
nul_err text "$tmp/nul.jsonl" encode --store "$tmp/s.infs" "$tmp/nul.jsonl"
printf '%s\n{"text": "x", "namespace": "maya", "metadata": {"date": "2024\\u0000"}}\n' "$ok" > "$tmp/nul.jsonl"
nul_err metadata.date "$tmp/nul.jsonl" encode --store "$tmp/s.infs" "$tmp/nul.jsonl"
printf '%s\n{"text": "x", "namespace": "maya", "tags": ["a", "b\\u0000"]}\n' "$ok" > "$tmp/nul.jsonl"
nul_err "tags\[1\]" "$tmp/nul.jsonl" encode --store "$tmp/s.infs" "$tmp/nul.jsonl"
printf '%s\n{"text\\u0000x": "y", "namespace": "maya"}\n' "$ok" > "$tmp/nul.jsonl"
check_err 1 encode --store "$tmp/s.infs" "$tmp/nul.jsonl"
grep -q "nul.jsonl:2: .*a key holds a NUL character" "$tmp/e" || fail "NUL in a key: $(cat "$tmp/e")"
[ "$(wc -c < "$tmp/s.infs")" = "$size" ] || fail "a refused encode wrote to the store"
printf '{"namespace": "maya", "question": "Where?"}\n{"namespace": "maya", "question": "Who\\u0000?"}\n' > "$tmp/nulq.jsonl"
nul_err question "$tmp/nulq.jsonl" ask --store "$tmp/s.infs" --questions "$tmp/nulq.jsonl"
nul_err question "$tmp/nulq.jsonl" bench --store "$tmp/s.infs" --questions "$tmp/nulq.jsonl"
# A file whose line 2 the library would refuse (invalid UTF-8 in the text,
# the metadata or the namespace) writes nothing, not even line 1.
for second in '"text": "\377", "namespace": "maya"' '"text": "x", "namespace": "maya", "metadata": {"d": "\300\257"}' \
	'"text": "x", "namespace": "\355\240\200"' '"text": "x", "namespace": "a\\u0007"'; do
	printf "%s\n{$second}\n" "$ok" > "$tmp/bad.jsonl"
	check_err 1 encode --store "$tmp/s.infs" "$tmp/bad.jsonl"
	grep -q "bad.jsonl:2: " "$tmp/e" || fail "line 2 not named: $(cat "$tmp/e")"
done
[ "$(wc -c < "$tmp/s.infs")" = "$size" ] || fail "a refused encode wrote to the store"
# A fact too long for the context, in the second namespace: refused before
# the first namespace is written, naming its line.
python3 -c 'import json; print(json.dumps({"text": "a " * 70000, "namespace": "other"}))' > "$tmp/long.jsonl"
printf '%s\n' "$ok" | cat - "$tmp/long.jsonl" > "$tmp/bad.jsonl"
check_err 1 encode --store "$tmp/s.infs" "$tmp/bad.jsonl"
grep -q "bad.jsonl:2: .*tokens" "$tmp/e" || fail "too long: $(cat "$tmp/e")"
[ "$(wc -c < "$tmp/s.infs")" = "$size" ] || fail "a refused encode wrote to the store"
# What only the library finds once writing began (a file size limit, as a
# full disk would, reached by the second namespace's fact): the facts the
# run stored are taken back, and the message says that nothing stayed.
"$cli" verify "$tmp/s.infs" > "$tmp/v0"
cp "$tmp/s.infs" "$tmp/probe.infs"
printf '%s\n' "$ok" > "$tmp/one.jsonl"
"$cli" encode --quiet --store "$tmp/probe.infs" "$tmp/one.jsonl" > /dev/null
rec=$(( $(wc -c < "$tmp/probe.infs") - size ))
printf '%s\n{"text": "Maya also drinks green tea with honey every morning.", "namespace": "other"}\n' "$ok" > "$tmp/bad.jsonl"
# room for the first fact, the reserve kept for deletes (64 KiB and a delete
# of each record) and 16 KiB: not for the second fact
limit=$(( size + rec + 65536 + 16384 ))
python3 -c 'import os, resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), int(sys.argv[1])))
os.execv(sys.argv[2], sys.argv[2:])' "$limit" "$cli" encode --quiet --store "$tmp/s.infs" "$tmp/bad.jsonl" \
	> "$tmp/o" 2> "$tmp/e" && fail "encode past the file size limit passed"
[ "$(wc -l < "$tmp/e")" = 1 ] || fail "taken back: stderr is not one line: $(cat "$tmp/e")"
grep -q 'encoding namespace "other": .*; nothing of .*bad.jsonl was written' "$tmp/e" || fail "taken back: $(cat "$tmp/e")"
"$cli" verify "$tmp/s.infs" > "$tmp/v1"
[ "$(sed 's/, [0-9]* bytes$//' "$tmp/v0")" = "$(sed 's/, [0-9]* bytes$//' "$tmp/v1")" ] ||
	fail "a failed encode left facts: $(cat "$tmp/v0") / $(cat "$tmp/v1")"

# Damage that the library reports is reported by every command that opens
# the store: ask answers with a warning line; encode into the store warns,
# naming the file the damaged record went to; verify then fails naming it.
cp "$tmp/bad.infs" "$tmp/dmg.infs"
"$cli" ask --store "$tmp/dmg.infs" --namespace maya -k 2 --max-tokens 4 "$q" > /dev/null 2> "$tmp/err" ||
	fail "ask on a damaged store: $(cat "$tmp/err")"
grep -q "^inferscale: warning: .*dmg.infs: 1 acknowledged record lost" "$tmp/err" || fail "ask: no warning: $(cat "$tmp/err")"
printf '%s\n' "$ok" > "$tmp/one.jsonl"
"$cli" encode --store "$tmp/dmg.infs" --quiet "$tmp/one.jsonl" > "$tmp/out" 2> "$tmp/err" || fail "encode: $(cat "$tmp/err")"
grep -q "^inferscale: warning: .*1 acknowledged record lost.*in .*dmg.infs.torn" "$tmp/err" ||
	fail "encode: no warning: $(cat "$tmp/err")"
grep -q "encoded 1 facts" "$tmp/out" || fail "encode into a repaired store: $(cat "$tmp/out")"
if "$cli" verify "$tmp/dmg.infs" > "$tmp/out" 2> "$tmp/err"; then fail "verify: a set-aside record passed"; fi
grep -q "dmg.infs: earlier opens set aside [0-9]* bytes holding 1 whole record in .*dmg.infs.torn" "$tmp/err" ||
	fail "verify: $(cat "$tmp/err")"
[ "$(wc -l < "$tmp/err")" = 1 ] || fail "verify: $(cat "$tmp/err")"
rm "$tmp/dmg.infs.torn"
"$cli" verify "$tmp/dmg.infs" | grep -q ": sound: 12 facts" || fail "verify after the .torn file was removed"
"$cli" --help | grep -q "^usage: inferscale" || fail "--help"
echo "cli: ok"
