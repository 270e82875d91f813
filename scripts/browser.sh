#!/usr/bin/env bash
# Make sure Debian's chromium and its chromedriver are installed, for the browser test of report.html
# (tests/test_report_html.py drives /usr/bin/chromium through /usr/bin/chromedriver with selenium).
# Idempotent: does nothing when both are there.  Otherwise, as root on Debian/Ubuntu, installs them
# with apt-get.  Exits non-zero when they cannot be had: the browser test never skips in CI.
set -euo pipefail

if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
  echo "browser: chromium and chromedriver already installed"
  exit 0
fi

if [ "$(id -u)" != 0 ]; then
  echo "browser: /usr/bin/chromium or /usr/bin/chromedriver is missing and this is not root;" \
    "install them with 'sudo apt-get install -y chromium chromium-driver'" >&2
  exit 3
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "browser: no apt-get: install chromium and its chromedriver at /usr/bin by hand" >&2
  exit 3
fi

echo "browser: installing Debian's chromium and chromium-driver"
flock /tmp/envbuild-apt.lock apt-get update -qq  # scripts/test.sh runs these scripts side by side
DEBIAN_FRONTEND=noninteractive flock /tmp/envbuild-apt.lock apt-get install -y -qq chromium chromium-driver >/dev/null
echo "browser: $(/usr/bin/chromium --version 2>/dev/null || echo 'chromium installed')"
