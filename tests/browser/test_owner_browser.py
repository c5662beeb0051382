"""An exposed server's visitor in a real browser (issue 56): `streamlit run app.py` on 0.0.0.0, the tiny pair made as
heavy as a real one (SPECVIZ_TINY_WEIGHT_MB: filled memory beside it), driven by headless Chromium. The visitor tries
every control of the sidebar; the server still holds its owner's one pair, and its peak resident memory (VmHWM, read
from /proc) stays within 10% of what it was with that pair loaded. (Before: each precision chosen loaded another pair
for everyone, for the life of the process.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.browser import TINY, home_page, served_process

from specviz.serving.pairs import TINY_WEIGHT_ENV

pytestmark = pytest.mark.browser

WEIGHT_MB = 384  # what one tiny pair holds here: a second one would show in the server's VmHWM
HELD_ONE = "Held in memory now: 1 pair (builtin at bf16)"
SETTLED_JS = "() => document.querySelector('.stApp')?.dataset.testScriptState !== 'running'"
BUTTONS = ("Try again", "Load this pair instead", "Load this pair")  # the sidebar's buttons that could load a pair


def memory(pid: int, field: str = "VmHWM") -> int:
    """The process's VmHWM (the most resident memory it has held) or VmRSS (what it holds now), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) << 10
    raise AssertionError(f"no {field} in /proc/{pid}/status")


@pytest.fixture(scope="module")
def exposed(tmp_path_factory):
    """The server on 0.0.0.0 with one pair, the default one, at bf16 (auto would time its forwards at the first
    load, a peak of its own in VmHWM)."""
    env = {**TINY, TINY_WEIGHT_ENV: str(WEIGHT_MB), "SPECVIZ_PAIRS": "", "SPECVIZ_PRECISIONS": "bf16"}
    with served_process(tmp_path_factory.mktemp("exposed"), env, address="0.0.0.0") as found:
        yield found


def settle(page) -> None:
    page.wait_for_timeout(300)
    page.wait_for_function(SETTLED_JS, timeout=30_000)


def choose(page, box, option: str) -> None:
    box.click()
    page.get_by_role("option", name=option, exact=True).click()
    settle(page)


def shown(page, sidebar, control):
    """The control, with the collapsed "Device and loading" section opened if it is inside it."""
    if not control.is_visible():
        sidebar.locator('[data-testid="stExpander"] summary').first.click()
        settle(page)
    return control


def every_selectbox(page, sidebar) -> list[str]:
    tried = []
    for i in range(sidebar.locator('[data-testid="stSelectbox"]').count()):
        box = shown(page, sidebar, sidebar.locator('[data-testid="stSelectbox"]').nth(i))
        box.click()
        names = page.get_by_role("option").all_inner_texts()
        page.keyboard.press("Escape")
        for name in names:
            choose(page, shown(page, sidebar, box), name)
            tried.append(name)
    return tried


def every_choice(page, sidebar) -> list[str]:
    """Each radio's options, each checkbox twice, each slider to both ends, each number box to a large value."""
    tried = []
    for i in range(sidebar.locator('[data-testid="stRadio"]').count()):
        labels = sidebar.locator('[data-testid="stRadio"]').nth(i).locator("label")
        for j in range(labels.count()):
            tried.append(labels.nth(j).inner_text())
            labels.nth(j).click()
            settle(page)
    for what, count in (("checkbox", 2), ("slider", 1), ("number", 1)):
        found = {
            "checkbox": sidebar.locator('[data-testid="stCheckbox"] label'),
            "slider": sidebar.get_by_role("slider"),
            "number": sidebar.locator('input[type="number"]'),
        }[what]
        for i in range(found.count()):
            tried.append(f"{what} {i}")
            for _ in range(count):
                control = found.nth(i)
                if what == "checkbox":
                    control.click()
                elif what == "slider":
                    control.focus()
                    page.keyboard.press("End")
                    settle(page)
                    page.keyboard.press("Home")
                else:
                    control.fill("99999")
                    control.press("Enter")
                settle(page)
    return tried


def test_a_visitor_of_an_exposed_server_cannot_change_what_it_holds(exposed):
    from playwright.sync_api import expect

    url, process = exposed
    with home_page(url) as page:
        sidebar = page.locator('[data-testid="stSidebar"]')
        expect(sidebar.get_by_text(HELD_ONE)).to_be_visible(timeout=60_000)
        settle(page)
        one_pair = memory(process.pid)
        second = memory(process.pid, "VmRSS") + (WEIGHT_MB << 20)  # what a second pair would hold the server at
        assert second > 1.1 * one_pair, "a second pair would not show: make WEIGHT_MB larger"
        tried = every_selectbox(page, sidebar) + every_choice(page, sidebar)
        for name in BUTTONS:
            for button in sidebar.get_by_role("button", name=name, exact=True).all():
                tried.append(name)
                button.click()
                settle(page)
        assert len(tried) > 20, tried
        page.wait_for_timeout(3000)  # a load a control started would have finished
        page.goto(url, wait_until="domcontentloaded")  # a new visitor: the server's pair, and only it
        expect(sidebar.get_by_text(HELD_ONE)).to_be_visible(timeout=60_000)
        sidebar.get_by_role("combobox", name="Precision of the weights").click()
        assert page.get_by_role("option").all_inner_texts() == ["bfloat16: half the memory"]
        page.keyboard.press("Escape")
    after = memory(process.pid)
    assert after <= 1.1 * one_pair, (
        f"VmHWM {after / 2**20:.0f} MiB after the sidebar's {len(tried)} controls were tried, "
        f"{one_pair / 2**20:.0f} MiB with one pair: {tried}"
    )
    print(f"VmHWM with one pair {one_pair / 2**20:.0f} MiB, after {len(tried)} tries {after / 2**20:.0f} MiB")
