#!/usr/bin/env bash
# GPU check, for one CUDA GPU (sized for an H200: one 10-minute command with time to spare), nothing downloaded:
#   0. the carried wheels (.whl/, filled here by scripts/gpu_wheels.sh) installed with --no-index --no-deps --target
#      into $GPU_CHECK_SITE, first on PYTHONPATH; scripts/gpu_versions.py then asserts within seconds that
#      transformers is >= 5.20 with its requirements met and that torch has CUDA (else: stop, say what to do);
#   1. the benchmark first (scripts/gpu_check.py: the only thing only a GPU can tell), phase by phase;
#   1b. batching (scripts/gpu_batching.py): T(n) for n up to 4096, where a GPU's knee shows, and batched plain vs
#      speculative decoding at B = 1..64 (docs/DESIGN.md, "Batching");
#   2. the exactness, lossless (SPECVIZ_LOSSLESS_RUNS per config), auto-schedule, compiled and benchmark tests on
#      CUDA (scripts/cuda_plugin.py), each under a per-test timeout, with junit XML and durations.
# Every step runs even if one before it failed; the exit code is the worst one. At most 8 files under $OUT (or out/):
#   versions.txt  nvidia-smi, python/torch/transformers versions, the wheel install
#   bench.log (the batching step's output too), gpu-check-<device>.json (each phase written as it ends),
#   verify_curve_<device>.json, batching_<device>.json
#   tests.log (with the slowest durations), junit.xml
#   status.json   each step's exit code and seconds (written after every step)
# Usage: OUT=... scripts/gpu_check.sh [gpu_check.py's options, e.g. --device cpu --dry-run for a rehearsal]
#   PYTHON=...                   interpreter (default: .venv/bin/python, else python3: the GPU machine's)
#   SPECVIZ_LOSSLESS_RUNS=300    runs per config of test_lossless.py::test_first_two_tokens_follow_the_target (own: 2000)
#   GPU_CHECK_TESTS="..."        the test files (default below); GPU_CHECK_TEST_TIMEOUT=90 seconds per test
#   GPU_CHECK_DESELECT="..."     pytest -k expression (default: the negative controls and unequal-width chi-squares out)
#   GPU_CHECK_BENCH_S=270, GPU_CHECK_BATCHING_S=140, GPU_CHECK_TESTS_S=120: the steps' time limits (worst case in
#   all, the versions' 60 s included: 590 s; on an H100 on 2026-12-06 the steps took 5, 232, 117 and 75 s)
set -uo pipefail # no -e: a failing step must not stop the others
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3 # the GPU machine: its python3 holds torch (no .venv travels)
OUTDIR=${OUT:-out}
SITE=${GPU_CHECK_SITE:-/tmp/specviz-site}
WHEELS=${GPU_CHECK_WHEELS:-.whl} # the rehearsal passes the pure-Python ones (pydantic_core's is for the device's 3.12)
mkdir -p "$OUTDIR"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export SPECVIZ_LOSSLESS_RUNS=${SPECVIZ_LOSSLESS_RUNS:-300}
DEVICE=cuda
args=("$@")
for i in "${!args[@]}"; do [ "${args[$i]}" = --device ] && DEVICE=${args[$((i + 1))]:-cuda}; done
[ "$DEVICE" = cuda ] || export SPECVIZ_PLUGIN_DEVICE=$DEVICE
TESTS=${GPU_CHECK_TESTS:-tests/decoding/test_engine.py tests/decoding/test_alternatives.py tests/decoding/test_lossless.py \
tests/decoding/test_auto_schedule.py tests/decoding/test_compiled.py tests/bench/test_bench.py}

worst=0
entries=""
record() { # name rc seconds: status.json rewritten after every step
  [ "$2" -gt "$worst" ] && worst=$2
  entries+="${entries:+, }\"$1\": {\"rc\": $2, \"seconds\": $3}"
  printf '{%s, "worst": %s}\n' "$entries" "$worst" >"$OUTDIR/status.json"
  echo "== $1: exit $2 after $3 s"
}
step() { # name limit log command...
  local name=$1 limit=$2 log=$3 start=$SECONDS rc
  shift 3
  echo "== $name (limit $limit s)"
  # SIGINT first: pytest then still writes its junit XML and summary, python its finished phases
  timeout -s INT -k 20 "$limit" "$@" 2>&1 | tee -a "$log"
  rc=${PIPESTATUS[0]}
  record "$name" "$rc" $((SECONDS - start))
  return "$rc"
}

{
  date -u
  nvidia-smi || echo "nvidia-smi: not available"
  if compgen -G "$WHEELS/*.whl" >/dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$WHEELS"/*.whl &&
      echo "installed into $SITE:" "$WHEELS"/*.whl
  else
    echo "no $WHEELS/ carried: using the interpreter's own packages"
  fi
} >"$OUTDIR/versions.txt" 2>&1
export PYTHONPATH="$SITE:scripts:.${PYTHONPATH:+:$PYTHONPATH}"
if ! step versions 60 "$OUTDIR/versions.txt" "$PY" scripts/gpu_versions.py --device "$DEVICE"; then
  echo "gpu_check: wrong versions (see $OUTDIR/versions.txt): nothing else is run" >&2
  exit "$worst"
fi

step bench "${GPU_CHECK_BENCH_S:-270}" "$OUTDIR/bench.log" \
  "$PY" scripts/gpu_check.py --device "$DEVICE" --out "$OUTDIR" --budget $((${GPU_CHECK_BENCH_S:-270} * 3 / 4)) "$@"

step batching "${GPU_CHECK_BATCHING_S:-140}" "$OUTDIR/bench.log" \
  "$PY" scripts/gpu_batching.py --device "$DEVICE" --out "$OUTDIR" "$@"

timeout_flag=()
"$PY" -c "import pytest_timeout" 2>/dev/null && timeout_flag=(--timeout "${GPU_CHECK_TEST_TIMEOUT:-90}")
# shellcheck disable=SC2086
# Left out on the device: the negative controls ("..._is_detected": 2000 sequential runs each, showing the
# chi-square's power, which no device changes) and the unequal-width chi-squares (some 800 joint cells, so their
# runs cannot be lowered; the greedy unequal-width tests still run there). The CPU suite runs them all.
step tests "${GPU_CHECK_TESTS_S:-120}" "$OUTDIR/tests.log" "$PY" -m pytest -q -p cuda_plugin -p no:cacheprovider \
  -m "not real and not browser" -k "${GPU_CHECK_DESELECT:-not detected and not unequal_widths_follow}" \
  "${timeout_flag[@]}" --junit-xml "$OUTDIR/junit.xml" --durations 15 $TESTS

echo "gpu_check: done, worst exit code $worst; results in $OUTDIR: $(ls "$OUTDIR" | tr '\n' ' ')"
exit "$worst"
