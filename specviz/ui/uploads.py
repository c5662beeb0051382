"""What uploaded files a visitor holds in the server, bounded, and a refused file let go at once.

Streamlit keeps an uploaded file's bytes (its UploadedFileManager, per browser session) while the file stays in its
uploader, so ten tabs each holding a refused 40 MB trace kept about 300 MB until they closed. Here every file the app
keeps is counted against its visitor (ui/server.visitor: the browser's address, or one visitor for every unknown
address): at most MAX_HELD files and MAX_HELD_BYTES bytes; a file beyond them, or one that cannot be read, is removed
from the manager at once and its uploader emptied. A holding ends when Streamlit forgets the file (removed from its
uploader, the tab closed): the count asks the manager which files it still has.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass

from streamlit.runtime.scriptrunner import get_script_run_ctx
from streamlit.runtime.uploaded_file_manager import UploadedFileManager

from specviz.traces.check import MAX_FILE_BYTES

MAX_HELD = 4  # uploaded files one visitor may hold in the server at once
MAX_HELD_BYTES = 2 * MAX_FILE_BYTES  # and their bytes: two of the largest traces that can be read (64 MB)


@dataclass(frozen=True)
class _Held:
    visitor: str
    size: int
    manager: weakref.ref[UploadedFileManager]


_HELD: dict[tuple[str, str], _Held] = {}  # (session id, file id) -> who holds it, and how large
_GUARD = threading.Lock()


def _still_there(where: tuple[str, str], held: _Held) -> bool:
    manager = held.manager()
    return manager is not None and bool(manager.get_files(session_id=where[0], file_ids=[where[1]]))


def holding(visitor: str) -> tuple[int, int]:
    """(files, bytes) that visitor holds now; files Streamlit has forgotten are dropped from the count."""
    with _GUARD:
        for where in [w for w, h in _HELD.items() if not _still_there(w, h)]:
            del _HELD[where]
        sizes = [h.size for h in _HELD.values() if h.visitor == visitor]
    return len(sizes), sum(sizes)


def _mb(size: int) -> str:
    return f"{size / 2**20:.1f} MB"


def upload_refusal(visitor: str, size: int) -> str | None:
    """Why a new file of `size` bytes cannot be kept for this visitor, or None when it can."""
    files, held = holding(visitor)
    if files >= MAX_HELD:
        return (
            f"you already hold {files} uploaded files in this server (at most {MAX_HELD}); "
            "remove one from its uploader or close its tab, then upload again"
        )
    if held + size > MAX_HELD_BYTES:
        return (
            f"with the {_mb(held)} of uploads you already hold this would be {_mb(held + size)} "
            f"(at most {_mb(MAX_HELD_BYTES)}); remove one from its uploader or close its tab, then upload again"
        )
    return None


def keep_upload(file_id: str, size: int, visitor: str) -> None:
    """Count this session's file against the visitor while Streamlit holds it."""
    ctx = get_script_run_ctx()
    if ctx is None:
        return
    with _GUARD:
        _HELD[(ctx.session_id, file_id)] = _Held(visitor, size, weakref.ref(ctx.uploaded_file_mgr))


def release_upload(file_id: str) -> None:
    """Let this session's file go: Streamlit's copy of its bytes is removed now, not when the tab closes."""
    ctx = get_script_run_ctx()
    if ctx is None:
        return
    ctx.uploaded_file_mgr.remove_file(ctx.session_id, file_id)
    with _GUARD:
        _HELD.pop((ctx.session_id, file_id), None)
