"""A loopback server's precision switch on the built-in pair, measured: the server's peak resident memory (VmHWM, from
/proc) after each switch of the sidebar's "Precision of the weights", bf16 -> fp32 -> int8 by default (issue 56).

Usage: .venv/bin/python -m scripts.switch_memory [fp32 int8 ...]   (after python -m specviz prepare, on a quiet machine)
Starts `streamlit run app.py` on a free localhost port (a loopback server: the switch is the visitor's), waits for the
first pair auto loads, then chooses each precision in turn in headless Chromium and prints, once the sidebar says it
holds that one pair: the time the switch took, VmHWM (the most the process has held so far) and VmRSS (what it holds
now). A switch keeps the old pair while the new one loads only if twice the new one's need is available
(serving/pairs.py), so the peak is at most one pair plus the loading one.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

from scripts.browser import CHROMIUM_ARGS, chromium_path, free_port, start_app, stop_app

OPTIONS = {"bf16": "bfloat16: half the memory", "fp32": "float32: exact weights", "int8": "int8: least memory"}
HELD = "Held in memory now"
SETTLED_JS = "() => document.querySelector('.stApp')?.dataset.testScriptState !== 'running'"
GIB = 2**30


def memory(pid: int, field: str) -> float:
    """/proc/<pid>/status's VmHWM or VmRSS, in GiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 2**20
    raise RuntimeError(f"no {field} in /proc/{pid}/status")


def report(what: str, pid: int, seconds: float, held: str) -> None:
    print(
        f"{what:<22} {seconds:5.0f} s   VmHWM {memory(pid, 'VmHWM'):5.2f} GiB   VmRSS {memory(pid, 'VmRSS'):5.2f} GiB"
        f"   {held}",
        flush=True,
    )


def main(precisions: list[str]) -> int:
    from playwright.sync_api import expect, sync_playwright

    unknown = [name for name in precisions if name not in OPTIONS]
    if unknown or chromium_path() is None:
        print(f"usage: python -m scripts.switch_memory [{' '.join(OPTIONS)} ...] (and chromium installed)")
        return 2
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    env.pop("SPECVIZ_PAIR", None)
    log = Path(tempfile.mkdtemp(prefix="switch-memory-")) / "streamlit.log"
    port = free_port()
    process = start_app(port, env, log)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1440, "height": 1800})
            started = time.monotonic()
            page.goto(f"http://localhost:{port}/", wait_until="domcontentloaded")
            sidebar = page.locator('[data-testid="stSidebar"]')
            expect(sidebar.get_by_text(HELD)).to_be_visible(timeout=900_000)
            held = sidebar.get_by_text(HELD).inner_text()
            report("first load (auto)", process.pid, time.monotonic() - started, held)
            box = sidebar.get_by_role("combobox", name="Precision of the weights")
            if not box.is_visible():  # inside the collapsed "Device and loading" section
                sidebar.locator('[data-testid="stExpander"] summary').first.click()
            for name in precisions:
                started = time.monotonic()
                box.click()
                page.get_by_role("option", name=OPTIONS[name], exact=True).click()
                expect(sidebar.get_by_text(f"{HELD}: 1 pair (builtin at {name}).")).to_be_visible(timeout=900_000)
                page.wait_for_function(SETTLED_JS, timeout=60_000)
                held = sidebar.get_by_text(HELD).inner_text()
                report(f"switch to {name}", process.pid, time.monotonic() - started, held)
            browser.close()
    finally:
        stop_app(process)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["fp32", "int8"]))
