#!/usr/bin/env bash
# Fill .whl/ (ignored) with what the GPU machine lacks, to carry there (it has no network).
# The device has Python 3.12, torch 2.11 + CUDA 13 and transformers 5.17, below the project's 5.20 floor:
# carry transformers 5.24.0 (pure Python, about 13 MB). It has no pydantic (the first run on an H100, 2026-12-06,
# stopped at its import): carry pydantic with what it requires (pydantic_core is the one binary wheel, cp312;
# typing_extensions because pydantic 2.14 needs >= 4.16). Transformers' other requirements are already there at versions
# it accepts (huggingface_hub 1.33 >= 1.31, tokenizers 0.23.2 in [0.23.1, 0.24), safetensors 0.8.0 >= 0.8.0;
# numpy, packaging, pyyaml, regex, tqdm, typer present): scripts/gpu_versions.py checks that there and says
# which one to add (EXTRA="name==version ..." here) if not. Keep one version of each package in .whl/.
# Usage: scripts/gpu_wheels.sh     (PYTHON=... for another interpreter with pip)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
mkdir -p .whl
# shellcheck disable=SC2086
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .whl transformers==5.24.0 pydantic==2.14.4 pydantic_core==2.50.5 annotated-types==0.8.0 \
  typing-inspection==0.4.5 typing_extensions==4.16.0 ${EXTRA:-}
ls -l .whl
du -sh .whl
