#!/usr/bin/env bash
# GPU check, for one CUDA GPU (sized for an H200, under 10 minutes), with nothing downloaded:
#   1. greedy exactness (alternatives included), the lossless chi-square test, the auto schedule, compiled decoding and the
#      benchmark's own tests, all on CUDA (the tests' tiny pairs moved there by scripts/cuda_plugin.py);
#   2. the benchmark on random-weight pairs of the built-in pair's sizes (bf16): the verify time against
#      gamma, the cost ratio c, and, when the draft is launch-bound (c > 0.5), the same with a static
#      KV cache and CUDA graphs (torch.compile) for the draft's and the baseline's steps.
# Results: out/gpu-check-cuda.json, out/verify_curve_cuda.json (or under $OUT when that is set).
# Usage: scripts/gpu_check.sh            (PYTHON=... to use another interpreter than .venv/bin/python)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
OUTDIR=${OUT:-out}
mkdir -p "$OUTDIR"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export PYTHONPATH="scripts:.${PYTHONPATH:+:$PYTHONPATH}"

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
"$PY" -c "import torch, transformers; assert torch.cuda.is_available(), 'no CUDA GPU'; print('torch', torch.__version__, 'CUDA', torch.version.cuda, 'transformers', transformers.__version__)"

echo "== 1/2 exactness and losslessness on CUDA (tiny pairs)"
timeout 330 "$PY" -m pytest -q -p cuda_plugin -p no:cacheprovider \
  tests/test_engine.py tests/test_alternatives.py tests/test_lossless.py tests/test_auto_schedule.py tests/test_compiled.py \
  tests/test_bench.py \
  2>&1 | tee "$OUTDIR/gpu-check-tests.txt"

echo "== 2/2 benchmark on random-weight pairs of the built-in sizes"
timeout 240 "$PY" scripts/gpu_check.py --device cuda --out "$OUTDIR" 2>&1 | tee "$OUTDIR/gpu-check-bench.txt"
