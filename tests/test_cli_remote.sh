#!/bin/sh
# inferscale --remote on the real models and a real Redis server started
# here on a free loopback port: facts encoded through one store file are
# answered through another, and again after the first file is lost; the
# answers are the same. Skipped (77) without redis-server.
# usage: test_cli_remote.sh INFERSCALE REPO-ROOT
set -eu
cli=$1
root=$2
server=$(command -v redis-server || command -v valkey-server || true)
[ -n "$server" ] || { echo "redis-server is not installed (scripts/setup.sh installs it): skipped"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/infs-cli-remote-XXXXXX")
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$server" --port "$port" --bind 127.0.0.1 --dir "$tmp" --save "" --appendonly yes --appendfsync always \
	--logfile server.log > /dev/null 2>&1 &
pid=$!
i=0
until redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; do
	i=$((i + 1)); [ $i -lt 200 ] || fail "redis-server did not start on port $port"; sleep 0.05
done
url="redis://127.0.0.1:$port"

head -n 11 "$root/examples/memory/facts.jsonl" > "$tmp/facts.jsonl"
"$cli" encode --remote "$url" --store "$tmp/a.infs" --quiet "$tmp/facts.jsonl" > "$tmp/out" ||
	fail "encode --remote: $(cat "$tmp/out")"
grep -q "encoded 11 facts" "$tmp/out" || fail "encode: $(cat "$tmp/out")"
[ "$(redis-cli -p "$port" scard '{infs:maya}:ids')" = 11 ] || fail "the server does not hold maya's 11 facts"

q="What is the name of Maya's cat?"
"$cli" ask --store "$tmp/a.infs" --namespace maya -k 4 --max-tokens 16 "$q" > "$tmp/local"
grep -q Biscuit "$tmp/local" || fail "ask: no Biscuit in the answer"
# another file, which has never seen maya, and the first one lost
"$cli" ask --remote "$url" --store "$tmp/b.infs" --namespace maya -k 4 --max-tokens 16 "$q" > "$tmp/b"
rm "$tmp/a.infs"
"$cli" ask --remote="$url" --store "$tmp/a.infs" --namespace maya -k 4 --max-tokens 16 "$q" > "$tmp/lost"
answer() { grep -v -e TTFT -e '^ *[0-9]*\. [0-9.]*  - ' "$1" | grep -v '^$'; }
for f in b lost; do
	grep -q Biscuit "$tmp/$f" || fail "ask --remote ($f): no Biscuit: $(cat "$tmp/$f")"
	[ "$(answer "$tmp/local")" = "$(answer "$tmp/$f")" ] || fail "ask --remote ($f): another answer"
done

# errors: one line, non-zero
if "$cli" ask --store "$tmp/a.infs" --namespace maya "$q" --remote 2> "$tmp/err"; then fail "--remote without a URL"; fi
grep -q "needs a URL" "$tmp/err" || fail "--remote: $(cat "$tmp/err")"
kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
if "$cli" ask --remote "$url" --store "$tmp/c.infs" --namespace maya "$q" > /dev/null 2> "$tmp/err"; then
	fail "ask with the server down"
fi
grep -q "127.0.0.1:$port" "$tmp/err" || fail "server down: $(cat "$tmp/err")"
[ ! -e "$tmp/c.infs" ] || fail "a store file was made with the server down"
echo "cli --remote: ok"
