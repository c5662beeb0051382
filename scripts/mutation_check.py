"""A small mutation check: flip one operator or constant at a time and see whether the fast tests notice.

Mutations (one per run): comparisons < <= > >= == != into their neighbour, + - * / into their opposite,
the constants 0 and 1 into each other and any other integer n into n + 1. Each mutant is written into a scratch
copy of the repository (the working tree is never touched) and the file's fast tiny-model tests run there with
-x -q and a timeout; a failure or a timeout kills the mutant. Mutants are sampled with a fixed seed.

    nice -n 10 python scripts/mutation_check.py --per-file 12 --seed 0 [--tests-from DIR]
"""

from __future__ import annotations

import argparse
import io
import random
import shutil
import subprocess
import sys
import tempfile
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FAST = ["-m", "not real and not browser", "-x", "-q", "-p", "no:cacheprovider"]
TESTS = {  # the tiny-model tests that exercise each file; slow chi-square runs left out
    "specviz/engine.py": ["tests/test_engine.py", "tests/test_alternatives.py"],
    "specviz/sampling.py": [
        "tests/test_sampling.py",
        "tests/test_lossless.py::test_vectorised_sampler_is_lossless_and_the_broken_one_is_not",
        "tests/test_alternatives.py",
    ],
    "specviz/kvcache.py": ["tests/test_engine.py", "tests/test_alternatives.py"],
    "specviz/acceptance.py": ["tests/test_alternatives.py", "tests/test_engine.py"],
}
FLIPS = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "==", "+": "-", "-": "+", "*": "/", "/": "*"}


def mutants(source: str) -> list[tuple[int, int, str, str]]:
    """(line, column, old, new) for every operator and integer constant outside strings and comments."""
    found = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        line, col = tok.start
        if tok.type == tokenize.OP and tok.string in FLIPS:
            found.append((line, col, tok.string, FLIPS[tok.string]))
        elif tok.type == tokenize.NUMBER and tok.string.isdigit():
            n = int(tok.string)
            found.append((line, col, tok.string, {0: "1", 1: "0"}.get(n, str(n + 1))))
    return found


def apply(source: str, mutant: tuple[int, int, str, str]) -> str:
    line, col, old, new = mutant
    lines = source.splitlines(keepends=True)
    text = lines[line - 1]
    assert text[col : col + len(old)] == old
    lines[line - 1] = text[:col] + new + text[col + len(old) :]
    return "".join(lines)


def killed(scratch: Path, tests: list[str], timeout: int) -> bool:
    try:
        result = subprocess.run(
            [sys.executable, "-m", "pytest", *FAST, *tests], cwd=scratch, capture_output=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return True
    return result.returncode != 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-file", type=int, default=12, help="mutants sampled per file (0: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=int, default=90, help="seconds per mutant")
    parser.add_argument("--tests-from", type=Path, help="a tests/ folder to use instead of the working tree's")
    parser.add_argument("files", nargs="*", default=list(TESTS))
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp) / "repo"
        shutil.copytree(ROOT, scratch, ignore=shutil.ignore_patterns(".git", ".venv", "__pycache__"))
        if args.tests_from:
            shutil.rmtree(scratch / "tests")
            shutil.copytree(args.tests_from, scratch / "tests")
        total_killed = total = 0
        for name in args.files:
            source = (ROOT / name).read_text()
            chosen = mutants(source)
            if args.per_file:
                chosen = sorted(rng.sample(chosen, min(args.per_file, len(chosen))))
            tests = [t for t in TESTS[name] if (scratch / t.split("::")[0]).exists()]
            dead = 0
            for mutant in chosen:
                (scratch / name).write_text(apply(source, mutant))
                dead_now = killed(scratch, tests, args.timeout)
                dead += dead_now
                print(
                    f"  {name}:{mutant[0]} {mutant[2]} -> {mutant[3]}: {'killed' if dead_now else 'SURVIVED'}",
                    flush=True,
                )
            (scratch / name).write_text(source)
            print(f"{name}: {dead}/{len(chosen)} killed", flush=True)
            total_killed, total = total_killed + dead, total + len(chosen)
        print(f"all: {total_killed}/{total} killed ({100 * total_killed / max(total, 1):.0f}%)")


if __name__ == "__main__":
    main()
