#!/bin/sh
# inferscale encode's input refused at the door, before any model loads or
# any store is touched: numbers that do not fit their C type (named with
# the file, the line and the member), strings the library would refuse
# later (invalid UTF-8, control characters in a namespace, its limits), and
# lines of 100 MB, read with a peak memory of at most 4 times the line.
# No model needed: what passes the door fails at the (missing) model.
# usage: test_cli_input.sh INFERSCALE
set -eu
cli=$1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/infs-input-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# Encodes $tmp/in.jsonl with a model path that leads nowhere; stderr in
# $tmp/e, the exit status in $got.
encode() {
	set +e
	"$cli" encode --store "$tmp/s.infs" --model "$tmp/no-model.gguf" --embedder "$tmp/no-embedder" "$@" \
		"$tmp/in.jsonl" > "$tmp/o" 2> "$tmp/e"
	got=$?
	set -e
	[ "$(wc -l < "$tmp/e")" = 1 ] || fail "stderr is not one line: $(cat "$tmp/e")"
	[ ! -e "$tmp/s.infs" ] || fail "$(cat "$tmp/in.jsonl"): a store was created"
}
refused() { # expected-message (after "FILE:") jsonl-content
	printf '%s\n' "$2" > "$tmp/in.jsonl"
	encode
	[ "$got" = 1 ] || fail "$2: exit $got, expected 1: $(cat "$tmp/e")"
	grep -qF -- "inferscale: $tmp/in.jsonl:$1" "$tmp/e" || fail "$2: \"$(cat "$tmp/e")\", expected \"$1\""
}
# Past the door: the next thing to fail is loading the model.
accepted() { # jsonl-content
	printf '%s\n' "$1" > "$tmp/in.jsonl"
	encode
	grep -qF "no-model.gguf" "$tmp/e" || fail "$1: refused: $(cat "$tmp/e")"
}
ok='{"text": "Maya likes tea.", "namespace": "maya"}'

# Numbers: integers of their type exactly, or refused; never cast.
refused '1: "source_id" 18446744073709551616 is out of range (0..18446744073709551615)' \
	'{"text": "x", "namespace": "s", "source_id": 18446744073709551616}'
refused '1: "source_id" -1 is out of range (0..18446744073709551615)' '{"text": "x", "namespace": "s", "source_id": -1}'
refused '1: "source_id" 1.5 is not an integer' '{"text": "x", "namespace": "s", "source_id": 1.5}'
refused '1: "timestamp" 1e300 is out of range (-9223372036854775808..9223372036854775807)' \
	'{"text":"x","namespace":"s","source_id":18446744073709551615,"timestamp":1e300}'
refused '3: "timestamp" 9223372036854775808 is out of range' "$ok

{\"text\": \"x\", \"namespace\": \"s\", \"timestamp\": 9223372036854775808}"
refused '2: "timestamp" -0.5 is not an integer' "$ok
{\"text\": \"x\", \"namespace\": \"s\", \"timestamp\": -0.5}"
accepted '{"text": "x", "namespace": "s", "source_id": 18446744073709551615, "timestamp": -9223372036854775808}'
accepted '{"text": "x", "namespace": "s", "source_id": 12345678901234567891, "timestamp": 1.7e9}'

# Strings the library would refuse after other lines were written.
refused '2: JSON line 1 column 11: invalid UTF-8 in a string' "$ok
$(printf '{"text": "\377", "namespace": "maya"}')"
refused '2: JSON line 1 column 58: invalid UTF-8 in a string' "$ok
$(printf '{"text": "x", "namespace": "maya", "metadata": {"date": "\300\257"}}')"
refused '2: JSON line 1 column 29: invalid UTF-8 in a string' "$ok
$(printf '{"text": "x", "namespace": "\355\240\200"}')"
refused '2: "namespace" holds a control character at byte 1' "$ok
{\"text\": \"x\", \"namespace\": \"a\\u0007b\"}"
refused '2: "namespace" holds a control character at byte 1' "$ok
{\"text\": \"x\", \"namespace\": \"a\\u0085b\"}"
refused '2: namespace "" is empty' "$ok
{\"text\": \"x\", \"namespace\": \"\"}"
long=$(printf '%0256d' 0)
refused "2: namespace \"$(printf '%064d' 0)...\" is longer than 255 bytes" "$ok
{\"text\": \"x\", \"namespace\": \"$long\"}"
accepted "{\"text\": \"x\", \"namespace\": \"${long#0}\"}"
refused '1: no "text" (a non-empty string)' '{"text": "", "namespace": "s"}'
# A key spelled with a newline is quoted on the message's one line.
refused '1: "a\u000ab" holds a NUL character' '{"text": "x", "namespace": "s", "a\nb": "\u0000"}'

# Lines of 100 MB: a text, a metadata string, an array. Each is refused at
# its line, and the peak memory stays within 4 times the line's size.
python3 - "$cli" "$tmp" <<'PY' || fail "100 MB lines"
import resource, subprocess, sys
cli, tmp = sys.argv[1], sys.argv[2]
size = 100 << 20
cases = [
    ('{"namespace": "s", "text": "', 'a', '"}', '"text" is '),
    ('{"namespace": "s", "text": "x", "metadata": {"note": "', 'a', '"}}', 'the metadata'),
    ('{"namespace": "s", "text": "x", "tags": [', '0,', '0]}', 'more than 65536 JSON values'),
]
for head, unit, tail, msg in cases:
    path = tmp + "/big.jsonl"
    with open(path, "w") as f:
        f.write(head + unit * ((size - len(head) - len(tail)) // len(unit)) + tail + "\n")
    # A Python of its own runs each: ru_maxrss of its children is this
    # encode's peak alone.
    measure = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
               "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); "
               "print(r.stderr, file=sys.stderr)")
    r = subprocess.run([sys.executable, "-c", measure, cli, "encode", "--store", tmp + "/s.infs", "--model",
                        tmp + "/none.gguf", "--embedder", tmp + "/none", path], capture_output=True, text=True)
    rc, peak = (int(x) for x in r.stdout.split())
    peak *= 1024
    assert rc == 1 and msg in r.stderr and ":1: " in r.stderr, (head, rc, r.stderr[-300:])
    assert peak <= 4 * size, "%s: peak %.0f MB for a %d MB line" % (head, peak / 2**20, size >> 20)
    print("%-50s peak %5.0f MB" % (head[:50], peak / 2**20))
PY
echo "cli-input: ok"
