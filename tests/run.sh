#!/usr/bin/env bash
# Install everything the test suite needs on a fresh machine, then run the whole suite.
#
#   tests/run.sh            # lint + every test (unit, integration, browser)
#   tests/run.sh -k writer  # extra arguments go to pytest
#
# Creates ./.venv when missing, installs trnprof with its test extras, installs Chromium and ChromeDriver from
# Debian packages when they are missing (the browser tests drive the dashboard in headless Chromium), runs
# ruff, then pytest on every CPU (TRNPROF_TEST_WORKERS=N: N worker processes; 1: none).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=${TRNPROF_VENV:-.venv}

if [ ! -x "$VENV/bin/python" ]; then
    echo "== creating $VENV"
    "$PYTHON" -m venv "$VENV"
fi
echo "== installing trnprof[test]"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e '.[test]'

if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
    echo "== installing chromium and chromium-driver (Debian packages)"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
fi

echo "== ruff"
"$VENV/bin/ruff" check .

# One worker per CPU (TRNPROF_TEST_WORKERS=1 runs in this process), each taking whole test files so that module
# fixtures are built once: 1.7x faster than one process on 2 vCPUs.
WORKERS=${TRNPROF_TEST_WORKERS:-auto}
echo "== pytest ($WORKERS workers)"
if [ "$WORKERS" = "1" ]; then
    exec "$VENV/bin/python" -m pytest --hypothesis-profile=ci "$@"
fi
exec "$VENV/bin/python" -m pytest --hypothesis-profile=ci -n "$WORKERS" --dist loadfile "$@"
