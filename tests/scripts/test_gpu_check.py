"""The GPU check, rehearsed on the CPU so it works the first time a GPU is lent.

scripts/gpu_rehearsal.sh runs the whole scripts/gpu_check.sh once (a module fixture) in a venv with the device's
transformers 5.17, the carried 5.24 wheel installed as on the device: its benchmark step is scripts/gpu_check.py
and its batching step scripts/gpu_batching.py, with the scaled-down random pairs and options below, so their
outputs are read from that one run. That venv (and the wheel) come from PyPI once, then from a cache: without
either the rehearsal skips, and the two scripts are run here directly, with the project's own interpreter.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from specviz.traces.batching import load_batching

ROOT = Path(__file__).resolve().parents[2]
REHEARSAL_CACHE = Path(os.environ.get("SPECVIZ_REHEARSAL_CACHE", Path.home() / ".cache" / "specviz" / "gpu-rehearsal"))
PHASES = ["eager", "eager_constant_gamma4", "eager_alternatives", "identity_fp32", "compiled"]  # running order


CHECK_OPTIONS = ["--device", "cpu", "--dry-run", "--compile", "on", "--max-new-tokens", "8", "--per-category", "1"]
CHECK_OPTIONS += ["--curve-gammas", "3"]  # the options scripts/gpu_rehearsal.sh passes to both scripts


@dataclass
class Rehearsal:
    done: subprocess.CompletedProcess
    out: Path
    ready: bool  # its venv and wheel were there: the run is the device's script, as the device runs it

    @property
    def tail(self) -> str:
        return self.done.stdout[-4000:] + self.done.stderr[-3000:]

    @property
    def ran(self) -> bool:
        """Its benchmark and batching steps ran to the end: their outputs can be read."""
        return self.done.returncode == 0


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory) -> Rehearsal:
    env = dict(os.environ, SPECVIZ_REHEARSAL_CACHE=str(REHEARSAL_CACHE), PROJECT_PYTHON=sys.executable)
    # The tests step on one file: the others run in this suite already (with this venv's transformers); what the
    # rehearsal adds is that the step runs under the device's transformers (the static cache differs most there).
    env.setdefault("GPU_CHECK_TESTS", "tests/decoding/test_compiled.py")
    out = tmp_path_factory.mktemp("rehearsal") / "out"
    command = ["scripts/gpu_rehearsal.sh", str(out)]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    venv_ready = (REHEARSAL_CACHE / "venv-transformers-5.17" / "bin" / "python").exists()
    wheel_ready = any((ROOT / ".whl").glob("transformers-5.24*.whl"))
    return Rehearsal(done, out, venv_ready and wheel_ready)


def run_here(script: str, out: Path, options: list[str]) -> str:
    """The script with the project's interpreter (the rehearsal could not run): its stdout."""
    command = [sys.executable, script, *options, "--out", str(out)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def test_gpu_check_script_runs_on_cpu_with_compiled_steps(rehearsal, tmp_path):
    """scripts/gpu_check.py end to end: every phase, the compiled one included, and its printed summary."""
    if rehearsal.ran:
        out, printed = rehearsal.out, (rehearsal.out / "bench.log").read_text()
    else:
        out, printed = tmp_path, run_here("scripts/gpu_check.py", tmp_path, CHECK_OPTIONS)
    assert "Verify-cost curve" in printed and "cost ratio c" in printed
    assert "constant gamma 4, confidence stop off" in printed and "same = NO is expected" in printed

    doc = json.loads((out / "gpu-check-cpu.json").read_text())
    assert list(doc["phases"]) == PHASES and all(s["status"] == "ok" for s in doc["phases"].values())
    results = doc["results"]
    assert list(results) == PHASES
    for label, run in results.items():
        overall = run["overall"]
        assert overall["identical"], label  # greedy: speculative text is the baseline's, compiled or not
        assert overall["new_tokens"]["baseline"] == overall["new_tokens"]["speculative"] == 16
        assert run["verify_curve"]["cost_ratio_c"] > 0
    for label in ("eager", "compiled"):
        curve = results[label]["verify_curve"]
        assert curve["gamma"] == [0, 1, 2, 3] and len(curve["target_seconds"]) == 4
        assert all(seconds > 0 for seconds in curve["target_seconds"])
    constant, alternatives = results["eager_constant_gamma4"], results["eager_alternatives"]
    assert constant["settings"]["config"]["draft_confidence"] == 0.0  # the confidence stop would make it gamma 1
    assert alternatives["settings"]["config"]["alternatives"] == 2
    for run in (constant, alternatives):  # rounds draft several tokens (fewer only near max_new_tokens)
        assert run["overall"]["mean_gamma"] > 1
    compiled = doc["phases"]["compiled"]
    assert compiled["compiled_steps"]["target"] > 0 and compiled["compiled_steps"]["draft"] > 0
    assert "compile_times" in compiled["dynamo"] and compiled["compile_and_warm_seconds"] > 0
    assert (out / "verify_curve_cpu.json").is_file()


def test_rehearsal_imitates_the_device(rehearsal):
    if rehearsal.done.returncode and not rehearsal.ready:
        pytest.skip(f"the rehearsal's venv or wheel could not be fetched from PyPI:\n{rehearsal.tail[-1500:]}")
    done, out = rehearsal.done, rehearsal.out
    assert done.returncode == 0, rehearsal.tail
    assert "refused, as it should" in done.stdout and "gpu_rehearsal: OK" in done.stdout
    files = sorted(p.name for p in out.rglob("*") if p.is_file())
    assert len(files) <= 8 and {
        "status.json",
        "versions.txt",
        "junit.xml",
        "gpu-check-cpu.json",
        "batching_cpu.json",
    } <= set(files)
    status = json.loads((out / "status.json").read_text())
    assert status["worst"] == 0 and list(status) == ["versions", "bench", "batching", "tests", "worst"]
    batching = load_batching(out / "batching_cpu.json")
    assert [row["batch"] for row in batching["rows"]] == [1, 2] and batching["curve"]["tokens"][-1] == 32
    assert "transformers 5.24" in (out / "versions.txt").read_text()


def test_gpu_batching_step_runs_on_cpu(rehearsal, tmp_path):
    """gpu_check.sh's batching step, scaled down: a loadable batching result with greedy-identical rows (gpu_check.py's
    options are passed on too, and ignored)."""
    if rehearsal.ran:
        out = rehearsal.out
    else:
        out = tmp_path
        run_here("scripts/gpu_batching.py", tmp_path, CHECK_OPTIONS)
    doc = load_batching(out / "batching_cpu.json")
    assert [row["batch"] for row in doc["rows"]] == [1, 2] and doc["curve"]["tokens"][-1] == 32
    assert all(row["greedy_identical"] for row in doc["rows"])
    assert "random Qwen2" in doc["target"]


# The GPU machine's image, as read there on 2026-11-17 (/work/.library/device/KINDS.md): the distributions that the
# check's code may import without carrying them. pydantic is not among them (the first H100 run stopped there).
DEVICE_HAS = """accelerate filelock fsspec hf-xet huggingface-hub idna iniconfig jinja2 markupsafe mpmath networkx
numpy packaging pandas pluggy psutil pygments pytest pytest-timeout python-dateutil pytz pyyaml regex requests
safetensors setuptools six sympy tokenizers torch tqdm transformers triton typer typing-extensions tzdata
urllib3 click shellingham rich markdown-it-py mdurl annotated-doc certifi charset-normalizer httpx httpcore h11
anyio sniffio""".split()


IMPORT_SCAN = """
import ast, importlib, json, pathlib, sys
from importlib.metadata import packages_distributions

for name in sys.argv[1:]:
    importlib.import_module(name)
root, tops = pathlib.Path.cwd().resolve(), set()
for module in list(sys.modules.values()):  # the project's own files that were loaded, and what they import
    path = pathlib.Path(getattr(module, "__file__", None) or "/").resolve()
    if root not in path.parents or ".venv" in path.parts or not path.is_file() or path.suffix != ".py":
        continue
    nodes = ast.parse(path.read_text()).body  # module-level imports (a function's own, e.g. gguf's, may never run)
    while nodes:
        node = nodes.pop()
        if isinstance(node, ast.Import):
            tops |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            tops.add(node.module.split(".")[0])
        elif isinstance(node, (ast.If, ast.Try)):
            nodes += node.body + node.orelse + getattr(node, "handlers", []) + getattr(node, "finalbody", [])
        elif isinstance(node, ast.ExceptHandler):
            nodes += node.body
dists = packages_distributions()
print(json.dumps(sorted({d for top in tops - set(sys.stdlib_module_names) for d in dists.get(top, [])})))
"""


def check_tests() -> list[str]:
    """The test modules scripts/gpu_check.sh runs, as module names under tests/ (decoding.test_engine, ...)."""
    listed = re.search(r"TESTS=\$\{GPU_CHECK_TESTS:-([^}]*)\}", (ROOT / "scripts" / "gpu_check.sh").read_text())
    paths = [Path(path).relative_to("tests").with_suffix("") for path in listed.group(1).split() if path != "\\"]
    return [".".join(path.parts) for path in paths]


def test_the_carried_wheels_cover_what_the_device_lacks():
    """Every distribution that the check's scripts and CUDA tests import is on the device or in scripts/gpu_wheels.sh
    (scripts/gpu_versions.py says so there too, but only once the machine has started)."""
    tests = check_tests()
    command = [sys.executable, "-c", IMPORT_SCAN, "gpu_check", "gpu_batching", "gpu_versions", "cuda_plugin", *tests]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(["scripts", "tests", "."]))
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    normal = lambda name: name.lower().replace("_", "-")
    imported = {normal(name) for name in json.loads(done.stdout.splitlines()[-1])}
    wheels = (ROOT / "scripts" / "gpu_wheels.sh").read_text()
    carried = {normal(match) for match in re.findall(r"([A-Za-z0-9_.-]+)==", wheels)}
    assert {"pydantic", "torch", "transformers"} <= imported  # the scan sees what the first H100 run lacked
    assert imported - set(DEVICE_HAS) - carried == set()
