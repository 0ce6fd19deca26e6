#!/usr/bin/env bash
# Sets up this machine, builds, and runs every test suite: the C suites, the
# same again under AddressSanitizer + UndefinedBehaviorSanitizer, and the
# bindings' suites. Exits non-zero when any test fails.
set -uo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh || exit 1
scripts/fetch-models.sh || exit 1

tally=$(mktemp)
trap 'rm -f "$tally"' EXIT

# meson_suite NAME BUILDDIR [meson options...]: configure, build, test.
meson_suite() {
	local name=$1 dir=$2
	shift 2
	echo "== $name"
	if [ -d "$dir/meson-private" ]; then
		meson setup --reconfigure "$dir" "$@" >/dev/null || { echo "$name 0 1 0" >>"$tally"; return; }
	else
		meson setup "$dir" "$@" >/dev/null || { echo "$name 0 1 0" >>"$tally"; return; }
	fi
	ninja -C "$dir" || { echo "$name 0 1 0" >>"$tally"; return; }
	meson test -C "$dir" --print-errorlogs --num-processes 2
	python3 scripts/meson-tally.py "$name" "$dir/meson-logs/testlog.json" >>"$tally"
}

meson_suite c build -Dwerror=true
meson_suite sanitizers build-asan -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false \
	-Dcuda=disabled -Dbuildtype=debug

echo "== summary"
awk '{ printf "%-12s %d passed, %d failed, %d skipped\n", $1, $2, $3, $4; p += $2; f += $3; s += $4 }
     END { printf "%d passed, %d failed, %d skipped\n", p, f, s; exit f > 0 }' "$tally"
