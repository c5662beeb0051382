"""Uploads are bounded per visitor and a refused file is let go at once (issue 56: ten tabs each holding a refused
40 MB trace kept about 300 MB in the server until they closed).

The bounds run on Streamlit's own MemoryUploadedFileManager, one browser session per tab; the page's part (a refused
file's uploader emptied, its reason kept, the next upload read) through AppTest on the tiny pair.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from helpers.app import TINY_TRACE, state, texts
from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
from streamlit.runtime.uploaded_file_manager import UploadedFileRec

from specviz.traces.trace import load_trace
from specviz.ui import files, uploads

MB = 2**20


class Tabs:
    """Browser tabs of one server: each upload lands in Streamlit's manager under its tab's session, then the app
    decides (as ui/files.trace_upload does) to keep it or let it go."""

    def __init__(self, monkeypatch):
        self.manager = MemoryUploadedFileManager("/upload")
        self.tab = "tab 0"
        monkeypatch.setattr(
            uploads, "get_script_run_ctx", lambda: SimpleNamespace(session_id=self.tab, uploaded_file_mgr=self.manager)
        )

    def upload(self, tab: str, visitor: str, size: int) -> str | None:
        self.tab, file_id = tab, f"{tab} file"
        self.manager.add_file(tab, UploadedFileRec(file_id, "run.json", "application/json", b"x" * size))
        why = uploads.upload_refusal(visitor, size)
        if why is None:
            uploads.keep_upload(file_id, size, visitor)
        else:
            uploads.release_upload(file_id)
        return why

    @property
    def held_bytes(self) -> int:
        return sum(len(f.data) for stored in self.manager.file_storage.values() for f in stored.values())


@pytest.fixture
def tabs(monkeypatch):
    monkeypatch.setattr(uploads, "_HELD", {})
    return Tabs(monkeypatch)


def test_a_visitor_holds_at_most_four_files_and_a_refused_one_is_let_go(tabs):
    refusals = [tabs.upload(f"A{n}", "address unknown", 1 * MB) for n in range(10)]
    assert refusals[:4] == [None] * 4
    assert all(why and "at most 4" in why for why in refusals[4:]), refusals
    assert tabs.held_bytes == 4 * MB  # the six refused files left the server at once
    assert uploads.holding("address unknown") == (4, 4 * MB)
    assert tabs.upload("B0", "address 10.0.0.2", 1 * MB) is None  # another visitor is not counted with them


def test_the_bytes_held_are_bounded_and_a_forgotten_file_frees_its_place(tabs):
    assert tabs.upload("A0", "address unknown", 30 * MB) is None
    assert tabs.upload("A1", "address unknown", 30 * MB) is None
    why = tabs.upload("A2", "address unknown", 30 * MB)
    assert why and "60.0 MB" in why and "90.0 MB" in why and "at most 64.0 MB" in why, why
    assert tabs.held_bytes == 60 * MB
    tabs.manager.remove_session_files("A0")  # the tab closed: Streamlit forgets its file
    assert uploads.holding("address unknown") == (1, 30 * MB)
    assert tabs.upload("A3", "address unknown", 30 * MB) is None


def test_a_refused_upload_empties_its_uploader_and_keeps_its_reason(app, monkeypatch):
    released = []
    monkeypatch.setattr(files, "release_upload", released.append)
    bad = json.dumps({"hello": 1}).encode()
    app.get("file_uploader")[0].set_value(("bad.json", bad, "application/json")).run()
    assert len(released) == 1
    assert any("not a specviz trace" in e for e in texts(app.error)), texts(app.error)
    assert app.get("file_uploader")[0].value is None  # a fresh, empty uploader
    app.run()
    assert any("not a specviz trace" in e for e in texts(app.error)), texts(app.error)  # the reason stays
    app.get("file_uploader")[0].set_value(("run.json", TINY_TRACE.read_bytes(), "application/json")).run()
    assert not app.exception and not texts(app.error)
    assert state(app, "step").trace == load_trace(TINY_TRACE) and len(released) == 1


def test_an_upload_beyond_the_visitors_bound_is_refused_on_the_page(app, monkeypatch):
    monkeypatch.setattr(files, "upload_refusal", lambda visitor, size: f"you already hold 4 uploaded files ({visitor})")
    monkeypatch.setattr(files, "release_upload", lambda file_id: None)
    app.get("file_uploader")[0].set_value(("run.json", TINY_TRACE.read_bytes(), "application/json")).run()
    assert any("cannot be replayed: you already hold 4 uploaded files (address" in e for e in texts(app.error)), texts(
        app.error
    )
    assert state(app, "step").trace is None or state(app, "step").label != "the uploaded run"
