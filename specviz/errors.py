"""Errors a user can cause. Their message is the whole explanation: the CLI prints it as one line and
exits with status 2, the app shows it in place of a traceback. Each module's own error subclasses
UserError, so a caller catches them all with one class and no module imports the others for it."""

from __future__ import annotations


class UserError(Exception):
    """A mistake a user can make (a bad setting, prompt, file or model); the message says what to do."""


class ModelLoadError(UserError, RuntimeError):
    """A pair that cannot be loaded; the message says what to do about it."""


class OutputError(UserError, OSError):
    """An output file (a trace, a benchmark's JSON) that cannot be written where the user asked."""
