"""Where the owner shares the traffic store, the notice that anyone's requests can show up in anyone's drafts stands
beside the drafts on the pages that show them, not only in the sidebar's collapsed "Device and loading" section
(issue 56). An exposed server (0.0.0.0) under AppTest on the tiny pair, replaying the tiny trace."""

from __future__ import annotations

import pytest
from helpers.app import TINY_TRACE, go, open_app
from streamlit import config as st_config

from specviz.ui.server import SHARED_DRAFTS_WORDS


@pytest.fixture
def exposed(monkeypatch, tmp_path):
    before = st_config.get_option("server.address")
    st_config.set_option("server.address", "0.0.0.0")
    monkeypatch.delenv("SPECVIZ_SHARED_HEADS", raising=False)

    def start(shared: bool):
        monkeypatch.setenv("SPECVIZ_SHARED_TRAFFIC", "1" if shared else "0")
        return open_app(monkeypatch, tmp_path)

    yield start
    st_config.set_option("server.address", before)


def main_captions(at) -> list[str]:
    sidebar = {c.value for c in at.sidebar.caption}
    return [c.value for c in at.caption if c.value not in sidebar]


def replay(at, page: str):
    at = go(at, page) if page != "step_through" else at
    at.get("file_uploader")[0].set_value(("run.json", TINY_TRACE.read_bytes(), "application/json")).run()
    assert not at.exception, at.exception
    return at


@pytest.mark.parametrize("page", ["step_through", "race"])
def test_shared_traffic_is_said_beside_the_drafts(exposed, page):
    at = replay(exposed(shared=True), page)
    assert "chip" in "".join(h.value for h in at.html) or page == "race"  # the drafts are on the page
    assert main_captions(at).count(SHARED_DRAFTS_WORDS) >= 1, main_captions(at)
    assert SHARED_DRAFTS_WORDS not in {c.value for c in at.sidebar.caption}


@pytest.mark.parametrize("page", ["step_through", "race"])
def test_private_traffic_says_nothing_beside_the_drafts(exposed, page):
    at = replay(exposed(shared=False), page)
    assert SHARED_DRAFTS_WORDS not in main_captions(at)
