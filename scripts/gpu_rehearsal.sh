#!/usr/bin/env bash
# Rehearse scripts/gpu_check.sh on this CPU under the GPU machine's conditions, so it works the first time a GPU is lent:
#   - an interpreter whose transformers is the device's 5.17 (below the project's 5.20 floor), with the device's
#     huggingface_hub 1.33.0, tokenizers 0.23.2 and safetensors 0.8.0 and pytest-timeout: a venv made once under
#     $SPECVIZ_REHEARSAL_CACHE (default ~/.cache/specviz/gpu-rehearsal) with those (and what they need that the project's venv lacks: httpx) installed from PyPI. Its torch
#     (CPU, 2.13) and the rest are borrowed from the project's venv through a .pth file, which comes after the venv's
#     own site-packages, so the venv's transformers 5.17 is the one imported. Differences from the device: Python
#     3.11 here (3.12 there), torch 2.13 CPU (2.11 + CUDA 13 there), no GPU;
#   - first, without the carried wheel, scripts/gpu_versions.py must refuse (exit 3, naming 5.20 and what to do);
#   - then the .whl/ transformers 5.24 wheel (scripts/gpu_wheels.sh fills it if absent) installed exactly as the
#     script does on the device (--no-index --no-deps --target into a fresh folder, first on PYTHONPATH), and the
#     whole script run end to end with --device cpu and scaled-down models and fewer lossless runs (its own test list);
#   - last, its outputs checked: every step exit 0, at most 8 files, transformers 5.24 from the carried folder, the
#     batching result with its rows and greedy identity.
# Usage: scripts/gpu_rehearsal.sh [OUTDIR]    (tests/scripts/test_gpu_check.py runs it; about 1-3 minutes once the venv exists)
set -euo pipefail
cd "$(dirname "$0")/.."
PROJECT_PY=${PROJECT_PYTHON:-.venv/bin/python}
[ -x "$PROJECT_PY" ] || PROJECT_PY=/work/main/.venv/bin/python
CACHE=${SPECVIZ_REHEARSAL_CACHE:-$HOME/.cache/specviz/gpu-rehearsal}
VENV=$CACHE/venv-transformers-5.17
OUTDIR=$(realpath -m "${1:-out/gpu-rehearsal}")
BORROWED_PTH=zz-borrowed-from-project-venv.pth
DEVICE_PACKAGES="transformers==5.17.0 huggingface_hub==1.33.0 tokenizers==0.23.2 safetensors==0.8.0 pytest-timeout"

if [ ! -x "$VENV/bin/python" ]; then
  echo "== making the device-like venv in $VENV"
  base=$("$PROJECT_PY" -c 'import sys; print(sys._base_executable)')
  "$base" -m venv "$VENV.tmp"
  borrowed=$("$PROJECT_PY" -c 'import site; print(site.getsitepackages()[0])')
  own=$("$VENV.tmp/bin/python" -c 'import site; print(site.getsitepackages()[0])')
  echo "$borrowed" >"$own/$BORROWED_PTH"
  # with their dependencies: pip installs in the venv only what the borrowed folder lacks or has at another version
  # shellcheck disable=SC2086
  "$VENV.tmp/bin/python" -m pip install -q $DEVICE_PACKAGES
  rm -rf "$VENV" && mv "$VENV.tmp" "$VENV"
fi
PY=$VENV/bin/python
# The venv outlives the checkout that made it (a clean clone, since deleted): it borrows from this run's project venv.
"$PROJECT_PY" -c 'import site; print(site.getsitepackages()[0])' \
  >"$("$PY" -c 'import site; print(site.getsitepackages()[0])')/$BORROWED_PTH"
"$PY" -c "import transformers; assert transformers.__version__.startswith('5.17'), transformers.__version__"

echo "== without the carried wheel: the version check must refuse"
if refusal=$(PYTHONPATH= "$PY" scripts/gpu_versions.py --device cpu 2>&1); then
  echo "gpu_rehearsal: gpu_versions.py accepted transformers 5.17" >&2
  exit 1
fi
grep -q "below 5.20" <<<"$refusal" || {
  echo "gpu_rehearsal: unexpected refusal: $refusal" >&2
  exit 1
}
echo "refused, as it should: $(grep 'below 5.20' <<<"$refusal" | cut -c1-100)..."

compgen -G ".whl/pydantic-*.whl" >/dev/null || PYTHON=$PROJECT_PY scripts/gpu_wheels.sh
SITE=$(mktemp -d /tmp/specviz-rehearsal-site.XXXXXX)
# The carried wheels that install on this Python: the pure-Python ones (pydantic_core's is built for the device's
# 3.12; the same version is borrowed from the project's venv here).
WHEELS=$(mktemp -d /tmp/specviz-rehearsal-wheels.XXXXXX)
cp .whl/*-none-any.whl "$WHEELS"/
rm -rf "$OUTDIR" && mkdir -p "$OUTDIR"
echo "== scripts/gpu_check.sh, as on the device (results in $OUTDIR)"
rc=0
# The tests step gets more time than on the device (GPU_CHECK_TESTS_S): this CPU, shared and single-threaded here,
# is not the GPU whose time the step's 150 s are sized for; what the rehearsal checks is that every step runs.
PYTHON=$PY OUT=$OUTDIR GPU_CHECK_SITE=$SITE GPU_CHECK_WHEELS=$WHEELS SPECVIZ_LOSSLESS_RUNS=${SPECVIZ_LOSSLESS_RUNS:-150} OMP_NUM_THREADS=1 \
  GPU_CHECK_TESTS_S=${GPU_CHECK_TESTS_S:-420} \
  scripts/gpu_check.sh --device cpu --dry-run --compile on --max-new-tokens 8 --per-category 1 --curve-gammas 3 || rc=$?
rm -rf "$SITE" "$WHEELS"

echo "== checking what came back"
"$PROJECT_PY" - "$OUTDIR" "$rc" <<'PY'
import json, sys
from pathlib import Path

out, rc = Path(sys.argv[1]), int(sys.argv[2])
files = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
status = json.loads((out / "status.json").read_text())
phases = json.loads((out / "gpu-check-cpu.json").read_text())["phases"]
batching = json.loads((out / "batching_cpu.json").read_text())
versions = (out / "versions.txt").read_text()
problems = [f"exit {rc}"] if rc else []
problems += [f"{len(files)} files (at most 8)"] if len(files) > 8 else []
problems += [f"{name}: exit {s['rc']}" for name, s in status.items() if name != "worst" and s["rc"]]
problems += [f"{name}: {s['status']}" for name, s in phases.items() if s["status"] != "ok"]
problems += [] if [r["batch"] for r in batching["rows"]] == [1, 2] else ["batching: not B = 1, 2"]
problems += [] if all(r["greedy_identical"] for r in batching["rows"]) else ["batching: greedy rows differ"]
problems += [] if "transformers 5.24" in versions and "specviz-rehearsal-site" in versions else ["not 5.24 carried"]
print("files:", ", ".join(map(str, files)))
print("steps:", status)
print("phases:", {name: (s["status"], s["seconds"]) for name, s in phases.items()})
print("gpu_rehearsal:", "; ".join(problems) if problems else "OK")
sys.exit(1 if problems else 0)
PY
