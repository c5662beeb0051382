#!/usr/bin/env bash
# Command 2: install everything (with the test tools and chromium), then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --dev
echo "== ruff: lint and format check (line length 120, pyproject.toml)"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
export SPECVIZ_REQUIRE_BUILTIN=1  # integration tests fail, not skip, if the pair is missing
exec .venv/bin/python -m pytest "$@"
