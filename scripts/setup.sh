#!/usr/bin/env bash
# Installs what building and testing inferscale needs on a Debian 12 machine.
# Idempotent: does nothing that is already done. Needs root (or sudo) for apt.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

# clang and its runtime libraries build the libFuzzer targets (scripts/fuzz.sh);
# hiredis builds the remote tier and the tests start redis-server themselves.
apt_pkgs=(build-essential pkg-config libopenblas-dev libfaiss-dev zlib1g-dev dpkg-dev clang libclang-rt-14-dev
  libhiredis-dev redis-server)
missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

python3 -m pip install -q --disable-pip-version-check -r scripts/requirements-build.txt

scripts/build-faiss-c.sh

# Go for the Go binding (bindings/go, examples/go): golang-1.23 from
# bookworm-backports (cgo with runtime.Pinner needs Go >= 1.21; bookworm's own
# golang-go is 1.19). The backports suite is added once, from the mirror the
# machine already uses for bookworm.
if ! [ -x /usr/lib/go-1.23/bin/go ]; then
  if ! apt-get indextargets --format '$(RELEASE)' | grep -qx bookworm-backports; then
    mirror=$(apt-get indextargets --format '$(REPO_URI)' 'Release: bookworm' | head -n1)
    [ -n "$mirror" ] || { echo "setup: no bookworm apt source to add backports beside" >&2; exit 1; }
    printf '%s\n' 'Types: deb' "URIs: $mirror" 'Suites: bookworm-backports' 'Components: main' \
      'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' |
      $SUDO tee /etc/apt/sources.list.d/bookworm-backports.sources >/dev/null
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq -t bookworm-backports golang-1.23-go >/dev/null
fi

# The Python binding's build and test requirements (bindings/python).
python3 -m pip install -q --disable-pip-version-check -r bindings/python/requirements-test.txt
