#!/usr/bin/env bash
# Install envbuild with its runtime dependencies only (no [test] extra, no torch) into a fresh venv of
# the given Python, and run scripts/smoke.py there: check, render, lock against a loopback index,
# validate a small venv, report verify.
#
#   scripts/smoke.sh PYTHON            the newest release of every dependency
#   scripts/smoke.sh PYTHON --lowest   the lowest version every declared dependency allows
#                                      (uv --resolution lowest-direct, wheels only); the smoke first
#                                      checks that each installed version IS the floor pyproject declares
#
# scripts/test.sh runs it on Python 3.10 (the declared floor, both ways) and on the newest Python here.
set -euo pipefail
cd "$(dirname "$0")/.."

python=${1:?usage: scripts/smoke.sh PYTHON [--lowest]}
mode=${2:-}
version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
venv=.smoke/$version${mode:+-lowest}

# uv: the one the test venv has (a runtime dependency of envbuild), else a venv of its own.
uv=.venv/bin/uv
if [ ! -x "$uv" ]; then
  [ -x .smoke/uv/bin/uv ] || { python3 -m venv .smoke/uv && .smoke/uv/bin/pip install -q uv; }
  uv=.smoke/uv/bin/uv
fi

# envbuild's own wheel, built once per checkout state (hatchling, in uv's isolated build), into a folder
# of this smoke's own: scripts/test.sh runs the three smokes side by side.
dist=.smoke/dist-$version${mode:+-lowest}
rm -rf "$dist"
"$uv" build --quiet --wheel --out-dir "$dist" . >/dev/null
wheel=$(ls "$dist"/envbuild-*.whl)

rm -rf "$venv"
"$uv" venv --quiet --python "$python" "$venv"
# PyPI only: the machine's pip configuration (find-links, a torch cap) does not apply to uv.
if [ "$mode" = "--lowest" ]; then
  # pyproject's dependencies as the direct requirements (lowest-direct lowers only those), then the
  # wheel itself without resolving again.
  "$uv" pip install --quiet --python "$venv/bin/python" --resolution lowest-direct --only-binary :all: \
    -r pyproject.toml
  "$uv" pip install --quiet --python "$venv/bin/python" --no-deps "$wheel"
else
  "$uv" pip install --quiet --python "$venv/bin/python" "$wheel"
fi

args=()
[ "$mode" = "--lowest" ] && args=(--expect-floors)
echo "== smoke: Python $version${mode:+ (lowest declared versions)}"
"$venv/bin/python" scripts/smoke.py "${args[@]}"
