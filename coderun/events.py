"""Progress as a stream of typed events: the library says what happens, the CLI decides how it looks.

A long library function takes `on_event: Listener` (a keyword, `silent` by default) and calls it with
these events; it never prints. `coderun.cli.render` turns them into a terminal's spinners and bars, or
into plain lines in a log.

    StepStarted(subject, step)            a build step begins ("env calc", "create venv")
    StepOutput(subject, step, line)       the latest line a running step's command wrote
    StepDone(subject, step, seconds, ok)  it ended: "✓ env calc: create venv (3.5s)", or ✗ when it failed
    Counted(subject, done, total, ...)    `done` of `total` items are done ("calc: 12/40 tasks done")
    Note(subject, text, level)            a message, or a warning

Events may come from worker threads: a listener must be thread-safe.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class StepStarted:
    subject: str  # what is being built ("env calc"); "" when `step` says it all
    step: str


@dataclass(frozen=True)
class StepOutput:
    subject: str
    step: str
    line: str


@dataclass(frozen=True)
class StepDone:
    subject: str
    step: str
    seconds: float | None  # None: a step done without being timed
    ok: bool = True


@dataclass(frozen=True)
class Counted:
    subject: str
    done: int
    total: int
    unit: str = "tasks"
    detail: str = ""  # how the done ones went ("9 verified, 3 weak")


@dataclass(frozen=True)
class Note:
    subject: str
    text: str
    level: Literal["info", "warning"] = "info"


Event = StepStarted | StepOutput | StepDone | Counted | Note
Listener = Callable[[Event], None]


def silent(event: Event) -> None:
    """The listener that ignores everything (the library's default)."""


def label(subject: str, step: str) -> str:
    """`subject: step`, or the step alone."""
    return f"{subject}: {step}" if subject else step


@contextmanager
def step(on_event: Listener, subject: str, name: str) -> Iterator[None]:
    """Announce a step, and when it ends say so with its time (✗ when it raised)."""
    started = time.monotonic()
    on_event(StepStarted(subject, name))
    try:
        yield
    except BaseException:
        on_event(StepDone(subject, name, time.monotonic() - started, ok=False))
        raise
    on_event(StepDone(subject, name, time.monotonic() - started))
