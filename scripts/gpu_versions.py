"""Within seconds of starting the GPU check: are torch, CUDA and transformers the ones the project needs?

Imports nothing of specviz (an old transformers may fail there with an obscure error). Checks that
transformers is at least 5.20 (below it the engine's `cache=` keyword is swallowed by **kwargs: no KV
cache is used, and StaticCache has no crop), that every package transformers itself requires is
installed at a version it accepts, that the project's other needs (PROJECT_NEEDS: pydantic, which the
device lacks, and the rest) are installed, and, for `--device cuda`, that torch was built with CUDA and sees a
GPU. Prints the versions (one line each) and, on a failure, what to do; exits 3 then.

Usage: python scripts/gpu_versions.py [--device cuda|cpu]
"""

from __future__ import annotations

import argparse
import platform
import sys
from importlib import metadata

TRANSFORMERS_FLOOR = (5, 20)
# What the check's code imports beyond torch and transformers (requirements.txt; streamlit, plotly and gguf are the
# app's and the converter's, not imported there). The device lacked pydantic (2026-12-06): scripts/gpu_wheels.sh
# carries it; tests/scripts/test_gpu_check.py keeps this list, the wheels and the device's packages in step.
PROJECT_NEEDS = ("accelerate>=1.10", "safetensors", "numpy", "psutil", "pydantic>=2")
FIX = (
    "fill .whl/ here with scripts/gpu_wheels.sh, carry .whl to the GPU machine, and start the check "
    "with scripts/gpu_check.sh (it installs .whl/*.whl with --no-index --no-deps --target and puts that "
    "folder first on PYTHONPATH)"
)


def release(version: str) -> tuple[int, ...]:
    """'5.24.0.dev0' -> (5, 24, 0): the leading numeric parts."""
    parts = []
    for piece in version.split("+")[0].split("."):
        digits = "".join(ch for ch in piece if ch.isdigit()) if piece[:1].isdigit() else ""
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def installed() -> set[str]:
    return {(d.metadata["Name"] or "").lower() for d in metadata.distributions()}


def unmet_requirements(dist: str) -> list[str]:
    """`dist`'s own Requires-Dist (extras left out) that the installed packages do not satisfy."""
    return unmet(metadata.requires(dist) or [])


def unmet(requirements) -> list[str]:
    """The requirement strings that the installed packages do not satisfy (markers evaluated without extras)."""
    from packaging.requirements import Requirement

    unmet = []
    for line in requirements:
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        try:
            found = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            unmet.append(f"{req} (not installed)")
            continue
        if req.specifier and not req.specifier.contains(found, prereleases=True):
            unmet.append(f"{req} (installed: {found})")
    return unmet


def problems(device: str) -> list[str]:
    import torch
    import transformers

    print(f"python {platform.python_version()} ({sys.executable})")
    print(f"torch {torch.__version__} (CUDA build {torch.version.cuda}, CUDA available {torch.cuda.is_available()})")
    print(f"transformers {transformers.__version__} ({transformers.__file__})")
    for name in ("huggingface_hub", "tokenizers", "safetensors", "regex", "pydantic", "pytest", "pytest-timeout"):
        try:
            print(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            print(f"{name} not installed")
    found = []
    if release(transformers.__version__) < TRANSFORMERS_FLOOR:
        floor = ".".join(map(str, TRANSFORMERS_FLOOR))
        found.append(f"transformers {transformers.__version__} is below {floor}: {FIX}")
    found += [f"transformers needs {req}" for req in unmet_requirements("transformers")]
    found += [f"specviz needs {need}: add it to scripts/gpu_wheels.sh, then {FIX}" for need in unmet(PROJECT_NEEDS)]
    found += [f"pydantic needs {req}" for req in unmet_requirements("pydantic")] if "pydantic" in installed() else []
    if device == "cuda" and (torch.version.cuda is None or not torch.cuda.is_available()):
        found.append(f"torch {torch.__version__} has no usable CUDA (built with {torch.version.cuda})")
    elif device == "cuda":
        print(f"GPU {torch.cuda.get_device_name(0)}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    found = problems(parser.parse_args(argv).device)
    for problem in found:
        print(f"gpu_versions: {problem}", file=sys.stderr)
    return 3 if found else 0


if __name__ == "__main__":
    sys.exit(main())
