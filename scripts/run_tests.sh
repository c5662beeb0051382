#!/usr/bin/env bash
# Command 2: install everything (with the test tools and chromium), then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --dev
export SPECVIZ_REQUIRE_BUILTIN=1  # integration tests fail, not skip, if the pair is missing
exec .venv/bin/python -m pytest "$@"
