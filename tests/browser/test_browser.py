"""The real app in a real browser on the tiny pair: `streamlit run app.py` on a free localhost port, driven by
headless Chromium through Playwright. Runs a prompt, waits for the rounds, checks the chips and the speed-up, and
saves a screenshot under the test's tmp_path; a hostile trace draws nothing of its own; heads trained on the Heads
page draft on Step through. The same run on the built-in pair is tests/real/test_browser_real.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers.browser import HOME_TITLE, TINY, check, drive, home_page, served, set_max_new_tokens

TINY_TRACE = Path(__file__).resolve().parents[1] / "data" / "tiny_trace.json"

pytestmark = pytest.mark.browser


def test_step_through_in_a_real_browser_on_the_tiny_pair(tiny_app, tmp_path):
    seen = drive(tiny_app, tmp_path / "step_through.png", max_new_tokens=32, run_timeout_s=120)
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
    env = {**TINY, "SPECVIZ_TRACES_DIR": str(tmp_path / "no-traces")}
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
        expect(page.get_by_role("heading", name=HOME_TITLE)).to_be_visible(timeout=60_000)
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
    env = {**TINY, "SPECVIZ_CACHE": str(tmp_path / "cache")}  # a server of its own: a fresh collection and training
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
