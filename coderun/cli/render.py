"""The CLI's listener: the library's progress events (coderun.events) on stderr.

On a terminal a running step is a spinner with its command's latest line, and counted work is a rich bar;
otherwise (a log, CI) steps show only when they end, and counted work is a line every few items or seconds
(e.g. `calc: 12/40 tasks done (9 verified, 3 weak) 0:01:10`) and one at the end. Those lines come also while
a long item holds every slot: a clock of its own says how far it got.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.status import Status

from coderun.events import Counted, Event, Note, StepDone, StepOutput, StepStarted, label

# Without a terminal, a progress line every this many items or seconds (whichever comes first).
LINE_EVERY_ITEMS = 10
LINE_EVERY_SECONDS = 30.0


@dataclass
class _Count:
    """One subject's counted work, as plain lines."""
    last: Counted
    started: float = field(default_factory=time.monotonic)
    last_line: float = 0.0
    last_done: int = -1


class Renderer:
    """A Listener (call it with events); use it as a context manager, so bars stop and last lines come."""

    def __init__(self, console: Console, *, every_seconds: float = LINE_EVERY_SECONDS):
        self.console, self.every = console, every_seconds
        self.terminal = console.is_terminal
        self._lock = threading.RLock()
        self._status: Status | None = None
        self._bar: Progress | None = None
        self._bar_ids: dict[str, TaskID] = {}
        self._counts: dict[str, _Count] = {}
        self._stop = threading.Event()
        self._clock: threading.Thread | None = None

    def __enter__(self) -> Renderer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._stop.set()
        if self._clock is not None:
            self._clock.join()
            self._clock = None
        with self._lock:
            self._end_status()
            self._end_bar()
            for subject, c in list(self._counts.items()):
                if c.last.done != c.last_done:
                    self._line(c)
                del self._counts[subject]

    def __call__(self, event: Event) -> None:
        with self._lock:
            if isinstance(event, StepStarted | StepOutput):
                self._step_running(event)
            elif isinstance(event, StepDone):
                self._end_status()
                mark = "[green]✓[/]" if event.ok else "[red]✗[/]"
                took = f" ({event.seconds:.1f}s)" if event.seconds is not None else ""
                self.console.print(f"{mark} {escape(label(event.subject, event.step))}{took}", highlight=False)
            elif isinstance(event, Note):
                self._note(event)
            elif isinstance(event, Counted):
                self._counted(event)

    def _note(self, n: Note) -> None:
        if n.level == "warning":
            self.console.print(f"[yellow]{escape(label(n.subject, n.text))}[/]", highlight=False)
        elif n.subject:
            self.console.print(f"[bold]{escape(n.subject)}[/]: {escape(n.text)}", highlight=False)
        else:
            self.console.print(escape(n.text), highlight=False)

    def _step_running(self, event: StepStarted | StepOutput) -> None:
        if not self.terminal or self._bar is not None:  # one live display at a time: a bar stays
            return
        text = f"[bold]{escape(label(event.subject, event.step))}[/]"
        text += f": {escape(event.line.strip()[:100])}" if isinstance(event, StepOutput) else "…"
        if self._status is None:
            self._status = self.console.status(text)
            self._status.start()
        else:
            self._status.update(text)

    def _end_status(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def _counted(self, event: Counted) -> None:
        if self.terminal:
            self._end_status()
            self._bar_update(event)
            return
        c = self._counts.get(event.subject)
        if c is None:
            c = self._counts[event.subject] = _Count(event)
            self._line(c)
            if self._clock is None:
                self._clock = threading.Thread(target=self._tick, name="coderun-progress", daemon=True)
                self._clock.start()
        c.last = event
        if (event.done - c.last_done >= LINE_EVERY_ITEMS or event.done >= event.total
                or time.monotonic() - c.last_line >= self.every):
            self._line(c)
        if event.done >= event.total:
            del self._counts[event.subject]

    def _bar_update(self, event: Counted) -> None:
        if self._bar is None:
            self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[detail]}"), TimeElapsedColumn(), console=self.console)
            self._bar.start()
        tid = self._bar_ids.get(event.subject)
        if tid is None:
            self._bar_ids[event.subject] = self._bar.add_task(escape(f"{event.subject}: {event.unit}"),
                                                              total=event.total, completed=event.done,
                                                              detail=escape(event.detail))
        else:
            self._bar.update(tid, completed=event.done, total=event.total, detail=escape(event.detail))
        if all(t.finished for t in self._bar.tasks):
            self._end_bar()

    def _end_bar(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar, self._bar_ids = None, {}

    def _tick(self) -> None:
        while not self._stop.wait(min(1.0, self.every / 4)):
            with self._lock:
                for c in self._counts.values():
                    if time.monotonic() - c.last_line >= self.every:
                        self._line(c)

    def _line(self, c: _Count) -> None:
        e = c.last
        c.last_done, c.last_line = e.done, time.monotonic()
        elapsed = int(c.last_line - c.started)
        detail = f" ({e.detail})" if e.detail else ""
        self.console.print(f"{e.subject}: {e.done}/{e.total} {e.unit} done{detail} "
                           f"{elapsed // 3600}:{elapsed // 60 % 60:02d}:{elapsed % 60:02d}",
                           highlight=False, markup=False)
