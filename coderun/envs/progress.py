"""Step-by-step progress for long builds: each step announced, and its time when it ends (as events)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from coderun.events import Listener, silent, step


class Steps:
    def __init__(self, title: str, on_event: Listener = silent):
        self.title = title
        self.on_event = on_event

    def __enter__(self) -> Steps:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        with step(self.on_event, self.title, name):
            yield
