#!/bin/sh
# The command-line tool stays easy to change: every tools/*.c under 600
# lines (one file per command, per job), and one JSON reader, the tool's
# own (tools/jsonl.c), not the library's internal one beside it.
# usage: test_tool_files.sh SOURCE_ROOT
set -eu
cd "$1/tools"
fail() { echo "FAIL: $*" >&2; exit 1; }
for f in *.c; do
	n=$(wc -l < "$f")
	[ "$n" -lt 600 ] || fail "tools/$f has $n lines: split it along its jobs (600 at most)"
done
for c in encode ask bench eval verify plot; do
	[ -f "cmd_$c.c" ] || fail "tools/cmd_$c.c is missing: each command is one file"
done
if grep -ln 'util/json\.h\|infs__json' *.c *.h; then fail "the files above read JSON with the library's reader too"; fi
echo "tool-files: ok"
