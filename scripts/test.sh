#!/usr/bin/env bash
# Set up everything the tests need and run the whole suite:
#   a venv with envbuild and its test extras (torch 2.13.0 CPU, pytest, ruff, mypy, hadolint, ...),
#   a running Docker engine, the local Debian 12 and Ubuntu 22.04 base images, the smokes of scripts/smoke.sh (Python 3.10,
#   the newest Python, the lowest declared dependencies), then ruff, mypy and pytest.
# pytest runs in parallel (pytest-xdist, ENVBUILD_TEST_WORKERS workers, 2 by default): the tests that share
# an image are in one xdist_group, run by one worker that builds the image once (tests/conftest.py).
# Extra arguments go to pytest, e.g. scripts/test.sh -k render -x; scripts/test.sh -n 0 runs serially.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[test]'

# The PyTorch index is unreachable here; don't let pip wait on it.
export PIP_RETRIES=0
bash scripts/docker-engine.sh
bash scripts/base-image.sh envbuild/debian:12
bash scripts/base-image.sh envbuild/ubuntu:22.04 jammy
bash scripts/browser.sh  # Debian's chromium + chromedriver: the report.html browser test

# The declared Python floor and the newest Python here, runtime dependencies only (scripts/smoke.sh),
# then the floor again with the lowest version of every declared dependency.  pyenv's interpreters are
# called by path: its shim refuses a version that is not selected.
pythons=/root/.pyenv/versions
floor=$(ls -d "$pythons"/3.10.*/bin/python3.10 2>/dev/null | sort -V | tail -n 1)
newest=$(ls -d "$pythons"/3.*/bin/python3 2>/dev/null | sort -V | tail -n 1)
if [ -z "$floor" ] || [ -z "$newest" ]; then
  echo "test: no Python 3.10 (or no newest Python) under $pythons: the smoke of the declared floor cannot run" >&2
  exit 1
fi
bash scripts/smoke.sh "$floor"
bash scripts/smoke.sh "$newest"
bash scripts/smoke.sh "$floor" --lowest

echo "== ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
echo "== mypy"
.venv/bin/mypy
echo "== pytest"
.venv/bin/pytest -n "${ENVBUILD_TEST_WORKERS:-2}" --dist loadgroup --no-loadscope-reorder "$@"
