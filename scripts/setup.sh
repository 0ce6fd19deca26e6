#!/usr/bin/env bash
# Installs what building and testing inferscale needs on a Debian 12 machine.
# Idempotent: does nothing that is already done. Needs root (or sudo) for apt.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

apt_pkgs=(build-essential pkg-config libopenblas-dev libfaiss-dev dpkg-dev)
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

# The Python binding's build and test requirements (bindings/python).
python3 -m pip install -q --disable-pip-version-check -r bindings/python/requirements-test.txt
