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
# The sanitizer build is optimized (-O2 -g): the model's quantized products are
# our own C, and unoptimized under ASan the model tests would take most of an hour.
meson_suite sanitizers build-asan -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false \
	-Dcuda=disabled -Dbuildtype=debugoptimized

# go_suite: go vet and go test -race for the Go binding and the example
# service, built against the library in build/ (its uninstalled pkg-config
# file; the include dirs are added because that file lists only the
# library's private ones). A vet or build failure counts as one failed test.
go_suite() {
	echo "== go"
	local root=$PWD log rc=0
	log=$(mktemp)
	(
		export PATH="/usr/lib/go-1.23/bin:$PATH" GOTOOLCHAIN=local \
			PKG_CONFIG_PATH="$root/build/meson-uninstalled${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}" \
			CGO_CFLAGS="-I$root/include -I$root/build/include" \
			LD_LIBRARY_PATH="$root/build/libinferscale${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
		status=0
		for mod in bindings/go examples/go; do
			(cd "$mod" && go vet ./... && go test -race -count=1 -v ./...) || status=1
		done
		exit $status
	) 2>&1 | tee "$log" || rc=1
	local pass fail skip
	pass=$(grep -cE '^ *--- PASS' "$log")
	fail=$(grep -cE '^ *--- FAIL' "$log")
	skip=$(grep -cE '^ *--- SKIP' "$log")
	[ "$rc" -ne 0 ] && [ "$fail" -eq 0 ] && fail=1
	echo "go $pass $fail $skip" >>"$tally"
	rm -f "$log"
}
go_suite

# python_suite: build the wheel with meson-python, install it into a fresh
# virtual environment (seeing the machine's packages, so torch and transformers
# are used where installed) and run the binding's pytest suite there.
python_suite() {
	local name=python dir=build-python
	echo "== $name"
	mkdir -p "$dir"
	rm -rf "$dir/dist" "$dir/venv"
	if ! python3 -m build --wheel --no-isolation -Cbuild-dir="$dir/meson" --outdir "$dir/dist" . \
		>"$dir/build.log" 2>&1; then
		tail -40 "$dir/build.log"
		echo "$name 0 1 0" >>"$tally"
		return
	fi
	python3 -m venv --system-site-packages "$dir/venv" &&
		"$dir/venv/bin/python" -m pip install -q --disable-pip-version-check "$dir"/dist/*.whl ||
		{ echo "$name 0 1 0" >>"$tally"; return; }
	INFERSCALE_WHEEL=$(ls "$dir"/dist/*.whl) "$dir/venv/bin/python" -m pytest bindings/python/tests \
		-p no:cacheprovider -q -rs --junitxml="$dir/junit.xml"
	local rc=$?
	if [ $rc -eq 5 ]; then
		echo "python: pytest collected no tests"
		echo "$name 0 1 0" >>"$tally"
		return
	fi
	python3 bindings/python/junit-tally.py "$name" "$dir/junit.xml" "$rc" >>"$tally"
}

python_suite

# Short rounds of the reliability tools: the crash soak (65 SIGKILL trials,
# verified) and every fuzz target for 15 s over its committed corpus; the
# long runs are recorded in docs/reliability.md.
tool_suite() {
	local name=$1
	shift
	echo "== $name"
	local out
	out=$("$@" 2>&1)
	echo "$out"
	local line
	line=$(grep -E "^$name: [0-9]+ passed, [0-9]+ failed" <<<"$out" | tail -1)
	if [ -n "$line" ]; then
		awk -v n="$name" '{ print n, $2, $4, 0 }' <<<"$line" >>"$tally"
	else
		echo "$name 0 1 0" >>"$tally"
	fi
}
tool_suite soak scripts/soak.sh 65
tool_suite fuzz scripts/fuzz.sh -t 15

echo "== summary"
awk '{ printf "%-12s %d passed, %d failed, %d skipped\n", $1, $2, $3, $4; p += $2; f += $3; s += $4 }
     END { printf "%d passed, %d failed, %d skipped\n", p, f, s; exit f > 0 }' "$tally"
