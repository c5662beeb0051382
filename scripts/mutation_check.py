"""A small mutation check: flip one operator or constant at a time and see whether the fast tests notice.

Mutations (one per run): comparisons < <= > >= == != into their neighbour, + - * / into their opposite,
the constants 0 and 1 into each other and any other integer n into n + 1 (a * that unpacks or marks keyword-only
parameters is left alone). Each mutant is written into a scratch copy of the repository (the working tree is never
touched) and the file's fast tiny-model tests run there with -x -q and a timeout; a failure or a timeout kills the
mutant. Each file's mutants are sampled with its own fixed seed, so a file's sample does not depend on which other
files run. --jobs N runs N mutants at once, each in its own scratch copy; each run is a fork of this process, which
imports torch once. Survivors are listed with their line and the mutated text; --json writes every result, and
--retry FILE.json reruns only that run's survivors (tests are only ever added, so a killed mutant stays killed).

    nice -n 10 python scripts/mutation_check.py --per-file 25 --seed 0 --jobs 2 --json out/before.json
    nice -n 10 python scripts/mutation_check.py --retry out/before.json --jobs 2 --json out/after.json
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import time
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FAST = ["-m", "not real and not browser", "-x", "-q", "-p", "no:cacheprovider"]
TESTS = {  # the tiny-model tests that exercise each file, quick unit tests first; slow chi-square runs left out
    "specviz/decoding/engine.py": [
        "tests/drafters/test_eagle.py::test_the_heads_cache_holds_one_true_entry_per_committed_token_but_the_newest",
        "tests/decoding/test_engine.py",
        "tests/decoding/test_alternatives.py",
    ],
    "specviz/decoding/sampling.py": [
        "tests/decoding/test_sampling.py",
        "tests/decoding/test_lossless.py::test_vectorised_sampler_is_lossless_and_the_broken_one_is_not",
        "tests/decoding/test_alternatives.py",
    ],
    "specviz/decoding/kvcache.py": [
        "tests/decoding/test_kvcache.py",
        "tests/decoding/test_compiled.py::test_compiled_steps_fill_the_static_cache_exactly",
        "tests/decoding/test_engine.py",
        "tests/decoding/test_alternatives.py",
    ],
    "specviz/decoding/acceptance.py": ["tests/decoding/test_alternatives.py", "tests/decoding/test_engine.py"],
    "specviz/decoding/tree.py": ["tests/decoding/test_tree.py", "tests/decoding/test_alternatives.py"],
}
FLIPS = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "==", "+": "-", "-": "+", "*": "/", "/": "*"}


def mutants(source: str) -> list[tuple[int, int, str, str]]:
    """(line, column, old, new) for every operator and integer constant outside strings and comments."""
    found, previous = [], None
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        line, col = tok.start
        # A * after ( , or [ unpacks or marks keyword-only parameters: no arithmetic to flip.
        star_marker = tok.string == "*" and previous in ("(", ",", "[")
        if tok.type not in (tokenize.NL, tokenize.COMMENT):
            previous = tok.string if tok.type == tokenize.OP else None
        if tok.type == tokenize.OP and tok.string in FLIPS and not star_marker:
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


def sample(name: str, per_file: int, seed: int) -> list[tuple[int, int, str, str]]:
    found = mutants((ROOT / name).read_text())
    if per_file and per_file < len(found):
        found = sorted(random.Random(f"{seed}:{name}").sample(found, per_file))
    return found


def preload() -> None:
    """Import the heavy libraries once: each mutant's tests run in a fork of this process, which saves the ~8 s of
    imports per mutant. specviz itself is never imported here, so every fork imports the mutated copy."""
    import pytest  # noqa: F401
    import transformers  # noqa: F401
    from transformers import LlamaForCausalLM, Qwen2ForCausalLM  # noqa: F401


def start_tests(scratch: Path, tests: list[str]) -> int:
    """Fork; the child runs pytest in the scratch copy, silently, and exits with its status."""
    pid = os.fork()
    if pid:
        return pid
    code = 99
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1), os.dup2(devnull, 2)
        os.chdir(scratch)
        sys.path.insert(0, str(scratch))
        # No bytecode: a mutant of the same size written within the same second would otherwise reuse a stale .pyc.
        sys.dont_write_bytecode = True
        import pytest

        code = int(pytest.main([*FAST, *tests]))
    finally:
        os._exit(code)


def present(scratch: Path, test: str) -> bool:
    """The test file, or the test function a node id names, is in this copy (--tests-from may predate it)."""
    path, _, name = test.partition("::")
    file = scratch / path
    return file.exists() and (not name or f"def {name.split('[')[0]}(" in file.read_text())


def run_all(work: list[tuple[str, tuple]], scratches: list[Path], timeout: int, save) -> list[dict]:
    """Run every mutant, as many at once as there are scratch copies; a failure or a timeout kills a mutant.
    save(results) after each one, so that a run cut short still leaves its results."""
    free, running, results, pending = list(scratches), {}, [], list(work)
    while pending or running:
        while pending and free:
            name, mutant = pending.pop(0)
            scratch = free.pop()
            (scratch / name).write_text(apply((ROOT / name).read_text(), mutant))
            tests = [t for t in TESTS[name] if present(scratch, t)]
            running[start_tests(scratch, tests)] = (name, mutant, scratch, time.monotonic())
        time.sleep(0.2)
        for pid, (name, mutant, scratch, started) in list(running.items()):
            done, status = os.waitpid(pid, os.WNOHANG)
            timed_out = not done and time.monotonic() - started > timeout
            if timed_out:
                os.kill(pid, signal.SIGKILL)
                done, status = os.waitpid(pid, 0)
            if done:
                del running[pid]
                (scratch / name).write_text((ROOT / name).read_text())
                free.append(scratch)
                results.append(result(name, mutant, status != 0, timed_out, seconds=time.monotonic() - started))
                save(results)
    return results


def result(name: str, mutant: tuple, killed: bool, timed_out: bool, seconds: float) -> dict:
    """A timeout counts as killed (a mutant may loop forever) but is flagged: on a busy machine it may be slowness."""
    line, col, old, new = mutant
    text = apply((ROOT / name).read_text(), mutant).splitlines()[line - 1].strip()
    verdict = "killed (timeout)" if timed_out else "killed" if killed else "SURVIVED"
    print(f"  {name}:{line} {old} -> {new}: {verdict} ({seconds:.0f} s)", flush=True)
    return dict(file=name, line=line, col=col, old=old, new=new, text=text, killed=killed, timed_out=timed_out)


def report(results: list[dict], files: list[str]) -> None:
    for name in files:
        mine = [r for r in results if r["file"] == name]
        timeouts = sum(r["timed_out"] for r in mine)
        print(f"{name}: {sum(r['killed'] for r in mine)}/{len(mine)} killed ({timeouts} by timeout)")
        for r in mine:
            if not r["killed"]:
                print(f"    survived {name}:{r['line']} {r['old']} -> {r['new']}:  {r['text']}")
    dead = sum(r["killed"] for r in results)
    print(f"all: {dead}/{len(results)} killed ({100 * dead / max(len(results), 1):.0f}%)")


def make_scratch(tmp: Path, index: int, tests_from: Path | None) -> Path:
    scratch = tmp / f"repo{index}"
    shutil.copytree(ROOT, scratch, ignore=shutil.ignore_patterns(".git", ".venv", "__pycache__", "out"))
    if tests_from:
        shutil.rmtree(scratch / "tests")
        shutil.copytree(tests_from, scratch / "tests")
    return scratch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-file", type=int, default=12, help="mutants sampled per file (0: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=int, default=400, help="seconds per mutant")
    parser.add_argument("--jobs", type=int, default=1, help="mutants run at once, each in its own scratch copy")
    parser.add_argument("--tests-from", type=Path, help="a tests/ folder to use instead of the working tree's")
    parser.add_argument("--json", type=Path, help="write every mutant's result here")
    parser.add_argument("--retry", type=Path, help="a --json file: rerun its survivors, keep its killed mutants")
    parser.add_argument("files", nargs="*", default=list(TESTS))
    args = parser.parse_args()
    previous = json.loads(args.retry.read_text()) if args.retry else []
    files = list(dict.fromkeys(r["file"] for r in previous)) if args.retry else args.files
    if args.retry:
        work = [(r["file"], (r["line"], r["col"], r["old"], r["new"])) for r in previous if not r["killed"]]
    else:
        work = [(name, mutant) for name in files for mutant in sample(name, args.per_file, args.seed)]
    kept = [r for r in previous if r["killed"]]

    def save(done: list[dict]) -> None:
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(kept + done, indent=1))

    preload()
    with tempfile.TemporaryDirectory() as tmp:
        scratches = [make_scratch(Path(tmp), index, args.tests_from) for index in range(args.jobs)]
        results = kept + run_all(work, scratches, args.timeout, save)
    results.sort(key=lambda r: (files.index(r["file"]), r["line"], r["col"]))
    report(results, files)


if __name__ == "__main__":
    main()
