#!/bin/sh
# The inferscale tool's command line, no model needed: every command's
# --help lists what applies to it and nothing else, an option of another
# command or an unknown one is refused in one line naming the command,
# -k and --k are the same option (one k, or bench's list), eval --plot needs
# --sweep, --device-weights is bf16 or fp8 and fp8 needs --device.
# usage: test_cli_args.sh INFERSCALE
set -eu
cli=$1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/infs-args-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

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
	grep -qF -- "$msg" "$tmp/e" || fail "$*: \"$(cat "$tmp/e")\" does not say \"$msg\""
}

# Each command's help: its usage line, its options, not the others'.
helps() { # command, options it lists, options it does not
	cmd=$1
	"$cli" "$cmd" --help > "$tmp/h" || fail "$cmd --help: exit $?"
	head -n 1 "$tmp/h" | grep -q "^usage: inferscale $cmd " || fail "$cmd --help: $(head -n 1 "$tmp/h")"
	for o in $2; do grep -q -- "^  $o" "$tmp/h" || fail "$cmd --help does not list $o"; done
	for o in $3; do if grep -q -- "^  $o " "$tmp/h"; then fail "$cmd --help lists $o"; fi; done
}
helps encode "--store --namespace --kv-dtype --device --device-weights --quiet" "--sweep --compare --limit -k --reference-device-weights"
helps ask "--store --namespace -k --k --compare --json --recovery --device --device-weights" "--sweep --limit --plot --kv-dtype --reference-kv-dtype --reference-device-weights --context-turns"
helps bench "--store -k --json --plot --recovery --device-weights" "--compare --sweep --limit --context-turns --reference-device-weights"
helps eval "--limit --sweep --plot --json --recovery -k --kv-dtype --reference-kv-dtype --device-weights --reference-device-weights --context-turns" "--store --namespace --compare --max-tokens --temperature"
"$cli" ask -h | grep -q "^usage: inferscale ask" || fail "ask -h"
"$cli" --help | grep -q "inferscale COMMAND --help" || fail "--help names the commands' help"

# Options of another command, and unknown ones.
check_err 2 "encode: --sweep does not apply (inferscale encode --help" encode --store "$tmp/s.infs" --sweep f.jsonl
check_err 2 "ask: --limit does not apply" ask --store "$tmp/s.infs" --namespace n --limit 3 "q"
check_err 2 "bench: --compare does not apply" bench --store "$tmp/s.infs" --namespace n --compare "q"
check_err 2 "eval: --store does not apply" eval f.json --store "$tmp/s.infs"
check_err 2 "unknown option --frobnicate (inferscale ask --help" ask --frobnicate
check_err 2 "eval: --plot draws a sweep: give --sweep" eval f.json --plot "$tmp/x.png"

# --device-weights: bf16 or fp8, fp8 only with a device (the host runs its
# own weights); refused before any store or model is looked at.
check_err 2 "--device-weights: \"f16\" is not bf16 or fp8" ask --store "$tmp/s.infs" --namespace n --device-weights f16 "q"
check_err 2 "--device-weights: \"FP8\" is not bf16 or fp8" encode --store "$tmp/s.infs" --device 0 --device-weights FP8 f.jsonl
check_err 2 "--device-weights fp8 needs --device N" encode --store "$tmp/s.infs" --device-weights fp8 f.jsonl
check_err 2 "--device-weights fp8 needs --device N" bench --store "$tmp/missing.infs" --namespace n --device-weights fp8 "q"
check_err 2 "--device-weights needs a value" ask --store "$tmp/s.infs" --namespace n "q" --device-weights
check_err 2 "ask: --reference-device-weights does not apply" ask --store "$tmp/s.infs" --namespace n \
	--reference-device-weights fp8 "q"
# bf16 is the host's default: the command goes on to the store
check_err 1 "no such store" ask --store "$tmp/missing.infs" --namespace n --device-weights bf16 "q"

# -k and --k: one value for ask and eval, a list for bench; both checked.
check_err 2 "--k: 5000 is not in 1..4096" ask --store "$tmp/s.infs" --namespace n --k 5000 "q"
check_err 2 "-k: 0 is not in 1..4096" ask --store "$tmp/s.infs" --namespace n -k 0 "q"
check_err 2 "-k: \"10,20\" is not a count" ask --store "$tmp/s.infs" --namespace n -k 10,20 "q"
# bench takes the list with either spelling and gets as far as the store
check_err 1 "no such store" bench --store "$tmp/missing.infs" --namespace n -k 10,20 "q"
check_err 1 "no such store" bench --store "$tmp/missing.infs" --namespace n --k 10,20 "q"
check_err 1 "no such store" ask --store "$tmp/missing.infs" --namespace n --k 20 "q"

# A store that is not there: the next step, in the tool's words (no C flags).
check_err 1 "$tmp/missing.infs: no such store: run inferscale encode --store $tmp/missing.infs FACTS.jsonl first" \
	ask --store "$tmp/missing.infs" --namespace n "q"
if grep -q INFS_ "$tmp/e"; then fail "ask on a missing store names a C flag: $(cat "$tmp/e")"; fi
check_err 1 "$tmp/missing.infs: no such store" verify "$tmp/missing.infs"

# A model or embedder that is not there: how to get the models, its path once,
# and no store created.
printf '{"namespace": "n", "text": "Maya sings."}\n' > "$tmp/f.jsonl"
check_err 1 "$tmp/no-model.gguf: no such model: get the default models with scripts/fetch-models.sh" encode --store "$tmp/new.infs" --model "$tmp/no-model.gguf" "$tmp/f.jsonl"
grep -qF "inferscale fetch-models" "$tmp/e" || fail "a missing model: no word of the Python command: $(cat "$tmp/e")"
[ "$(grep -o "no-model.gguf" "$tmp/e" | wc -l)" = 1 ] || fail "a missing model's path is not printed once: $(cat "$tmp/e")"
[ ! -e "$tmp/new.infs" ] || fail "encode with a missing model created the store"
check_err 1 "model: " encode --store "$tmp/new.infs" --model /dev/null "$tmp/f.jsonl"
[ "$(grep -o "/dev/null" "$tmp/e" | wc -l)" = 1 ] || fail "a file that is not a model: its path not once: $(cat "$tmp/e")"
check_err 1 "$tmp/no-minilm: no such embedder" encode --store "$tmp/new.infs" --embedder "$tmp/no-minilm" \
	--model /dev/null "$tmp/f.jsonl"

# --version, and --help of every command, verify and plot included.
"$cli" --version > "$tmp/v" || fail "--version: exit $?"
grep -qE "^inferscale [0-9]+\.[0-9]+\.[0-9]+" "$tmp/v" || fail "--version: $(cat "$tmp/v")"
"$cli" --help | grep -q -- "--version" || fail "--help does not name --version"
for cmd in encode ask bench eval verify plot; do
	for h in --help -h; do
		"$cli" "$cmd" $h > "$tmp/h" 2> "$tmp/e" || fail "$cmd $h: exit $?: $(cat "$tmp/e")"
		head -n 1 "$tmp/h" | grep -q "^usage: inferscale $cmd" || fail "$cmd $h: $(head -n 1 "$tmp/h")"
	done
done
"$cli" verify "$tmp/x.infs" --help | grep -q "^usage: inferscale verify STORE" || fail "verify STORE --help"
echo "cli-args: ok"
