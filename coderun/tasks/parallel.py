"""Verifying tasks `jobs` at a time, and showing how far it got (a bar on a terminal, else a line now and then)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from coderun.tasks.verify import TaskTests, Verification

err = Console(stderr=True)

# Without a terminal, a progress line every this many tasks or seconds (whichever comes first).
LINE_EVERY_TASKS = 10
LINE_EVERY_SECONDS = 30.0


def parallel(fn: Callable[[TaskTests], Verification], todo: list[TaskTests], jobs: int, say
             ) -> Iterator[tuple[TaskTests, Verification]]:
    """(spec, verdict) as each finishes, `jobs` at a time. Interrupted (Ctrl-C) or failing, it starts
    nothing new but still hands over the tasks already under way that end well, so the caller keeps
    them; then it re-raises."""
    ex = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="coderun-verify")
    running: dict[Future, TaskTests] = {}
    pending = list(todo)
    try:
        while pending or running:
            while pending and len(running) < jobs:
                spec = pending.pop(0)
                running[ex.submit(fn, spec)] = spec
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in done:
                yield running.pop(fut), fut.result()
    except GeneratorExit:
        raise
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt) and running:
            say(f"interrupted: finishing the {len(running)} tasks under way; every decision made is kept, "
                "and running the same build again resumes")
        for fut in list(running):
            if fut.exception() is None:  # waits for it
                yield running.pop(fut), fut.result()
        raise
    finally:
        ex.shutdown(wait=True, cancel_futures=True)


class Meter:
    """Progress of the verification: a rich bar on a terminal, otherwise a line every few tasks or seconds
    (e.g. `calc: 12/40 tasks done (9 verified, 3 weak) 0:01:10`) and one at the end. The seconds are kept by a
    clock of its own, so a line comes also while a long task holds every slot."""

    def __init__(self, project: str, total: int, done: Counter, enabled: bool, *, unit: str = "tasks",
                 every_seconds: float = LINE_EVERY_SECONDS, console: Console | None = None):
        self.project, self.total, self.counts, self.enabled = project, total, done, enabled
        self.unit, self.every, self.console = unit, every_seconds, console or err
        self.started = self.last_line = time.monotonic()
        self.last_done = sum(done.values())
        self.bar: Progress | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._clock: threading.Thread | None = None

    def __enter__(self) -> Meter:
        if self.enabled and self.console.is_terminal:
            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), console=self.console, transient=False)
            self.bar.start()
            self.bar_id = self.bar.add_task(f"{self.project}: verify {self.unit}", total=self.total,
                                            completed=self.last_done)
        elif self.enabled:
            self.line()
            self._clock = threading.Thread(target=self._tick, name="coderun-progress", daemon=True)
            self._clock.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._clock is not None:
            self._clock.join()
        if self.bar is not None:
            self.bar.stop()
        elif self.enabled and sum(self.counts.values()) != self.last_done:
            self.line()

    def _tick(self) -> None:
        while not self._stop.wait(min(1.0, self.every / 4)):
            if time.monotonic() - self.last_line >= self.every:
                self.line()

    def advance(self, status: str) -> None:
        with self._lock:
            self.counts[status] += 1
        if self.bar is not None:
            self.bar.advance(self.bar_id)
            return
        done = sum(self.counts.values())
        if self.enabled and (done - self.last_done >= LINE_EVERY_TASKS or done == self.total
                             or time.monotonic() - self.last_line >= self.every):
            self.line()

    def line(self) -> None:
        with self._lock:
            done = sum(self.counts.values())
            self.last_done, self.last_line = done, time.monotonic()
            elapsed = int(self.last_line - self.started)
            parts = ", ".join(f"{n} {k}" for k, n in sorted(self.counts.items(), key=lambda kv: -kv[1]))
            self.console.print(f"{self.project}: {done}/{self.total} {self.unit} done{f' ({parts})' if parts else ''} "
                               f"{elapsed // 3600}:{elapsed // 60 % 60:02d}:{elapsed % 60:02d}", highlight=False)
