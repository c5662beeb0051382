#!/usr/bin/env bash
# Command 2: install everything (with the test tools and chromium), then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --dev
echo "== ruff: lint and format check (line length 120, pyproject.toml)"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
export SPECVIZ_REQUIRE_BUILTIN=1  # integration tests fail, not skip, if the pair is missing
# Two workers (pytest-xdist): the tiny-model tests run on one thread each, so two keep both cores busy. The groups
# that must share a worker (the real pair's tests, loaded once; a shared server; expensive module fixtures) are set
# in tests/conftest.py. SPECVIZ_TEST_WORKERS=0 runs everything in this one process.
exec .venv/bin/python -m pytest -n "${SPECVIZ_TEST_WORKERS:-2}" "$@"
