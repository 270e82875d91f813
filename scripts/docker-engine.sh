#!/usr/bin/env bash
# Make sure a Docker engine answers.  Idempotent: does nothing when `docker info` already works.
# When none answers and we are root on Debian/Ubuntu, install Debian's docker.io and start dockerd
# in the background (logs in /var/log/envbuild-dockerd.log).  Exits non-zero when no engine can be had.
set -euo pipefail

engine_up() { docker info >/dev/null 2>&1; }

if engine_up; then
  echo "docker-engine: an engine already answers"
  exit 0
fi

if [ "$(id -u)" != 0 ]; then
  echo "docker-engine: no engine answers and this is not root; start one with 'sudo dockerd &' or your service manager" >&2
  exit 3
fi

if ! command -v dockerd >/dev/null 2>&1; then
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "docker-engine: no dockerd and no apt-get: install a Docker engine for this OS by hand" >&2
    exit 3
  fi
  echo "docker-engine: installing Debian's docker.io"
  flock /tmp/envbuild-apt.lock apt-get update -qq  # scripts/test.sh runs these scripts side by side
  DEBIAN_FRONTEND=noninteractive flock /tmp/envbuild-apt.lock apt-get install -y -qq docker.io >/dev/null
fi

if pgrep -x dockerd >/dev/null 2>&1; then
  # A dockerd is already starting (another run of this script, or a service): wait for it instead
  # of starting a second one that would fight over /var/run/docker.pid.
  echo "docker-engine: dockerd is running but not answering yet; waiting for it"
else
  echo "docker-engine: starting dockerd"
  nohup dockerd >/var/log/envbuild-dockerd.log 2>&1 &
fi
for _ in $(seq 1 60); do
  if engine_up; then
    echo "docker-engine: engine is up ($(docker version --format '{{.Server.Version}}'))"
    exit 0
  fi
  sleep 1
done
echo "docker-engine: dockerd did not answer within 60 s; last log lines:" >&2
tail -n 20 /var/log/envbuild-dockerd.log >&2 || true
exit 3
