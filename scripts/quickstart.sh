#!/usr/bin/env bash
# Set up envbuild and run the main job on the built-in default: check and render the `pytorch`
# profile for an H100 into ./out/pytorch-h100.  Extra arguments replace the defaults, e.g.
#   scripts/quickstart.sh custom --target b200
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m venv .venv
.venv/bin/python -m pip install -q -e .

if [ "$#" -eq 0 ]; then
  set -- pytorch --target h100
fi
out="out/$(echo "$*" | tr -c 'a-zA-Z0-9._-' '-' | sed 's/--*/-/g; s/-$//')"
.venv/bin/envbuild check "$@"
.venv/bin/envbuild render "$@" --out "$out"
echo "bundle written to $out"
