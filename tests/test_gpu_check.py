"""scripts/gpu_check.py, the GPU check's benchmark, run end to end on the CPU with scaled-down random pairs.

The GPU machine is lent rarely and briefly: this keeps the script from rotting between loans.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_gpu_check_script_runs_on_cpu_with_compiled_steps(tmp_path):
    command = [
        sys.executable,
        "scripts/gpu_check.py",
        "--device",
        "cpu",
        "--dry-run",
        "--compile",
        "on",
        "--max-new-tokens",
        "8",
        "--per-category",
        "1",
        "--curve-gammas",
        "3",
        "--out",
        str(tmp_path),
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Verify-cost curve" in done.stdout and "cost ratio c" in done.stdout

    results = json.loads((tmp_path / "gpu-check-cpu.json").read_text())
    assert {"eager", "compiled"} <= set(results)
    for label, run in results.items():
        overall = run["overall"]
        assert overall["identical"], label  # greedy: speculative text is the baseline's, compiled or not
        assert overall["new_tokens"]["baseline"] == overall["new_tokens"]["speculative"] == 16
        curve = run["verify_curve"]
        assert curve["gamma"] == [0, 1, 2, 3] and len(curve["target_seconds"]) == 4
        assert all(seconds > 0 for seconds in curve["target_seconds"]) and curve["cost_ratio_c"] > 0
    assert (tmp_path / "verify_curve_cpu.json").is_file()
