"""The app in a real browser: `streamlit run app.py` on a free localhost port, and headless Debian
Chromium for Playwright (its own browser download does not work here). Used by tests/browser/test_browser.py
and scripts/screenshots.py."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


class AppStartError(RuntimeError):
    """streamlit exited, or did not answer its health check in time."""


def chromium_path() -> str | None:
    for candidate in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser")):
        if candidate and Path(candidate).exists():
            return candidate
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_app(
    port: int, env: dict[str, str], log: Path, timeout_s: float = 90, address: str = "localhost"
) -> subprocess.Popen:
    """`streamlit run app.py` on `port`, listening on `address` (a test of an exposed server passes 0.0.0.0)."""
    cmd = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        "app.py",
        "--server.port",
        str(port),
        "--server.address",
        address,
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
    ]
    process = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:]
            raise AppStartError(f"streamlit exited with {process.returncode}: {tail}")
        try:
            with urllib.request.urlopen(f"http://localhost:{port}/_stcore/health", timeout=2) as reply:
                if reply.status == 200:
                    return process
        except OSError:
            time.sleep(0.5)
    process.terminate()
    raise AppStartError(f"streamlit did not answer its health check within {timeout_s:.0f} s")


def stop_app(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)
