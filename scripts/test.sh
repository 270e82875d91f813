#!/usr/bin/env bash
# Set up everything the tests need and run the whole suite:
#   a venv with envbuild and its test extras (torch 2.13.0 CPU, pytest, ruff, mypy, hadolint, ...),
#   a running Docker engine, the local Debian 12 and Ubuntu 22.04 base images, the smokes of scripts/smoke.sh (Python 3.10,
#   the newest Python, the lowest declared dependencies), then ruff, mypy and pytest.
# The setup runs side by side where it waits on the network or the disk: the engine, the browser and the two
# debootstraps (apt-get calls take turns: scripts/*.sh lock /tmp/envbuild-apt.lock) beside the venv's install,
# then the three smokes beside each other and beside ruff and mypy.  Each step writes its own log, printed
# whole when it ends; a step that fails stops the run, its log printed.
# pytest runs in parallel (pytest-xdist, ENVBUILD_TEST_WORKERS workers, 2 by default): the tests that share
# an image are in one xdist_group, run by one worker that builds the image once (tests/conftest.py).
# Extra arguments go to pytest, e.g. scripts/test.sh -k render -x; scripts/test.sh -n 0 runs serially.
set -euo pipefail
cd "$(dirname "$0")/.."

logs=$(mktemp -d /tmp/envbuild-test-setup.XXXXXX)
declare -A pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT # steps left running after a failure

# start NAME COMMAND...: run COMMAND in the background, its output in $logs/NAME.log.
start() {
  local name=$1
  shift
  (
    trap 'echo $((SECONDS - began)) >"$logs/$name.seconds"' EXIT
    began=$SECONDS
    "$@"
  ) >"$logs/$name.log" 2>&1 &
  pids[$name]=$!
}
# finish NAME: wait for it, print its log; a failure ends the run.
finish() {
  local name=$1 rc=0
  wait "${pids[$name]}" || rc=$?
  unset "pids[$name]"
  echo "== setup: $name ($(cat "$logs/$name.seconds" 2>/dev/null || echo '?') s; load now $(cut -d' ' -f1-3 /proc/loadavg))"
  cat "$logs/$name.log"
  if [ "$rc" != 0 ]; then
    echo "test: setup step $name failed (exit $rc); its output is above ($logs/$name.log)" >&2
    exit "$rc"
  fi
}

venv() {
  python3 -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -e '.[test]'
}
system() {
  bash scripts/docker-engine.sh
  bash scripts/base-image.sh envbuild/debian:12 >"$logs/base-debian.log" 2>&1 &
  local debian=$!
  bash scripts/base-image.sh envbuild/ubuntu:22.04 jammy >"$logs/base-jammy.log" 2>&1 &
  local jammy=$! rc=0
  bash scripts/browser.sh || rc=$? # Debian's chromium + chromedriver: the report.html browser test
  wait "$debian" || rc=$?
  cat "$logs/base-debian.log"
  wait "$jammy" || rc=$?
  cat "$logs/base-jammy.log"
  return "$rc"
}

start system system
start venv venv

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
finish venv # the smokes take uv from it

# The PyTorch index is unreachable here; don't let pip wait on it.
export PIP_RETRIES=0
start smoke-floor bash scripts/smoke.sh "$floor"
start smoke-newest bash scripts/smoke.sh "$newest"
start smoke-lowest bash scripts/smoke.sh "$floor" --lowest

echo "== ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
echo "== mypy"
.venv/bin/mypy

finish smoke-floor
finish smoke-newest
finish smoke-lowest
finish system
echo "== pytest"
.venv/bin/pytest -n "${ENVBUILD_TEST_WORKERS:-2}" --dist loadgroup --no-loadscope-reorder "$@"
