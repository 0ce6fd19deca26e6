#!/bin/sh
# inferscale eval on a hand-written LoCoMo-format conversation
# (tests/fixtures/locomo/tiny.json: 6 facts, 4 questions of which one is of
# category 5): the metrics' JSON, the seeded sample, the temporary store
# removed, and the refusals. Skips (77) without the real models.
# usage: test_cli_eval.sh INFERSCALE REPO-ROOT
set -eu
cli=$1
root=$2
tiny=$root/tests/fixtures/locomo/tiny.json
tmp=$(mktemp -d "${TMPDIR:-/tmp}/infs-eval-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# The temporary stores go here, to see that they are removed.
mkdir "$tmp/t"
export TMPDIR="$tmp/t"

# Refusals: one line on stderr naming what is wrong, before any model loads.
check_err() { # expected-status expected-message args...
	want=$1
	msg=$2
	shift 2
	set +e
	"$cli" "$@" > "$tmp/o" 2> "$tmp/e"
	got=$?
	set -e
	[ "$got" = "$want" ] || fail "$*: exit $got, expected $want: $(cat "$tmp/e")"
	[ "$(wc -l < "$tmp/e")" = 1 ] || fail "$*: stderr is not one line: $(cat "$tmp/e")"
	grep -qF "inferscale: $msg" "$tmp/e" || fail "$*: $(cat "$tmp/e"), expected \"$msg\""
	[ ! -s "$tmp/o" ] || fail "$* printed: $(cat "$tmp/o")"
}
check_err 1 "$tmp/none.json: No such file" eval "$tmp/none.json"
echo 'not json' > "$tmp/bad.json"
check_err 1 "$tmp/bad.json: JSON line 1 column 1" eval "$tmp/bad.json"
echo '[1, 2]' > "$tmp/bad.json"
check_err 1 "$tmp/bad.json: not a JSON object" eval "$tmp/bad.json"
python3 - "$tiny" "$tmp" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
def write(name, x):
    json.dump(x, open("%s/%s.json" % (sys.argv[2], name), "w"))
write("noqa", {k: v for k, v in d.items() if k != "qa"})
write("nofacts", {k: v for k, v in d.items() if not k.endswith("_observation")})
write("cat5", dict(d, qa=[q for q in d["qa"] if q["category"] == 5]))
bad = json.loads(json.dumps(d))
bad["session_2_observation"]["Ben"][0] = ["Ben ran 30 kilometres last weekend."]
write("badfact", bad)
# A string where a [fact, evidence] pair belongs, as the document's last value.
write("lastfact", {"qa": d["qa"], "session_1_observation": {"Ana": ["ab"]}})
bad = json.loads(json.dumps(d))
del bad["qa"][3]["answer"]
write("noanswer", bad)
# --context-turns: malformed turns, no turns; two facts whose evidence names
# no turn, the sessions under "conversation" as in LoCoMo's release.
write("badturns", dict(d, session_1="hello"))
bad = json.loads(json.dumps(d))
bad["session_2"][1] = {"speaker": "Ana", "dia_id": "D2:2"}
write("badturn", bad)
write("noturns", {k: v for k, v in d.items() if k not in ("session_1", "session_2")})
unk = json.loads(json.dumps(d))
unk["conversation"] = {k: unk.pop(k) for k in ("session_1", "session_2")}
unk["session_1_observation"]["Ben"][1][1] = "D9:9"
unk["session_2_observation"]["Ben"][0][1] = []
write("unknown", unk)
PY
check_err 1 "$tmp/noqa.json: no \"qa\" list of questions" eval "$tmp/noqa.json"
check_err 1 "$tmp/nofacts.json: no facts" eval "$tmp/nofacts.json"
check_err 1 "$tmp/cat5.json: no questions of categories 1-4" eval "$tmp/cat5.json"
check_err 1 "$tmp/badfact.json: \"session_2_observation\".\"Ben\"[0] is not [fact text" eval "$tmp/badfact.json"
check_err 1 "$tmp/lastfact.json: \"session_1_observation\".\"Ana\"[0] is not [fact text" eval "$tmp/lastfact.json"
check_err 1 "$tmp/noanswer.json: qa[3] has no \"answer\"" eval "$tmp/noanswer.json"
# Session numbers that crashed the reader: a leading zero, one past 2^32.
echo '{"session_01_observation": {"A": [["x","D1:1"]]}, "qa": []}' > "$tmp/s01.json"
check_err 1 "$tmp/s01.json: \"session_01_observation\": a session's number is written without leading zeros" \
	eval "$tmp/s01.json"
echo '{"session_4294967297_observation": {"A": [["x","D1:1"]]}, "qa": []}' > "$tmp/s2e32.json"
check_err 1 "$tmp/s2e32.json: no questions of categories 1-4" eval "$tmp/s2e32.json"
check_err 2 "--k: 0 is not in 1..4096" eval "$tiny" --k 0
check_err 2 "--k: \"1,2\" is not a count" eval "$tiny" --k 1,2
check_err 2 "--recovery: \"blend\" is not a recovery mode" eval "$tiny" --recovery blend
check_err 2 "--limit: 0 is not in" eval "$tiny" --limit 0
check_err 2 "eval needs a LoCoMo-format conversation FILE.json" eval
check_err 2 "eval: --store does not apply" eval "$tiny" --store "$tmp/s.infs"
check_err 2 "eval: --max-tokens does not apply" eval "$tiny" --max-tokens 4
check_err 2 "bench: --limit does not apply" bench --store "$tmp/s.infs" --limit 2 "q"
check_err 2 "--recompute needs --recovery deviation" eval "$tiny" --recompute 0.2
check_err 2 "--check-layer needs --recovery deviation" eval "$tiny" --recovery none --check-layer 1
check_err 2 "--calibration: \"0:1\" is not T:S" eval "$tiny" --calibration 0:1
check_err 2 "--calibration: \"1:x\" is not T:S" eval "$tiny" --calibration off,1:x
check_err 2 "--calibration: \"1:1,1:auto\" is more than one T:S pair" ask --store s --namespace n q --calibration 1:1,1:auto
check_err 2 "--recompute: \"1.5\" is not a share in 0..1" eval "$tiny" --recovery deviation --recompute 1.5
check_err 2 "encode: --recovery does not apply" encode --store "$tmp/s.infs" --recovery none x.jsonl
check_err 2 "--recovery: \"deviation+query\" is not a recovery mode" eval "$tiny" --recovery deviation+query
check_err 2 "--recovery: \"prefix+\" is not a recovery mode" eval "$tiny" --recovery prefix+
check_err 2 "--recovery: \"prefix+prefix\" is not a recovery mode" eval "$tiny" --recovery prefix+prefix
check_err 2 "--recompute needs --recovery deviation or query" eval "$tiny" --recovery prefix --recompute 0.2
check_err 2 "--prefix needs --recovery prefix" eval "$tiny" --recovery deviation --prefix 2
check_err 2 "--prefix: \"-1\" is not a count" eval "$tiny" --recovery prefix --prefix -1
check_err 2 "--query-weight needs --recovery query" eval "$tiny" --recovery prefix+deviation --query-weight 0.5
check_err 2 "--query-weight: \"1.5\" is not a weight in 0..1" eval "$tiny" --recovery query --query-weight 1.5
check_err 2 "bench: --sweep does not apply" bench --store "$tmp/s.infs" --sweep "q"
check_err 2 "--sweep sets --recompute itself" eval "$tiny" --sweep --recovery deviation --recompute 0.2
check_err 2 "--sweep varies --recompute: --recovery prefix has none" eval "$tiny" --sweep --recovery prefix
check_err 2 "eval: --plot draws a sweep: give --sweep" eval "$tiny" --plot "$tmp/x.png"
check_err 2 "--reference-kv-dtype: \"fp4\" is not f16, bf16, f32 or fp8" eval "$tiny" --reference-kv-dtype fp4
check_err 2 "--reference-kv-dtype compares one run: not with --sweep" eval "$tiny" --sweep --reference-kv-dtype bf16
check_err 2 "ask: --reference-kv-dtype does not apply" ask --store "$tmp/s.infs" --namespace n --reference-kv-dtype bf16 q
# The reference weights: the device copy's dtype, so only with --device.
check_err 2 "--reference-device-weights: \"f16\" is not bf16 or fp8" eval "$tiny" --reference-device-weights f16
check_err 2 "--reference-device-weights compares the model's copies on a device: give --device N" \
	eval "$tiny" --reference-device-weights bf16
check_err 2 "--reference-device-weights compares one run: not with --sweep" \
	eval "$tiny" --device 0 --sweep --reference-device-weights fp8
check_err 2 "--device-weights fp8 needs --device N" eval "$tiny" --device-weights fp8 --reference-device-weights bf16
check_err 2 "bench: --reference-device-weights does not apply" bench --store "$tmp/s.infs" \
	--reference-device-weights fp8 q
check_err 1 "$tmp/no/x.png" eval "$tiny" --sweep --plot "$tmp/no/x.png"
check_err 2 "--context-turns: 65 is not in 0..64" eval "$tiny" --context-turns 65
check_err 2 "--context-turns: \"-1\" is not a count" eval "$tiny" --context-turns -1
check_err 2 "bench: --context-turns does not apply" bench --store "$tmp/s.infs" --context-turns 2 "q"
check_err 1 "$tmp/badturns.json: --context-turns: \"session_1\" is not a list of turns" \
	eval "$tmp/badturns.json" --context-turns 2
check_err 1 "$tmp/badturn.json: --context-turns: \"session_2\"[1] is not a turn {speaker, dia_id, text}" \
	eval "$tmp/badturn.json" --context-turns 1
check_err 1 "$tmp/noturns.json: --context-turns: no conversation turns" eval "$tmp/noturns.json" --context-turns 2
[ -z "$(ls "$tmp/t")" ] || fail "a refusal left $(ls "$tmp/t")"

cache=${INFS_CACHE:-$HOME/.cache/inferscale}
if [ ! -f "$cache/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" ] || [ ! -d "$cache/minilm" ]; then
	echo "SKIP: no SmolLM2 or MiniLM in $cache (scripts/fetch-models.sh)"
	exit 77
fi
# A model that fails to load: the temporary store, already made, goes too.
check_err 1 "$tmp/none.gguf" eval "$tiny" --model "$tmp/none.gguf"
[ -z "$(ls "$tmp/t")" ] || fail "a failed eval left $(ls "$tmp/t")"

# k 50 takes all 6 facts: every evidence turn is retrieved.
"$cli" eval "$tiny" --k 50 --quiet --device-weights bf16 --json "$tmp/all.json" 2> "$tmp/summary"
cat "$tmp/summary"
grep -q "3 of 3 questions (categories 1-4), 6 facts, k 50, recovery none" "$tmp/summary" || fail "summary"
"$cli" eval "$tiny" --k 50 --quiet --limit 2 --seed 1 > "$tmp/l1.json" 2> /dev/null
"$cli" eval "$tiny" --k 50 --quiet --limit 2 --seed 1 --recovery none > "$tmp/l2.json" 2> /dev/null
"$cli" eval "$tiny" --k 50 --quiet --limit 5 --seed 1 > "$tmp/l5.json" 2> /dev/null
# A reference store: of the main store's dtype, the same answers; fp8
# against f32, close but not the same.
"$cli" eval "$tiny" --k 50 --quiet --reference-kv-dtype f16 > "$tmp/ref16.json" 2> "$tmp/ref16.txt"
"$cli" eval "$tiny" --k 50 --quiet --kv-dtype fp8 --reference-kv-dtype f32 > "$tmp/ref8.json" 2> "$tmp/ref8.txt"
cat "$tmp/ref8.txt"
grep -q "^  f16 KV against f16: first token 100.0%, answer 100.0%; first-token KL 0 nats" "$tmp/ref16.txt" ||
	fail "reference summary: $(cat "$tmp/ref16.txt")"
# Attention calibration: three points, each answered.
"$cli" eval "$tiny" --k 50 --quiet --limit 1 --seed 1 --calibration off,1:auto,2:0.25 > "$tmp/cal.json" 2> /dev/null
# Recovery: everything recomputed is full recompute exactly; half of it,
# half of the fact tokens.
"$cli" eval "$tiny" --k 50 --quiet --recovery deviation --recompute 1 > "$tmp/r1.json" 2> /dev/null
# Context encoding: the same facts and prompts, other stored KV; with a
# recovery mode, and on facts whose evidence names no turn. Malformed turns
# are no error without the flag.
"$cli" eval "$tiny" --k 50 --quiet --context-turns 2 > "$tmp/c2.json" 2> "$tmp/c2.txt"
cat "$tmp/c2.txt"
grep -q "^  context: up to 2 turns ending with each fact's evidence turn, .* 0 of 6 facts without" "$tmp/c2.txt" ||
	fail "context summary: $(cat "$tmp/c2.txt")"
"$cli" eval "$tmp/unknown.json" --k 50 --quiet --context-turns 3 --recovery prefix+query > "$tmp/cu.json" 2> /dev/null
"$cli" eval "$tmp/badturns.json" --k 50 --quiet --limit 1 > /dev/null 2>&1 || fail "malformed turns without --context-turns"
"$cli" eval "$tiny" --k 50 --quiet --recovery deviation --recompute 0.5 --check-layer 1 > "$tmp/r5.json" 2> /dev/null
# A sweep of one mode on one question: 8 points; ratio 0 is the prefix's.
"$cli" eval "$tiny" --k 50 --quiet --limit 1 --seed 1 --sweep --recovery query+prefix --prefix 3 --context-turns 2 \
	--plot "$tmp/sw.png" > "$tmp/sw.json" 2> "$tmp/sw.txt"
cat "$tmp/sw.txt"
# its chart: the agreement lines (blue) and the TTFT panel's (red)
python3 "$root/tests/check_png.py" "$tmp/sw.png" 1200 1060 4c72b0:800 c44e52:800 || fail "sweep chart"
[ "$(grep -c "^prefix+query  *r " "$tmp/sw.txt")" = 8 ] || fail "sweep summary"
[ -z "$(ls "$tmp/t")" ] || fail "eval left $(ls "$tmp/t")"
python3 - "$tmp" <<'PY'
import json, sys
t = sys.argv[1]
d = json.load(open(t + "/all.json"))
keys = {"mode", "recompute_ratio", "check_layer", "prefix_tokens", "query_weight", "fact_temperature", "fact_scale",
        "answer_f1_vs_full", "floor_first_token_agreement", "floor_answer_agreement", "floor_kl_first_token_mean",
        "k", "kv_dtype", "device_weights", "context_turns",
        "facts_without_context", "context_tokens_mean", "encode_ms", "n_questions", "recompute_fraction", "first_token_agreement", "answer_agreement",
        "kl_first_token_mean", "f1_inject", "f1_full", "evidence_recall", "ttft_inject_ms", "ttft_full_ms",
        "questions"}
assert set(d) == keys, set(d) ^ keys
assert d["mode"] == "none" and d["k"] == 50 and d["kv_dtype"] == "f16" and d["n_questions"] == 3, d
assert d["device_weights"] == "bf16", d
assert d["recompute_ratio"] == 0 and d["prefix_tokens"] == 0 and d["query_weight"] == 0, d
assert d["recompute_fraction"] == 0 and d["evidence_recall"] == 1.0, d
assert (d["context_turns"], d["facts_without_context"], d["context_tokens_mean"]) == (0, 0, 0), d
assert d["encode_ms"] > 0, d
for k in ("first_token_agreement", "answer_agreement", "f1_inject", "f1_full"):
    assert 0 <= d[k] <= 1, (k, d[k])
assert d["kl_first_token_mean"] >= 0 and d["ttft_inject_ms"] > 0 and d["ttft_full_ms"] > 0, d
# The engine's default calibration (off); the floor: full recompute in two
# steps against one, in f32 on the CPU, the same first tokens.
assert (d["fact_temperature"], d["fact_scale"]) == (1, 1), d
assert d["floor_first_token_agreement"] == 1 and d["floor_kl_first_token_mean"] < 1e-3, d
q = d["questions"]
# The question of category 5 (qa[1]) is skipped; qa[2]'s "D2:1; D2:2" is two turns.
assert [x["qa"] for x in q] == [0, 2, 3], q
assert [(x["evidence_found"], x["evidence_total"]) for x in q] == [(1, 1), (2, 2), (1, 1)], q
assert all(x["facts"] == 6 for x in q), q
# The means are the questions' values averaged.
def mean(f):
    return sum(f(x) for x in q) / len(q)
near = lambda a, b: abs(a - b) < 1e-5
assert near(d["first_token_agreement"], mean(lambda x: x["first_token_agree"])), d
assert near(d["answer_agreement"], mean(lambda x: x["answer_agree"])), d
assert near(d["kl_first_token_mean"], mean(lambda x: x["kl_first_token"])), d
assert near(d["f1_inject"], mean(lambda x: x["f1_inject"])), d
assert near(d["f1_full"], mean(lambda x: x["f1_full"])), d
assert near(d["answer_f1_vs_full"], mean(lambda x: x["answer_f1_vs_full"])), d
assert near(d["floor_kl_first_token_mean"], mean(lambda x: x["floor_kl_first_token"])), d
assert all(x["answer_f1_vs_full"] == 1 for x in q if x["answer_agree"]), q
# Calibration points: one question, each setting, the same facts.
cal = json.load(open(t + "/cal.json"))
assert [(p["fact_temperature"], p["fact_scale"]) for p in cal] == [(1, 1), (1, 0), (2, 0.25)], cal
assert len({p["questions"][0]["qa"] for p in cal}) == 1 and len({p["f1_full"] for p in cal}) == 1, cal
assert len({p["kl_first_token_mean"] for p in cal}) == 3, cal
assert abs(d["ttft_full_ms"] - mean(lambda x: x["ttft_full_ms"])) < 1e-2, d
# Identical answers begin with the same token.
assert all(x["first_token_agree"] for x in q if x["answer_agree"]), q
# The seeded sample: 2 questions, the same 2 every time, among the 3.
l1, l2, l5 = (json.load(open("%s/%s.json" % (t, n))) for n in ("l1", "l2", "l5"))
s1 = [x["qa"] for x in l1["questions"]]
assert l1["n_questions"] == 2 and len(set(s1)) == 2 and set(s1) <= {0, 2, 3}, l1
assert [x["qa"] for x in l2["questions"]] == s1, (l1, l2)
# A limit above the count takes them all.
assert l5["n_questions"] == 3 and [x["qa"] for x in l5["questions"]] == [0, 2, 3], l5
ref_keys = {"reference_kv_dtype", "first_token_agreement_vs_reference", "answer_agreement_vs_reference",
            "kl_first_token_vs_reference_mean"}
q_ref_keys = {"first_token_agree_vs_reference", "answer_agree_vs_reference", "kl_first_token_vs_reference"}
r16, r8 = (json.load(open("%s/%s.json" % (t, n))) for n in ("ref16", "ref8"))
for r, dt, rdt in ((r16, "f16", "f16"), (r8, "fp8", "f32")):
    assert set(r) == keys | ref_keys, set(r) ^ (keys | ref_keys)
    assert (r["kv_dtype"], r["reference_kv_dtype"]) == (dt, rdt), r
    rq = r["questions"]
    assert [x["qa"] for x in rq] == [0, 2, 3] and all(set(x) == set(q[0]) | q_ref_keys for x in rq), rq
    for m, k in (("first_token_agreement_vs_reference", "first_token_agree_vs_reference"),
                 ("answer_agreement_vs_reference", "answer_agree_vs_reference"),
                 ("kl_first_token_vs_reference_mean", "kl_first_token_vs_reference")):
        assert near(r[m], sum(x[k] for x in rq) / len(rq)), (m, r)
# The same dtype: the same KV injected, exactly the same distribution.
assert r16["first_token_agreement_vs_reference"] == 1 and r16["answer_agreement_vs_reference"] == 1, r16
assert r16["kl_first_token_vs_reference_mean"] == 0, r16
assert all(x["kl_first_token_vs_reference"] == 0 for x in r16["questions"]), r16
# The reference leaves the main answers as they are without it.
same_keys = ("first_token_agreement", "answer_agreement", "kl_first_token_mean", "f1_inject", "f1_full")
assert all(r16[k] == d[k] for k in same_keys), (r16, d)
# fp8 against f32: a small KL, not none (the reference is another store),
# far below injection's against full recompute.
kl8 = r8["kl_first_token_vs_reference_mean"]
assert 0 < kl8 < 0.05 and kl8 < r8["kl_first_token_mean"] / 10, r8
assert all(0 < x["kl_first_token_vs_reference"] for x in r8["questions"]), r8
r1, r5 = (json.load(open("%s/%s.json" % (t, n))) for n in ("r1", "r5"))
assert r1["mode"] == "deviation" and r1["first_token_agreement"] == 1 and r1["answer_agreement"] == 1, r1
assert r1["kl_first_token_mean"] == 0 and r1["f1_inject"] == r1["f1_full"] and r1["recompute_fraction"] == 1, r1
assert r1["answer_f1_vs_full"] == 1, r1
assert r5["mode"] == "deviation" and abs(r5["recompute_fraction"] - 0.5) < 0.02, r5
assert r5["f1_full"] == d["f1_full"], (r5, d)
assert (r5["recompute_ratio"], r5["check_layer"], r5["prefix_tokens"]) == (0.5, 1, 0), r5
sw = json.load(open(t + "/sw.json"))
assert isinstance(sw, list) and [p["recompute_ratio"] for p in sw] == [0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 1], sw
assert all(set(p) == keys for p in sw), sw
assert all((p["mode"], p["check_layer"], p["prefix_tokens"], p["query_weight"], p["n_questions"]) ==
           ("prefix+query", 2, 3, 0.5, 1) for p in sw), sw
# The same question and facts at every point; full recompute answered once.
assert len({(p["questions"][0]["qa"], p["f1_full"], p["questions"][0]["ttft_full_ms"]) for p in sw}) == 1, sw
fr = [p["recompute_fraction"] for p in sw]
# Ratio 0: the prefixes alone (3 tokens of 6 facts and the footer); then
# the share asked, never fewer than the prefixes; 1: everything.
assert 0 < fr[0] < 0.5 and fr[1] == fr[0] and fr[-1] == 1, fr
assert all(abs(f - r) < 0.02 for f, r in zip(fr[2:], [0.1, 0.15, 0.2, 0.3, 0.5]) if r > fr[0]), fr
assert sw[-1]["kl_first_token_mean"] == 0 and sw[-1]["answer_agreement"] == 1, sw[-1]
assert sw[-1]["ttft_inject_ms"] == sw[-1]["ttft_full_ms"], sw[-1]
assert all((p["context_turns"], p["facts_without_context"]) == (2, 0) and p["context_tokens_mean"] > 0 for p in sw), sw
# Context encoding: every fact has its turns (about 14 tokens a turn here);
# full recompute, the same prompt of the same facts, answers the same; the
# injected KV differ, so the first-token distributions do.
c2, cu = (json.load(open("%s/%s.json" % (t, n))) for n in ("c2", "cu"))
assert set(c2) == keys and (c2["context_turns"], c2["facts_without_context"], c2["mode"]) == (2, 0, "none"), c2
assert 10 < c2["context_tokens_mean"] < 60 and c2["encode_ms"] > 0, c2
assert [(x["qa"], x["facts"], x["f1_full"], x["evidence_found"]) for x in c2["questions"]] == \
       [(x["qa"], x["facts"], x["f1_full"], x["evidence_found"]) for x in q], (c2, d)
assert any(x["kl_first_token"] != y["kl_first_token"] for x, y in zip(c2["questions"], q)), (c2, d)
# Two facts without: an unknown turn and an empty list; the others, up to
# 3 turns each, more than 2.
assert (cu["context_turns"], cu["facts_without_context"], cu["mode"], cu["prefix_tokens"]) == \
       (3, 2, "prefix+query", 2), cu
assert cu["context_tokens_mean"] > c2["context_tokens_mean"], (cu, c2)
assert cu["f1_full"] == d["f1_full"], (cu, d)
PY
echo "cli-eval: ok"
