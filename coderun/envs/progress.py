"""Step-by-step progress for long builds: a live spinner per step, with its time when it ends."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console

_console = Console(stderr=True)


class Steps:
    def __init__(self, title: str, console: Console | None = None):
        self.title = title
        self.console = console or _console

    def __enter__(self) -> Steps:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        started = time.monotonic()
        with self.console.status(f"[bold]{self.title}[/]: {name}…"):
            try:
                yield
            except BaseException:
                self.console.print(f"[red]✗[/] {self.title}: {name} ({time.monotonic() - started:.1f}s)")
                raise
        self.console.print(f"[green]✓[/] {self.title}: {name} ({time.monotonic() - started:.1f}s)")
