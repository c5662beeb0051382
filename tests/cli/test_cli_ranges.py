"""Every number the command line takes has its range in its argparse type (issue 56): at each bound it is taken,
past it refused with exit status 2 and one line naming the option and the range, before anything loads. Parse-only:
no bench or training runs."""

from __future__ import annotations

import pytest

from specviz.__main__ import build_parser

REQUIRED = {"generate": ["--prompt", "x"]}


def subparsers():
    parser = build_parser()
    (commands,) = [a for a in parser._actions if a.dest == "command"]
    return commands.choices


def numeric_options():
    """(command, flag, bounds) for every option whose value is a number (by its type or its default)."""
    found = []
    for command, sub in subparsers().items():
        for action in sub._actions:
            if not action.option_strings or action.nargs == 0:
                continue
            numeric = action.type in (int, float) or hasattr(action.type, "bounds")
            numeric |= isinstance(action.default, (int, float)) and not isinstance(action.default, bool)
            if numeric:
                found.append((command, action.option_strings[-1], getattr(action.type, "bounds", None)))
    return found


OPTIONS = numeric_options()


def test_every_numeric_option_has_bounds():
    assert len(OPTIONS) > 30, OPTIONS
    unbounded = [(command, flag) for command, flag, bounds in OPTIONS if bounds is None]
    assert unbounded == []


def parse(command: str, flag: str, value: str, capsys) -> tuple[int, str]:
    try:
        build_parser().parse_args([command, *REQUIRED.get(command, []), f"{flag}={value}"])
    except SystemExit as exc:
        return int(exc.code), capsys.readouterr().err
    return 0, capsys.readouterr().err


def cases():
    for command, flag, bounds in OPTIONS:
        if bounds is None:  # test_every_numeric_option_has_bounds names it
            continue
        lo, hi, lo_open, hi_open = bounds
        whole = isinstance(lo, int) and isinstance(hi, int) and not (lo_open or hi_open)
        step = 1 if whole else max(abs(hi - lo), 1) * 1e-3
        yield command, flag, str(lo), not lo_open
        yield command, flag, str(hi), not hi_open
        yield command, flag, str(lo - step), False
        yield command, flag, str(hi + step), False
        if not (lo_open or lo == 0):
            yield command, flag, str((lo + hi) / 2 if not whole else (lo + hi) // 2), True
        yield command, flag, "x", False
        yield command, flag, "nan" if not whole else "\u00b2", False
        yield command, flag, "9" * 5_000, False


@pytest.mark.parametrize(("command", "flag", "value", "taken"), list(cases()), ids=lambda v: str(v)[:24])
def test_each_number_at_its_bounds_and_past_them(command, flag, value, taken, capsys):
    code, err = parse(command, flag, value, capsys)
    if taken:
        assert code == 0, err
        return
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and f"argument {flag}:" in lines[0], lines
    assert "must be" in lines[0] and len(lines[0]) < 300, lines[0]


@pytest.mark.parametrize(
    "argv",
    [
        ["bench", "--stream", "F", "--per-category", "-1"],
        ["bench", "--stream", "F", "--per-category", "-5"],
        ["bench", "--batch", "1", "--batch-repeats", "100000"],
    ],
)
def test_the_reported_cases_are_refused_in_one_line(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("specviz: error: argument --"), err
