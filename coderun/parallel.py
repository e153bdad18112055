"""Work on items `jobs` at a time (verifying tasks, deriving their pass+ inputs), and saying how far it got
(`Counted` events; the CLI draws them)."""

from __future__ import annotations

import fcntl
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import TypeVar

from coderun.events import Counted, Listener, Note, silent

Item = TypeVar("Item")
Result = TypeVar("Result")


def parallel(fn: Callable[[Item], Result], todo: list[Item], jobs: int,
             *, on_event: Listener = silent) -> Iterator[tuple[Item, Result]]:
    """(item, fn(item)) as each finishes, `jobs` at a time. Interrupted (Ctrl-C) or failing, it starts
    nothing new but still hands over the tasks already under way that end well, so the caller keeps
    them; then it re-raises. A Ctrl-C is taken here, whatever the caller is doing with the last result
    (raised in the caller's own code, it would close this generator and lose the tasks under way); a
    second one interrupts at once."""
    ex = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="coderun-verify")
    running: dict[Future, Item] = {}
    pending = list(todo)
    slots = JobSlots.shared()
    try:
        with _CtrlC() as ctrl_c:
            while pending or running:
                while pending and len(running) < jobs and slots.take(len(running)):
                    item = pending.pop(0)
                    running[ex.submit(fn, item)] = item
                if not running:  # every shared slot is another build's: wait for one
                    time.sleep(JobSlots.POLL_SECONDS)
                done, _ = wait(running, timeout=_POLL_SECONDS, return_when=FIRST_COMPLETED)
                for fut in done:
                    slots.give()
                    yield running.pop(fut), fut.result()
                ctrl_c.check()
    except GeneratorExit:
        raise
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt):  # also between two tasks, when none is under way
            under_way = f"finishing the {len(running)} tasks under way; " if running else ""
            on_event(Note("", f"interrupted: {under_way}every decision made is kept, and running the same build "
                          "again resumes"))
        for fut in list(running):
            if fut.exception() is None:  # waits for it
                yield running.pop(fut), fut.result()
        raise
    finally:
        ex.shutdown(wait=True, cancel_futures=True)
        slots.give_all()


_POLL_SECONDS = 0.2  # how soon a Ctrl-C taken by _CtrlC is acted on
SLOTS_VARIABLE = "CODERUN_JOB_SLOTS"


class JobSlots:
    """The machine's cores shared by several builds side by side (tasks/side_by_side), as make's jobserver
    shares them: a folder of one lock file per core (CODERUN_JOB_SLOTS), a core held by holding its file's
    lock. Each build holds one for its whole life (`hold_own`, make's implicit token): its one-core stages
    and its first task run on it. Each further task it runs at once holds another, so a build left alone
    (at the end) or beside one that is starting uses the cores the others leave, and no build's one-core
    stage is slowed by another's tasks. A process that dies gives its cores back with its file
    descriptors. Without the variable there is no limit but `jobs`.

    Fair by waiting: a build takes a further core only when it has stayed free for a while, so a build
    starting (waiting for its own) is not outrun."""

    POLL_SECONDS = 0.05
    SPARE_SECONDS = 0.3   # how long a slot stays free before a build that holds one takes another
    _own: int | None = None   # this process's own slot (hold_own), kept until it exits

    def __init__(self, folder: str | None) -> None:
        self.files = sorted(Path(folder).glob("slot-*")) if folder else []
        self.held: list[int] = []
        self._free_since: float | None = None

    @classmethod
    def shared(cls) -> JobSlots:
        return cls(os.environ.get(SLOTS_VARIABLE))

    @classmethod
    def hold_own(cls, on_wait: Callable[[], None] = lambda: None) -> None:
        """Wait until this process holds a slot of its own (nothing to wait for without shared slots);
        `on_wait` is called once if it has to wait."""
        slots = cls.shared()
        if not slots.files or JobSlots._own is not None:
            return
        fd = slots._try_lock()
        if fd is None:
            on_wait()
        while fd is None:
            time.sleep(cls.POLL_SECONDS)
            fd = slots._try_lock()
        JobSlots._own = fd

    @staticmethod
    def create(folder: Path, n: int) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(n):
            (folder / f"slot-{i}").touch()

    def take(self, running: int) -> bool:
        """Whether another task may start now (holding a slot for it when slots are shared; the first on
        the process's own)."""
        if not self.files or (running == 0 and JobSlots._own is not None):
            return True
        now = time.monotonic()
        fd = self._try_lock()
        if fd is None:
            self._free_since = None
            return False
        if running and (self._free_since is None or now - self._free_since < self.SPARE_SECONDS):
            self._free_since = self._free_since or now
            os.close(fd)   # free now, but maybe only until a waiting build looks again: leave it a moment
            return False
        self._free_since = None
        self.held.append(fd)
        return True

    def _try_lock(self) -> int | None:
        for path in self.files:
            fd = os.open(path, os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except OSError:
                os.close(fd)
        return None

    def give(self) -> None:
        if self.held:
            os.close(self.held.pop())

    def give_all(self) -> None:
        while self.held:
            self.give()


class _CtrlC:
    """SIGINT sets a flag that `check` raises as KeyboardInterrupt; a second SIGINT raises at once. Only in
    the main thread (elsewhere Python cannot set a handler, and no Ctrl-C arrives there)."""

    def __init__(self) -> None:
        self.seen, self._installed, self._previous = False, False, None

    def __enter__(self) -> _CtrlC:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
            self._installed = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)

    def _handle(self, signum: int, frame: object) -> None:
        if self.seen:
            raise KeyboardInterrupt
        self.seen = True

    def check(self) -> None:
        if self.seen:
            raise KeyboardInterrupt


class Tally:
    """How far the work got, as `Counted` events: one now (the tasks decided before count), then one per
    task done, its detail the statuses so far (`9 verified, 3 weak`)."""

    def __init__(self, subject: str, total: int, done: Counter, on_event: Listener, *, unit: str = "tasks"):
        self.subject, self.total, self.counts, self.unit, self.on_event = subject, total, done, unit, on_event
        self._lock = threading.Lock()
        self._emit()

    def advance(self, status: str) -> None:
        with self._lock:
            self.counts[status] += 1
            self._emit()

    def _emit(self) -> None:
        parts = ", ".join(f"{n} {k}" for k, n in sorted(self.counts.items(), key=lambda kv: -kv[1]))
        self.on_event(Counted(self.subject, sum(self.counts.values()), self.total, self.unit, parts))
