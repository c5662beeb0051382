"""The real app in a real browser: `streamlit run app.py` on a free localhost port, driven by headless
Chromium through Playwright. Runs a prompt, waits for the rounds, checks the chips and the speed-up,
and saves a screenshot under the test's tmp_path.

The main test uses the built-in pair (skipped with a reason when its cache is not prepared, failed
instead under SPECVIZ_REQUIRE_BUILTIN=1). A second, fast variant runs the same flow on the tiny pair.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from scripts.browser import CHROMIUM_ARGS, AppStartError, chromium_path, free_port, start_app, stop_app

TINY_TRACE = Path(__file__).resolve().parent / "data" / "tiny_trace.json"
PROSE = "Describe a quiet morning in a small coastal town in three sentences."

pytestmark = pytest.mark.browser


@contextmanager
def home_page(url: str) -> Iterator:
    """A headless Chromium page on the app's first page, once its title shows."""
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 2400})
            page.goto(url, wait_until="domcontentloaded")
            expect(page.get_by_role("heading", name="A small model writes ahead, a big model checks")).to_be_visible(
                timeout=60_000
            )
            yield page
        finally:
            browser.close()


@contextmanager
def served(tmp_path: Path, env_extra: dict[str, str]) -> Iterator[str]:
    """`streamlit run app.py` on a free localhost port for the test; yields its URL."""
    if chromium_path() is None:
        pytest.skip("no chromium executable (apt-get install chromium)")
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1", **env_extra}
    if "SPECVIZ_PAIR" not in env_extra:
        env.pop("SPECVIZ_PAIR", None)
    try:
        process = start_app(port, env, tmp_path / "streamlit.log")
    except AppStartError as exc:
        pytest.fail(str(exc))
    try:
        yield f"http://localhost:{port}/"
    finally:
        stop_app(process)


def set_max_new_tokens(page, count: int) -> None:
    tokens = page.get_by_label("Max new tokens")
    tokens.fill(str(count))
    tokens.press("Enter")


def drive(url: str, shot: Path, max_new_tokens: int, run_timeout_s: float) -> dict:
    """Type a prompt, run it, step through the rounds; returns what was seen on the page."""
    from playwright.sync_api import expect

    seen = {"accepted": False, "rejected": False, "speedup": None}
    with home_page(url) as page:
        set_max_new_tokens(page, max_new_tokens)
        prompt = page.get_by_label("Prompt", exact=True)
        prompt.fill(PROSE)
        prompt.press("Control+Enter")  # commits the text area
        page.wait_for_timeout(500)
        page.get_by_role("button", name="Run", exact=True).click()
        expect(page.get_by_role("heading", name="Showing your run")).to_be_visible(timeout=run_timeout_s * 1000)
        speedup = page.locator('[data-testid="stMetric"]').filter(has_text="Speed-up")
        expect(speedup).to_be_visible()
        seen["speedup"] = speedup.locator('[data-testid="stMetricValue"]').inner_text()
        for _ in range(40):  # step through the rounds
            seen["accepted"] |= page.locator(".sv-chip.sv-accepted").count() > 0
            seen["rejected"] |= page.locator(".sv-chip.sv-rejected").count() > 0
            if seen["accepted"] and seen["rejected"]:
                break
            forward = page.get_by_role("button", name="Next")
            if forward.count() == 0 or not forward.first.is_enabled():
                break
            head = page.locator(".sv-round-head").first.inner_text()
            forward.first.click()
            try:
                expect(page.locator(".sv-round-head").first).not_to_have_text(head, timeout=10_000)
            except AssertionError:
                break  # the last round
        page.wait_for_timeout(1500)  # let the charts draw
        page.screenshot(path=str(shot), full_page=True)
    return seen


def run_in_browser(tmp_path: Path, env_extra: dict[str, str], max_new_tokens: int, run_timeout_s: float) -> dict:
    with served(tmp_path, env_extra) as url:
        return drive(url, tmp_path / "step_through.png", max_new_tokens, run_timeout_s)


def check(seen: dict, tmp_path: Path) -> None:
    assert (tmp_path / "step_through.png").stat().st_size > 10_000
    assert seen["accepted"], "no accepted draft chip on any round"
    assert seen["rejected"], "no rejected draft chip on any round"
    # a finite, positive number then ×: "nan×", "inf×" or "0.00×" would mean the rates were not measured
    match = re.fullmatch(r"(\d+\.\d+)×", (seen["speedup"] or "").strip())
    assert match and 0 < float(match.group(1)) < 100, seen["speedup"]


def test_step_through_in_a_real_browser_on_the_builtin_pair(tmp_path):
    try:
        from specviz.models.builtin import builtin_ready
    except ImportError:
        pytest.skip("specviz.models.builtin is not available yet")
    if not builtin_ready():
        if os.environ.get("SPECVIZ_REQUIRE_BUILTIN") == "1":
            pytest.fail("the built-in pair is not prepared: run python -m specviz prepare")
        pytest.skip("the built-in pair is not prepared (python -m specviz prepare)")
    seen = run_in_browser(tmp_path, {}, max_new_tokens=24, run_timeout_s=600)
    check(seen, tmp_path)


def test_step_through_in_a_real_browser_on_the_tiny_pair(tmp_path):
    seen = run_in_browser(
        tmp_path, {"SPECVIZ_PAIR": "tiny", "OMP_NUM_THREADS": "1"}, max_new_tokens=32, run_timeout_s=120
    )
    check(seen, tmp_path)


# --- a hostile trace ------------------------------------------------------------------------------

EVIL_LINK = (
    '<a id="sv-evil-link" class="sv-evil" href="https://evil.example/x" '
    'style="position:fixed;inset:0;z-index:99999">EVIL-LINK</a>'
)
EVIL_STYLE = '<style id="sv-evil-style">body{display:none}</style>'
EVIL_IMG = '<img id="sv-evil-img" src="https://evil.example/i.png" onerror="document.title=\'pwned\'">'
EVIL_MARKDOWN = "[md-evil](https://evil.example/md) ![evil](https://evil.example/i.png) <b id=sv-evil-b>b</b>"

# Every element the file could inject, found by its marks; Streamlit's own page has none of them.
INJECTED_JS = """() => {
  const marked = [...document.querySelectorAll(
      '[id*="evil"], [class*="evil"], [href*="evil"], [src*="evil"], [onerror], [style*="99999"]')];
  const styles = [...document.querySelectorAll('style')].filter(s => s.textContent.includes('evil')
      || s.textContent.replace(/\\s/g, '').includes('body{display:none}'));
  const covering = [...document.querySelectorAll('body *')].filter(e => {
      if (getComputedStyle(e).position !== 'fixed') return false;
      const r = e.getBoundingClientRect();
      return r.width >= 0.9 * innerWidth && r.height >= 0.9 * innerHeight;
  });
  return {marked: marked.map(e => e.outerHTML.slice(0, 160)), styles: styles.length,
          covering: covering.map(e => e.outerHTML.slice(0, 160)), title: document.title,
          bodyShown: getComputedStyle(document.body).display !== 'none', text: document.body.innerText};
}"""


def hostile_trace(path: Path) -> Path:
    """The tiny recorded trace with markup in every string field the strict loader still accepts: the prompt,
    every token text, the pair's names and the note."""
    data = json.loads(TINY_TRACE.read_text(encoding="utf-8"))
    data["prompt"] = f"{EVIL_LINK} {EVIL_MARKDOWN}"
    data["note"] = EVIL_LINK
    data["pair"].update(target=EVIL_STYLE, draft=EVIL_IMG, device=EVIL_MARKDOWN, dtype=EVIL_LINK)
    for event in data["rounds"]:
        for token in event["drafted"]:
            token["text"] = EVIL_LINK
        event["next_token"]["text"] = EVIL_IMG
        for token in event["top_p"] + event["top_q"]:
            token["text"] = EVIL_MARKDOWN
    for step in data["baseline"]:
        step["token"]["text"] = EVIL_STYLE
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def assert_nothing_injected(page, where: str, shown: bool = True) -> None:
    """No element, style sheet or covering layer from the file; `shown`: its values are on the page as text."""
    found = page.evaluate(INJECTED_JS)
    assert found["marked"] == [], f"{where}: elements from the file: {found['marked']}"
    assert found["styles"] == 0, f"{where}: a style sheet from the file"
    assert found["covering"] == [], f"{where}: something fixed over the app: {found['covering']}"
    assert found["title"] != "pwned" and found["bodyShown"], where
    assert not shown or "EVIL-LINK" in found["text"], f"{where}: the hostile values are not shown as text"


def drive_hostile(url: str, trace: Path, shot: Path) -> None:
    """Upload the hostile trace on Step through, then look at it there, on Race and on Theory."""
    from playwright.sync_api import expect

    with home_page(url) as page:
        page.get_by_role("button", name="Replay a file").click()  # the uploader is in a popover
        page.locator('input[type="file"]').first.set_input_files(str(trace))
        expect(page.get_by_role("heading", name="Showing the uploaded run")).to_be_visible(timeout=60_000)
        page.keyboard.press("Escape")
        page.wait_for_timeout(1500)
        assert_nothing_injected(page, "Step through")
        page.get_by_role("button", name="Next").first.click()  # another round's chips and caches
        page.wait_for_timeout(1500)
        assert_nothing_injected(page, "Step through, round 2")
        page.screenshot(path=str(shot), full_page=True)
        for name, shown in (("Race", True), ("Theory", False)):  # Theory lists the run in a canvas table
            page.get_by_role("link", name=name).first.click()
            expect(page.get_by_role("heading", name=name).first).to_be_visible(timeout=60_000)
            page.wait_for_timeout(2500)
            assert_nothing_injected(page, name, shown)


def test_a_hostile_trace_draws_no_element_of_its_own_in_a_real_browser(tmp_path):
    env = {"SPECVIZ_PAIR": "tiny", "OMP_NUM_THREADS": "1", "SPECVIZ_TRACES_DIR": str(tmp_path / "no-traces")}
    with served(tmp_path, env) as url:
        drive_hostile(url, hostile_trace(tmp_path / "hostile.json"), tmp_path / "hostile.png")


# --- draft heads ------------------------------------------------------------------------------------


def slide_to_start(page, label: str, presses: int) -> None:
    """Move the page's slider (or select slider) with this label to its first value, by keyboard."""
    thumb = page.locator('[data-testid="stSlider"]').filter(has_text=label).get_by_role("slider")
    thumb.focus()
    for _ in range(presses):
        thumb.press("ArrowLeft")
    page.wait_for_timeout(800)


def drive_heads(url: str, kind: str, shot: Path) -> dict:
    """Train heads of `kind` on the Heads page (the smallest training it offers), pick them as the sidebar's
    drafter, run Step through; returns what the training caption and the run showed."""
    from playwright.sync_api import expect

    name = {"medusa": "Medusa heads", "eagle": "EAGLE head"}[kind]
    with home_page(url) as page:
        page.get_by_role("link", name="Heads").first.click()
        expect(page.get_by_role("heading", name="Heads: speculation from the target's own hidden state")).to_be_visible(
            timeout=60_000
        )
        choice = page.locator('[data-testid="stRadio"]').filter(has_text="Train").get_by_text(name, exact=True)
        expect(choice).to_be_visible(timeout=60_000)
        choice.click()
        page.wait_for_timeout(800)
        slide_to_start(page, "Training tokens", 4)  # 2,000 tokens
        slide_to_start(page, "Epochs", 15)  # 1 epoch, from either kind's default (4 or 16)
        page.get_by_role("button", name="Train", exact=True).click()
        trained = page.locator('[data-testid="stCaptionContainer"]').filter(
            has_text="In use by the"
        )  # the heads the drafter uses
        expect(trained.first).to_be_visible(timeout=300_000)
        seen = {"trained": trained.first.inner_text()}
        sidebar = page.locator('[data-testid="stSidebar"]')
        sidebar.get_by_text("Medusa" if kind == "medusa" else "EAGLE", exact=True).first.click()
        page.wait_for_timeout(800)
        page.get_by_role("link", name="Step through").first.click()
        expect(page.get_by_role("heading", name="A small model writes ahead, a big model checks")).to_be_visible(
            timeout=60_000
        )
        set_max_new_tokens(page, 16)
        page.wait_for_timeout(800)
        page.get_by_role("button", name="Run", exact=True).click()
        expect(page.get_by_role("heading", name="Showing your run")).to_be_visible(timeout=120_000)
        speedup = page.locator('[data-testid="stMetric"]').filter(has_text="Speed-up")
        seen |= {
            "speedup": speedup.locator('[data-testid="stMetricValue"]').inner_text(),
            "chips": page.locator(".sv-chip.sv-accepted, .sv-chip.sv-rejected").count(),
            "text": page.locator('[data-testid="stMain"]').inner_text(),
        }
        page.screenshot(path=str(shot), full_page=True)
    return seen


@pytest.mark.parametrize("kind", ["medusa", "eagle"])
def test_train_heads_then_draft_with_them_in_a_real_browser_on_the_tiny_pair(tmp_path, kind):
    env = {"SPECVIZ_PAIR": "tiny", "OMP_NUM_THREADS": "1", "SPECVIZ_CACHE": str(tmp_path / "cache")}
    with served(tmp_path, env) as url:
        seen = drive_heads(url, kind, tmp_path / "heads.png")
    assert list((tmp_path / "cache" / "heads").glob(f"{kind}-*.safetensors")), "the training was not saved"
    # the sliders reached the training: the smallest setting, 2,000 tokens (whole answers: a few hundred more)
    tokens = re.search(r"([\d,]+) training tokens of the target's own greedy answers", seen["trained"])
    assert tokens and 2_000 <= int(tokens.group(1).replace(",", "")) < 5_000, seen["trained"]
    assert ("4 heads" if kind == "medusa" else "one layer") in seen["trained"], seen["trained"]
    drafter = {"medusa": "drafter: Medusa heads", "eagle": "drafter: EAGLE head"}[kind]
    assert drafter in seen["text"], "the run did not draft with the trained heads"
    assert seen["chips"] > 0, "no checked draft chip: the heads drafted nothing"
    match = re.fullmatch(r"(\d+\.\d+)×", seen["speedup"].strip())
    assert match and 0 < float(match.group(1)) < 100, seen["speedup"]
