"""Every page at 1024x768 and 1440x900 in headless Chromium on the tiny pair (one shared server, each page opening on
its recording), every guided experiment's button pressed (issue 43). After each press the page must have no text
that overflows its box (scrollWidth > clientWidth on text elements, captions included; a plotly legend or title
outside its figure), no internal id on screen (an experiment's id, a file path or a command line), and every number
of a shown answer must be in the page's visible text outside the answer.

The answers that quote numbers the page does not show would be listed in UNSEEN_NUMBERS, exactly (it is empty): the
test fails when one of them is fixed (take it off the list) as when another one starts quoting unseen numbers."""

from __future__ import annotations

import re

import pytest

from scripts.browser import CHROMIUM_ARGS, chromium_path
from specviz.lessons import experiments

pytestmark = pytest.mark.browser

VIEWPORTS = ((1024, 768), (1440, 900))
PAGES = {  # URL path: (the page's name in lessons/experiments.py, its title once drawn)
    "": ("step", "A small model writes ahead, a big model checks"),
    "race": ("race", "Race: plain decoding against speculative decoding"),
    "theory": ("theory", "Theory: how much faster can it be?"),
    "acceptance_lab": ("lab", "Acceptance lab: when does the draft guess right?"),
    "lossless": ("lossless", "Lossless"),
    "heads": ("heads", "Heads: speculation from the target's own hidden state"),
    "learning": ("learning", "A speculator that learns from the requests it serves"),
    "batching": ("batching", "Batching"),
}
ANSWER_WAIT_MS = 90_000  # a run on the tiny pair takes seconds; the lab's batch the longest
# Answers that quote numbers the page does not show (none since issue 43: an answer quoting a recording shows that
# recording's numbers beside it, specviz/ui/quoted.py). An id here is one known to be wrong; the test fails when it is
# fixed as when another one starts quoting unseen numbers.
UNSEEN_NUMBERS: set[str] = set()

# Figure parts known to be outside their figure in a window 1024 px wide, as "path: text start" (none since issue 43:
# specviz/charts/base.py wraps long legend entries and titles). The test fails on a stale entry as on a new problem.
KNOWN_OUTSIDE: set[str] = set()

# Text that overflows its box: elements with text of their own whose content is wider than their box, unless they
# (or a parent) scroll on purpose; plotly legends and titles that leave their figure.
OVERFLOW_JS = """() => {
  const main = document.querySelector('[data-testid="stMain"]');
  const scrolls = el => { for (let e = el; e && e !== main; e = e.parentElement) {
      const o = getComputedStyle(e).overflowX; if (o === 'auto' || o === 'scroll') return true; } return false; };
  const own = el => [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
  const cut = [...main.querySelectorAll('p, span, li, a, label, h1, h2, h3, h4, h5, small, b, strong, em, code, div')]
    .filter(el => own(el) && el.offsetParent !== null && el.scrollWidth > el.clientWidth + 1 && el.clientWidth > 0
                  && !scrolls(el))
    .map(el => (el.innerText.trim() || el.textContent.trim() || el.outerHTML).slice(0, 80));
  const figures = [];
  for (const plot of main.querySelectorAll('.js-plotly-plot')) {
    const box = plot.getBoundingClientRect();
    for (const part of plot.querySelectorAll('.legend, .gtitle, .g-xtitle, .g-ytitle, .g-y2title, .annotation')) {
      const r = part.getBoundingClientRect();
      const out = r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1 || r.bottom > box.bottom + 1;
      if (r.width && out)
        figures.push((part.textContent || '').trim().slice(0, 60));
    }
  }
  return {cut, figures};
}"""
ANSWERS_JS = """() => [...document.querySelectorAll('[data-testid="stAlertContentSuccess"]')]
  .map(el => el.innerText).filter(t => t.includes('What you should see'))"""
TEXT_JS = """() => {
  const main = document.querySelector('[data-testid="stMain"]').cloneNode(true);
  main.querySelectorAll('[data-testid="stAlertContentSuccess"]').forEach(el => el.remove());
  document.body.appendChild(main); const text = main.innerText; main.remove();
  const tables = [...document.querySelectorAll('[data-testid="stDataFrame"]')].map(t => t.innerText).join(' ');
  return text + ' ' + tables;
}"""
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
INTERNAL = re.compile("|".join(rf"\b{re.escape(e.id)}\b" for e in experiments.EXPERIMENTS if "_" in e.id))
IN_ANSWERS = re.compile(r"python -m|--[a-z]|assets/|\.json\b|\bissue\b")  # a command line, a file, our records


def answer_numbers(answer: str) -> set[str]:
    """The numbers an answer's 'What you should see' quotes (its 'Why' explains, and may reason with constants)."""
    seen = answer.split("Why.", 1)[0]
    return {n.rstrip(".,") for n in NUMBER.findall(seen) if len(n.rstrip(".,")) > 1 or n in "23456789"}


def unseen(numbers: set[str], text: str) -> set[str]:
    return {n for n in numbers if n not in text}


def problems_after(page, where: str) -> list[str]:
    found = page.evaluate(OVERFLOW_JS)
    out = [f"{where}: text cut: {t!r}" for t in found["cut"]] + [
        f"{where}: figure part outside: {t!r}" for t in found["figures"]
    ]
    text = page.locator('[data-testid="stMain"]').inner_text()
    out += [f"{where}: internal id or command on screen: {m!r}" for m in set(INTERNAL.findall(text))]
    return out


def shown_answer(page, experiment, where: str) -> str:
    """The experiment's answer once it shows (its run, if it has one, finished)."""
    start = " ".join(experiment.observe.split())[:30]
    for _ in range(ANSWER_WAIT_MS // 500):
        shown = [a for a in page.evaluate(ANSWERS_JS) if start in " ".join(a.split())]
        if shown:
            return shown[0]
        page.wait_for_timeout(500)
    raise AssertionError(f"{where}: {experiment.id}'s answer never showed")


def press_every_experiment(page, route: str, where: str, unseen_ids: set[str]) -> list[str]:
    problems = []
    for experiment in experiments.for_page(route):
        page.locator(f".st-key-{experiment.page}-exp_{experiment.id} button").first.click()
        answer = shown_answer(page, experiment, where)
        page.wait_for_timeout(1500 if experiment.run else 400)  # a run's result and charts draw
        problems += problems_after(page, f"{where} {experiment.id}")
        problems += [f"{where} {experiment.id}: in its answer: {m!r}" for m in set(IN_ANSWERS.findall(answer))]
        if unseen(answer_numbers(answer), page.evaluate(TEXT_JS)):
            unseen_ids.add(experiment.id)
    return problems


def test_every_page_and_experiment_fits_and_shows_what_its_answer_cites(tiny_app):
    from playwright.sync_api import expect, sync_playwright

    problems: list[str] = []
    unseen_ids: set[str] = set()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        try:
            for width, height in VIEWPORTS:
                page = browser.new_page(viewport={"width": width, "height": height})
                for path, (route, title) in PAGES.items():
                    where = f"{width}x{height} /{path}"
                    page.goto(tiny_app + path, wait_until="domcontentloaded")
                    expect(page.get_by_role("heading", name=title).first).to_be_visible(timeout=60_000)
                    page.wait_for_timeout(2000)  # the recorded result's metrics, charts and formulas
                    problems += problems_after(page, where)
                    problems += press_every_experiment(page, route, where, unseen_ids)
                page.close()
        finally:
            browser.close()

    def matches(known: str, problem: str) -> bool:
        return f"/{known.split(': ', 1)[0]}" in problem and known.split(": ", 1)[1] in problem

    known = [p for p in problems if any(matches(k, p) for k in KNOWN_OUTSIDE)]
    stale = [k for k in KNOWN_OUTSIDE if not any(matches(k, p) for p in problems)]
    assert not stale, f"now inside their figure (take off KNOWN_OUTSIDE): {stale}"
    assert not [p for p in problems if p not in known], "\n".join(p for p in problems if p not in known)
    assert unseen_ids == UNSEEN_NUMBERS, (
        f"now fixed (take off UNSEEN_NUMBERS): {sorted(UNSEEN_NUMBERS - unseen_ids)}; "
        f"quoting numbers the page does not show: {sorted(unseen_ids - UNSEEN_NUMBERS)}"
    )
