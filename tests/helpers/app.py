"""The app under streamlit's AppTest, on the tiny random pair (SPECVIZ_PAIR=tiny): open it, move between pages,
wait for a page's background run, read what it shows. The `app` fixture (tests/conftest.py) opens it."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent.parent
APP = str(ROOT / "app.py")
TINY_TRACE = ROOT / "tests" / "data" / "tiny_trace.json"


def open_app(monkeypatch, tmp_path: Path) -> AppTest:
    """The app on the tiny pair, with no recorded runs (an empty traces folder)."""
    monkeypatch.setenv("SPECVIZ_PAIR", "tiny")
    monkeypatch.setenv("SPECVIZ_TRACES_DIR", str(tmp_path / "no-traces"))
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception
    return at


def state(at: AppTest, page: str):
    """The page's PageState (specviz.ui.state): its trace, job, round shown, result."""
    return at.session_state[f"state.{page}"]


def settings_of(at: AppTest):
    return at.session_state["state.shared"].settings


def go(at: AppTest, page: str) -> AppTest:
    at.switch_page(f"pages/{page}.py").run()
    assert not at.exception, at.exception
    return at


def finish(at: AppTest, page: str, timeout: float = 120):
    """Wait for the page's background run, then rerun the script so that the page takes its result."""
    job = state(at, page).job
    assert job.join(timeout), f"the {page} run did not finish in {timeout} s"
    at.run()
    assert not at.exception, at.exception
    assert job.consumed
    return job


def html_of(at: AppTest) -> str:
    return "\n".join(h.value for h in at.html)


def texts(elements) -> list[str]:
    return [e.value for e in elements]


def metric(at: AppTest, label: str) -> str:
    found = [m.value for m in at.metric if m.label == label]
    assert found, f"no metric {label!r} among {[m.label for m in at.metric]}"
    return found[0]
