"""The last lines of a build or run log, for error messages."""

from __future__ import annotations

from pathlib import Path


def tail(path: Path, lines: int = 20) -> str:
    """The last `lines` lines of the log at `path` ("" when it cannot be read)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
