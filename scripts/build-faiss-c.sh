#!/usr/bin/env bash
# Builds FAISS's C API (libfaiss_c) for the installed libfaiss-dev. Debian
# bookworm ships the c_api headers but not the library; the c_api sources of
# the same FAISS version come from Debian's source package and compile against
# the installed libfaiss in seconds. Idempotent: does nothing when the library
# for this FAISS version is already installed. Needs root (or sudo).
set -euo pipefail

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

prefix=/usr/local
srcver=$(dpkg-query -W -f='${source:Version}' libfaiss-dev 2>/dev/null) || {
	echo "build-faiss-c: libfaiss-dev is not installed" >&2
	exit 1
}
stamp="$prefix/share/inferscale/faiss_c.version"
# the FAISS version and this recipe's revision: a change to either rebuilds
build_id="$srcver recipe-2"
if [ -e "$prefix/lib/libfaiss_c.so" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$build_id" ]; then
	exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
# apt-get source needs a deb-src entry (bookworm's is added when there is
# none) and fresh package lists for it.
if ! apt-get source -qq --download-only "faiss=$srcver" >/dev/null 2>&1; then
	if ! grep -Rqs -e '^deb-src' -e '^Types:.*deb-src' /etc/apt/sources.list /etc/apt/sources.list.d/; then
		$SUDO tee /etc/apt/sources.list.d/inferscale-deb-src.sources >/dev/null <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
	fi
	$SUDO apt-get update -qq
	apt-get source -qq --download-only "faiss=$srcver" >/dev/null
fi
dpkg-source --no-check -x faiss_*.dsc src >/dev/null

# The c_api sources include <faiss/...>: they build against the installed
# headers, so the library matches the installed libfaiss exactly. libfaiss is
# only shipped as a static archive (position independent), linked in whole.
# NDEBUG: without it the C API also prints every exception to stderr.
api=src/c_api
srcs=$(ls "$api"/*.cpp "$api"/impl/*.cpp "$api"/utils/*.cpp 2>/dev/null)
# shellcheck disable=SC2086
g++ -std=c++17 -O2 -DNDEBUG -fPIC -fopenmp -shared -o libfaiss_c.so -Wl,-soname,libfaiss_c.so \
	$srcs -Wl,--whole-archive /usr/lib/x86_64-linux-gnu/libfaiss.a -Wl,--no-whole-archive \
	-lblas -llapack -lgomp

$SUDO install -m 0755 libfaiss_c.so "$prefix/lib/libfaiss_c.so"
$SUDO mkdir -p "$(dirname "$stamp")"
echo "$build_id" | $SUDO tee "$stamp" >/dev/null
$SUDO ldconfig
echo "build-faiss-c: installed $prefix/lib/libfaiss_c.so (FAISS $srcver)"
