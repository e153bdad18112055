"""Several projects' task builds at once on one machine, each in its own `coderun tasks build` process.

A project's build spends about half its time in stages that use one core: installing the environment, the
baseline and coverage runs of its suite, the recording runs (over the benchmark on 2 cores: 950 of 2050 s).
Built one after another with `-j` = cores, the other cores wait through those stages; builds side by side
keep them busy, and two more builds than cores (`default_at_once`) also cover the time their tests spend
waiting. The slots are shared, as make's jobserver shares them (parallel.JobSlots): each build holds one
all its life, for its one-core stages and its first task, and verifies up to `-j` tasks at once with the
slots no other build holds, so the build left alone at the end has them all. With more
projects than builds at once, the environments are built first and the task builds start longest test
suite first (`Queue`), so that no long build starts last. A process per build, not a thread: a
build's Ctrl-C handling, its analyzer's caches and its progress belong to it, and a child that fails leaves
the others alone. Each child's whole output goes to its log (`runs/tasks/<project>.log`, the environment's
`runs/tasks/<project>.env.log`); its report is the one its build stored.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from coderun.config import Settings
from coderun.envs.logs import tail
from coderun.errors import ERROR_FILE_VARIABLE, CoderunError, TaskError, from_record
from coderun.events import Listener, Note, silent
from coderun.manifests.schema import Manifest
from coderun.parallel import SLOTS_VARIABLE, JobSlots

POLL_SECONDS = 0.5
PROGRESS_EVERY_SECONDS = 60.0


@dataclass(frozen=True)
class BuildOptions:
    """What `tasks build` was given, passed on to each project's own build."""

    backend: str = "local"
    include_weak: bool = False
    jobs: int = 1
    rigor: bool = True
    registry: str | None = None
    cores: int = 1   # slots shared by the builds under way: tasks verified at once over all of them (JobSlots)


def default_at_once(cores: int) -> int:
    """Builds at once by default: the cores + 2, as ninja's default -j (one on a single core). A build's tests
    wait for a good part of its time (sleeps, subprocesses, the disk): on 2 cores, two builds of pysolbase,
    eppy, lithium and zope.interface left 30% of the CPU idle and took 546 s; four, 4% and 394 s, with the
    same tasks and pass+ inputs (benchmarks/build_all.py whole on the benchmark: docs/benchmarks.md)."""
    return cores + 2 if cores >= 2 else 1


@dataclass(frozen=True)
class _Start:
    manifest: Manifest
    stage: str                 # "environment" | "tasks"
    command: list[str]
    log: Path                  # its output (its stderr alone when `out` takes its stdout)
    note: str
    env: dict[str, str] = field(default_factory=dict)
    out: Path | None = None    # its stdout, when that is JSON to read


@dataclass
class _Child:
    start: _Start
    proc: subprocess.Popen
    started: float

    @property
    def manifest(self) -> Manifest:
        return self.start.manifest

    @property
    def log(self) -> Path:
        return self.start.log


def child_command(m: Manifest, opts: BuildOptions) -> list[str]:
    """The `coderun tasks build` command line that builds `m` alone with `opts`."""
    return [sys.executable, "-m", "coderun", "tasks", "build", str(m.origin or m.name), "-j", str(opts.jobs),
            "--backend", opts.backend, *(["--include-weak"] if opts.include_weak else []),
            *([] if opts.rigor else ["--no-rigor"]), *(["--registry", opts.registry] if opts.registry else [])]


def env_command(m: Manifest) -> list[str]:
    """The `coderun env build` command line that builds `m`'s local environment (and baseline) alone."""
    return [sys.executable, "-m", "coderun", "env", "build", str(m.origin or m.name), "--json"]


def build_side_by_side(manifests: list[Manifest], settings: Settings, opts: BuildOptions, at_once: int, *,
                       on_event: Listener = silent) -> Iterator[tuple[Manifest, object]]:
    """(manifest, ProjectTaskReport or CoderunError) for each project as its build ends, `at_once` building
    at a time. With more projects than that, the environments are built first and the task builds start
    longest test suite first (`Queue`). On Ctrl-C (which reaches the children too: each stops as a lone
    build would, keeping its decisions) no new build starts and the ones under way are waited for."""
    folder = settings.runs / "tasks"
    slots = folder / f".slots-{os.getpid()}"
    JobSlots.create(slots, opts.cores)
    by_name = {m.name: m for m in manifests}
    queue = Queue([m.name for m in manifests], envs_first=len(manifests) > at_once)

    def next_start() -> _Start | None:
        picked = queue.next()
        if picked is None:
            return None
        stage, m = picked[0], by_name[picked[1]]
        if stage == "environment":
            return _Start(m, stage, env_command(m), folder / f"{m.name}.env.log",
                          "building its environment (log: {log})", out=folder / f"{m.name}.env.json")
        suite = f"its suite {queue.suites[m.name]:.0f}s, the longest waiting; " if m.name in queue.suites else ""
        return _Start(m, stage, child_command(m, opts), folder / f"{m.name}.log",
                      f"building its tasks ({suite}-j {opts.jobs}, sharing {opts.cores} slots; log: {{log}})",
                      {SLOTS_VARIABLE: str(slots)})

    try:
        for child in _each_ended(next_start, queue.waiting, at_once, on_event):
            code = child.proc.returncode
            if child.start.stage == "environment":
                queue.built(child.manifest.name, _suite_seconds(child.start.out) if code == 0 else None)
                if code != 0:
                    yield child.manifest, _failure(child, code)
            else:
                yield child.manifest, _outcome(child, settings, on_event)
    finally:
        shutil.rmtree(slots, ignore_errors=True)


class Queue:
    """What to start next: every project's environment first (in the order given), then its task build,
    longest baseline run of the test suite first among those whose environment is built. A task build's
    length is known only once it ends; its suite's time is the best sign of it known before (the mapped tests
    run once per verification body). Started in name order, the benchmark's longest build began 26th and
    the last one ran alone beside an idle core; longest first (LPT scheduling) packs them. Without
    `envs_first` (no more projects than builds at once), the task builds start at once in the order given."""

    def __init__(self, names: list[str], envs_first: bool) -> None:
        self.envs = list(names) if envs_first else []
        self.ready = [] if envs_first else list(names)   # task builds whose environment is built
        self.suites: dict[str, float] = {}
        self._pending = len(self.envs)                   # environments not yet built

    def next(self) -> tuple[str, str] | None:
        """("environment" | "tasks", project) to start now, or None when nothing can start before a build
        under way ends."""
        if self.envs:
            return "environment", self.envs.pop(0)
        if not self.ready:
            return None
        name = max(self.ready, key=lambda n: self.suites.get(n, 0.0))   # the first of equals
        self.ready.remove(name)
        return "tasks", name

    def built(self, name: str, suite_seconds: float | None) -> None:
        """`name`'s environment is built (its suite took `suite_seconds`), or failed (None: no task build)."""
        self._pending -= 1
        if suite_seconds is not None:
            self.suites[name] = suite_seconds
            self.ready.append(name)

    def waiting(self) -> int:
        """Projects whose task build has not started (their environment may be under way)."""
        return len(self.ready) + self._pending


def _suite_seconds(out: Path | None) -> float:
    """The baseline's test seconds from `coderun env build --json`'s output (0 when it cannot be read)."""
    with contextlib.suppress(OSError, ValueError, LookupError, TypeError):
        return float(json.loads(out.read_text(encoding="utf-8"))[0]["test_seconds"]) if out else 0.0
    return 0.0


def _each_ended(next_start: Callable[[], _Start | None], waiting: Callable[[], int], at_once: int,
                on_event: Listener) -> Iterator[_Child]:
    """Start what `next_start` gives while fewer than `at_once` run; each child as it ends."""
    running: list[_Child] = []
    last_progress = time.monotonic()
    try:
        while True:
            while len(running) < at_once and (start := next_start()) is not None:
                running.append(_start(start, on_event))
            if not running:
                return
            time.sleep(POLL_SECONDS)
            for child in [c for c in running if c.proc.poll() is not None]:
                running.remove(child)
                yield child
            if running and time.monotonic() - last_progress >= PROGRESS_EVERY_SECONDS:
                last_progress = time.monotonic()
                _say_progress(running, waiting(), on_event)
    except KeyboardInterrupt:
        on_event(Note("", f"interrupted: waiting for the {len(running)} builds under way to stop (each keeps "
                          "its decisions; the same command resumes them)"))
        for child in running:
            child.proc.wait()
        raise


def _start(start: _Start, on_event: Listener) -> _Child:
    log = start.log
    error_file(log).unlink(missing_ok=True)
    with log.open("w") as out, (start.out.open("w") if start.out else out) as stdout:
        proc = subprocess.Popen(start.command, stdout=stdout, stderr=out, stdin=subprocess.DEVNULL,
                                env={**os.environ, "COLUMNS": "120", ERROR_FILE_VARIABLE: str(error_file(log)),
                                     **start.env})
    on_event(Note(start.manifest.name, start.note.format(log=log)))
    return _Child(start, proc, time.monotonic())


def _outcome(child: _Child, settings: Settings, on_event: Listener) -> object:
    from coderun.tasks.reports import ProjectTaskReport
    from coderun.tasks.store import build_report

    name, code = child.manifest.name, child.proc.returncode
    if code != 0:
        return _failure(child, code)
    stored = build_report(settings, name)
    if stored is None:
        return TaskError(f"{name}: its build ended without storing a report", hint=f"see {child.log}")
    on_event(Note(name, f"built in {time.monotonic() - child.started:.0f}s"))
    return ProjectTaskReport.model_validate_json(stored)


def error_file(log: Path) -> Path:
    return log.with_suffix(".error.json")


def _failure(child: _Child, code: int) -> CoderunError:
    """The child's own error (as it printed it in its log), else what its exit and log say."""
    with contextlib.suppress(OSError, ValueError):
        return from_record(json.loads(error_file(child.log).read_text(encoding="utf-8")))
    return TaskError(f"{child.manifest.name}: its task build failed (exit {code})",
                     hint=f"the whole output is in {child.log}; `coderun tasks build "
                          f"{child.manifest.origin or child.manifest.name}` runs it alone (and resumes it)")


def _say_progress(running: list[_Child], waiting: int, on_event: Listener) -> None:
    now = time.monotonic()
    for child in running:
        last = next((line for line in reversed(tail(child.log, 5).splitlines()) if line.strip()), "starting")
        on_event(Note(child.manifest.name, f"{now - child.started:.0f}s: {last.strip()[:100]}"))
    if waiting:
        on_event(Note("", f"{waiting} projects waiting"))
