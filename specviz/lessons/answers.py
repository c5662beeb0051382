"""Each guided experiment's answer, a pure function of what its page shows right then (issue 55): the live run where
there is one, else the recording, named as such (lessons/screen.py). Each answer has a branch for every outcome a
learner can meet and says which one happened, with the number as the page shows it. This module: the pages with a
run of the models (Step through, Race, Acceptance lab); answers_more.py: the others. `answer(id, screen)` is the
one entry (specviz/ui/experiments.py draws it under the experiment's lead, lessons/experiments.py's `observe`).
"""

from __future__ import annotations

from collections.abc import Callable

from specviz import drafters
from specviz.runs import speedup

from . import answers_more as more
from . import lab
from .advice import compared
from .screen import SPEED_TOLERANCE, Made, Screen, live, made_of, pct, rate_against, speed_words, times

Answer = Callable[[Screen], str]


def _recorded_rate(screen: Screen, name: str, what: str) -> tuple[str, float | None]:
    """ "<on the recording ...>: <rate> <what>", and that rate; ("", None) where the recording is not there."""
    trace = screen.recordings.get(name)
    made = made_of(trace)
    if trace is None or made is None:
        return "", None
    return f"{made.words}: {pct(trace.summary.acceptance_rate)} {what}", trace.summary.acceptance_rate


def prose_defaults(screen: Screen) -> str:
    t = screen.trace
    rate = t.summary.acceptance_rate
    words = f"Acceptance rate {pct(rate)} ({live(t)})."
    code, code_rate = _recorded_rate(screen, "identical", "on the code prompt with the same settings")
    if code_rate is not None:
        verdict = {
            "lower": "fewer drafts kept than on code, as prose goes",
            "higher": "more kept than on code: this prose was unusually predictable for the draft",
            "about the same": "about as many kept as on code: this prose was unusually predictable for the draft",
        }[rate_against(rate, code_rate)]
        words += f" That is {verdict}; {code}."
    return f"{words} {speed_words(t)}"


def temperature(screen: Screen) -> str:
    t = screen.trace
    rate = t.summary.acceptance_rate
    greedy, greedy_rate = _recorded_rate(screen, "identical", "greedy on this prompt")
    words = f"Acceptance rate {pct(rate)} at temperature {t.config.temperature:g} ({live(t)})."
    if greedy_rate is None:
        return words + " Rerun it greedy (temperature 0) to compare."
    verdict = {
        "lower": "lower than greedy: heat moved probability onto tokens the two models weigh differently",
        "higher": "higher than greedy: where the greedy choice was a near tie, sampling can agree more often",
        "about the same": "about the same as greedy (within 3 points): the two models spread their mass alike",
    }[rate_against(rate, greedy_rate)]
    return f"{words} That is {verdict}; {greedy}."


def ngram_rename(screen: Screen) -> str:
    t = screen.trace
    rounds = t.rounds
    whole = sum(1 for r in rounds if r.drafted and r.rejection_index is None)
    cold = sum(1 for r in rounds if not r.drafted or r.rejection_index == 0)
    n = len(rounds)
    kept = (
        "no round kept its whole draft"
        if whole == 0
        else "a few rounds kept the whole draft and its bonus token (★)"
        if 4 * whole <= n
        else "many rounds kept the whole draft and its bonus token (★): the answer copies long stretches"
    )
    missed = (
        "most rounds found nothing to copy (one plain target step) or lost their first guess"
        if 2 * cold > n
        else "fewer than half found nothing to copy or lost their first guess"
    )
    rate = pct(t.summary.acceptance_rate)
    return f"Of the {t.summary.rounds} rounds ({live(t)}; acceptance rate {rate}), {kept}; {missed}."


def identical(screen: Screen) -> str:
    t = screen.trace
    same = lab.greedy_identity(t)
    if not same.checked:
        return "Not checked: this race sampled (temperature above 0) or timed no plain decoding; set greedy."
    if same.identical:
        return f"Identical: both lanes wrote the same {t.summary.new_tokens} tokens, only at different times."
    return (
        f"They differ from token {same.first_difference + 1} on: the red check above says why (a near tie between "
        "two tokens flipped by floating-point differences between a verify pass and single steps)."
    )


def _race(screen: Screen, name: str, expected: str) -> str:
    """A race's answer: who won here (its Speed-up, the mean acceptance length and the verify's cost beside it), and
    the recording's result named as a recording. `expected`: "better" or "worse", the recording's side of 1×."""
    t = screen.trace
    measured = speedup(t)
    costs = lab.cost_breakdown(t)
    if measured is None or costs is None:
        return "This race timed no plain decoding, so there is no speed-up to read: start the race again."
    verdict = compared(measured, 1.0, SPEED_TOLERANCE)
    # a draw says which side of 1× it fell on: below 1×, the page's Why box beside it asks why the run was slower
    ahead = "plain decoding" if measured < 1.0 else "speculation"
    within = f"a draw ({ahead} a little faster, too close to call)"
    won = {"better": "speculation won", "worse": "plain decoding won", "about the same": within}[verdict]
    words = f"Here {won}: Speed-up {times(measured)} ({live(t)}), a round committed {costs.tokens_per_round:.2f}"
    words += " tokens (new tokens ÷ rounds)"
    if costs.verify_in_steps is not None:
        words += f" and a verify pass cost {costs.verify_in_steps:.1f} plain steps"
    recording = screen.recordings.get(name)
    made = made_of(recording)
    theirs = speedup(recording) if recording is not None else None
    if made is None or theirs is None:
        return words + "."
    same = "as" if verdict == expected else "unlike"
    words += f"; {same} {made.words}: {times(theirs)}."
    if verdict != expected and verdict == "worse":
        words += " Where a draft or a verify pass is slow, each round's guesses must pay for more time."
    return words


def prose_long(screen: Screen) -> str:
    return _race(screen, "prose_long", "worse")


def rename_auto(screen: Screen) -> str:
    return _race(screen, "rename_auto", "better")


# --- Acceptance lab: the batch's table (lab.run_rows), as the page shows it --------------------------------


def _rows(screen: Screen) -> list[dict]:
    return lab.run_rows(screen.runs)


def _where(screen: Screen) -> str:
    made: Made | None = screen.made
    return made.words if made is not None else "in your batch, measured now"


def _cell(screen: Screen, category: str, drafter: str, temperature: float, column: str) -> float | None:
    """One value of the table: the first run of that category, drafter and temperature, as the table shows it."""
    for row in _rows(screen):
        if (row["category"], row["drafter"], row["temperature"]) == (category, drafter, temperature):
            return row[column]
    return None


def _as_drawn(value: float) -> str:
    """A table cell's number as st.dataframe draws it: without trailing zeros (95.0 is drawn 95, 95.50 is 95.5)."""
    return format(value, "f").rstrip("0").rstrip(".")


def lab_temperature(screen: Screen) -> str:
    rate = {
        (c, t): _cell(screen, c, drafters.label(drafters.MODEL), t, "acceptance rate")
        for c in ("code", "prose")
        for t in (0.0, 1.0)
    }
    if any(v is None for v in rate.values()):
        return "The batch shown lacks a draft-model run of code or prose, greedy or at 1.0: press the button again."
    parts = []
    for t, name in ((0.0, "greedy"), (1.0, "at 1.0")):
        code, prose = rate[("code", t)], rate[("prose", t)]
        verdict = {"higher": "code kept more", "lower": "prose kept more", "about the same": "about the same"}
        parts.append(f"{name} {verdict[rate_against(code, prose)]} (acceptance rate {code} against {prose})")
    return f"{_where(screen).capitalize()}: " + "; ".join(parts) + ", as the table shows."


def lab_ngram(screen: Screen) -> str:
    both = (drafters.label(drafters.NGRAM), drafters.label(drafters.MODEL))
    speeds = {(c, d): _cell(screen, c, d, 0.0, "tokens / s") for c in ("repetition", "prose") for d in both}
    if any(v is None for v in speeds.values()):
        return "The batch shown lacks a greedy run of both drafters on repetition and prose: press the button again."
    wins = [c for c in ("repetition", "prose") if compared(speeds[(c, both[0])], speeds[(c, both[1])]) == "better"]
    said = {
        ("repetition", "prose"): "copying wins on both",
        ("repetition",): "copying wins on the repetition prompt only",
        ("prose",): "copying wins on prose only, which is unusual",
        (): "copying wins nowhere",
    }[tuple(wins)]
    detail = "; ".join(
        f"{c}: {both[0]} {_as_drawn(speeds[(c, both[0])])} tokens/s against the {both[1]}'s "
        f"{_as_drawn(speeds[(c, both[1])])}"
        for c in ("repetition", "prose")
    )
    return f"{_where(screen).capitalize()}, {said} (the table's tokens / s, within 5% a tie): {detail}."


def lab_position(screen: Screen) -> str:
    stats = lab.acceptance_by_position(r.trace for r in screen.runs)
    if len(stats) < 2:
        return "The batch drafted fewer than two positions: set γ 5 and press the button again."
    first, best = stats[0], max(stats[1:], key=lambda s: s.rate)
    falls = all(b.rate <= a.rate for a, b in zip(stats, stats[1:], strict=False))
    if falls:
        return (
            f"{_where(screen).capitalize()} the rate falls at every position: position 1 {pct(first.rate)}, "
            f"position {stats[-1].position} {pct(stats[-1].rate)} (the chart's points)."
        )
    return (
        f"No steady fall {_where(screen)}: position {best.position} accepted {pct(best.rate)} against position 1's "
        f"{pct(first.rate)} (the chart's points); later positions are reached less often."
    )


ANSWERS: dict[str, Answer] = {
    "prose_defaults": prose_defaults,
    "temperature": temperature,
    "ngram_rename": ngram_rename,
    "identical": identical,
    "prose_long": prose_long,
    "rename_auto": rename_auto,
    "lab_temperature": lab_temperature,
    "lab_ngram": lab_ngram,
    "lab_position": lab_position,
    **more.ANSWERS,
}


def _positions(screen: Screen) -> str:
    stats = lab.acceptance_by_position(r.trace for r in screen.runs)
    return "The By draft position chart's points: " + " · ".join(f"position {s.position} {pct(s.rate)}" for s in stats)


def _accuracy(screen: Screen) -> str:
    shown = [(kind, r["top1"]) for kind, r in (screen.data or {}).items()]
    return "Held-out accuracy, the chart's points: " + " · ".join(
        f"{kind} {'head ' + str(i) + ' ' if kind == drafters.MEDUSA else ''}{pct(a)}"
        for kind, top1 in shown
        for i, a in enumerate(top1, 1)
    )


BESIDE: dict[str, Answer] = {"lab_position": _positions, "heads_medusa_k": _accuracy, "heads_medusa_eagle": _accuracy}


def beside(experiment_id: str, screen: Screen) -> str | None:
    """The numbers an answer reads off a chart (shown there only on hover), in a line drawn beside the answer."""
    return BESIDE[experiment_id](screen) if experiment_id in BESIDE else None


def answer(experiment_id: str, screen: Screen) -> str:
    """What happened, in words, from what the page shows."""
    return ANSWERS[experiment_id](screen)
