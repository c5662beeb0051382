#!/usr/bin/env bash
# Command 1: install everything, then start the app at http://localhost:8501 on the built-in pair.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/python -m streamlit run app.py "$@"
