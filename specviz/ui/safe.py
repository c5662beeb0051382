"""Fragments rerun without app.py around them: `safe` turns an unexpected error into one st.error."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

import streamlit as st

from specviz.markup import md

log = logging.getLogger(__name__)


def safe(render: Callable[..., None]) -> Callable[..., None]:
    """An unexpected error becomes one st.error, never a traceback.
    (Streamlit's own rerun and stop signals are BaseExceptions and pass through.)"""

    @functools.wraps(render)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        try:
            render(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001
            log.exception("view %s failed", render.__name__)
            st.error(f"This view failed ({exc.__class__.__name__}: {md(exc)}). The app is still usable.")

    return wrapper
