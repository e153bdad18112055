"""One evaluation run, from request to summary: the library side of `coderun eval`.

    session = EvalSession(settings, on_event)
    store = session.start(request)          # builds the tasks the run lacks, makes the run folder
    store = session.resume("RUN")           # or: an interrupted run, by folder or id
    summary = session.execute(store, jobs=..., cluster=...)

The session never prints: what happens is told as events (the dataclasses below), in order, to one
listener (the library's progress events among them, coderun.events); the CLI renders them. The samples file is read once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from coderun import events
from coderun.choices import Backend
from coderun.config import Settings
from coderun.errors import CoderunError, EnvironmentBuildError
from coderun.evaluation.evaluate import EvalRequest, RunSummary, execute, start_run
from coderun.evaluation.samples import Resolver, read_lines, sample_ids
from coderun.evaluation.store import Result, RunStore, resolve_run_dir
from coderun.events import Note
from coderun.manifests.schema import Manifest
from coderun.records import VerdictKind

if TYPE_CHECKING:
    from coderun.tasks.reports import ProjectTaskReport


@dataclass(frozen=True)
class BuildingTasks:
    """A project the run needs has no tasks stored: they are built first (`position` of `of`)."""

    project: str
    position: int
    of: int
    sample_ids: int     # how many of the samples' ids its manifest declares (0: named by --project)


@dataclass(frozen=True)
class TasksBuilt:
    report: ProjectTaskReport


@dataclass(frozen=True)
class BuildFailed:
    """A project's task build failed; the others go on (its samples become input problems)."""

    project: str
    error: CoderunError


@dataclass(frozen=True)
class InputProblem:
    """A sample or stored task the run cannot take (every one is also listed in the run folder)."""

    message: str


@dataclass(frozen=True)
class RunReady:
    """The run folder exists and holds its samples; `done` of them already have a verdict (a resume)."""

    path: Path
    total: int
    done: int
    resumed: bool
    backend: Backend
    isolation: str                   # "" for a run started before coderun recorded it
    isolation_note: str
    problems: tuple[str, ...] = ()   # the input problems (each told as InputProblem, all in the run folder)
    skipped: int = 0                 # samples for tasks outside the selection, left out


@dataclass(frozen=True)
class Graded:
    """A sample's verdict is recorded."""

    result: Result


# The run's own events, and the library's (coderun.events: messages, the task builds' steps and counts).
Event = events.Event | BuildingTasks | TasksBuilt | BuildFailed | InputProblem | RunReady | Graded
Listener = Callable[[Event], None]


class EvalSession:
    """Starts or resumes one run and evaluates it, telling `on_event` what happens."""

    def __init__(self, settings: Settings, on_event: Listener = lambda _e: None):
        self.settings, self.on_event = settings, on_event

    def start(self, req: EvalRequest) -> RunStore:
        from coderun.tasks import load_tasks

        lines = read_lines(req.samples) if req.samples else None
        fallback, failed = self._build_missing_tasks(req, sample_ids(lines) if lines is not None else [])
        tasks, left_out = [], []
        for name in req.projects or [None]:
            tasks += load_tasks(self.settings, project=name, level=req.level, include_weak=req.include_weak,
                                rigor=req.rigor)
            left_out += [t for t in load_tasks(self.settings, project=name, level=req.level, status="verified")
                         if t.trivially_passed(req.rigor) and not req.include_weak]
        if left_out:
            plus = " and pass+ lets it through" if req.rigor == "plus" else ""
            self.on_event(Note("", f"{len(left_out)} verified tasks are left out of this run: a trivial body passes "
                               f"their tests{plus} (weak or trivial in `coderun tasks list`); --include-weak "
                               "evaluates them"))
        if not tasks and failed:
            raise EnvironmentBuildError(f"no tasks to evaluate: building the tasks of {', '.join(failed)} failed "
                                        "(see above)")
        store, summary = start_run(req, self.settings, tasks, on_problem=lambda m: self.on_event(InputProblem(m)),
                                   fallback=fallback, sample_lines=lines)
        self._ready(store, resumed=False, problems=tuple(summary.problems), skipped=summary.skipped_samples)
        return store

    def resume(self, run: str | Path) -> RunStore:
        store = RunStore.open(resolve_run_dir(str(run), self.settings))
        self.on_event(Note("", f"resuming {store.path}: {len(store.results())} of {len(store.samples())} samples "
                           "already have a verdict"))
        self._ready(store, resumed=True)
        return store

    def execute(self, store: RunStore, *, jobs: int | None = None, cluster: str | None = None) -> RunSummary:
        """Evaluate every sample that has no verdict yet (infra ones again), each told as `Graded`."""
        return execute(store, self.settings, jobs=jobs, cluster=cluster,
                       progress=lambda r: self.on_event(Graded(r)))

    def _ready(self, store: RunStore, *, resumed: bool, problems: tuple[str, ...] = (), skipped: int = 0) -> None:
        env = store.environment()
        done = len([r for r in store.results() if r.verdict != VerdictKind.INFRA])
        self.on_event(RunReady(store.path, len(store.samples()), done, resumed, store.info().eval_config().backend,
                               env.isolation if env else "", env.isolation_note if env else "", problems, skipped))

    def _build_missing_tasks(self, req: EvalRequest, ids: list[str]) -> tuple[Resolver, dict[str, str]]:
        """Build the tasks the run needs and the store lacks: each --project P (`coderun eval --project P` on a
        fresh machine), and each project whose manifest declares a sample's id (or is named by it). A failed
        build is told and the others go on. Returns the resolver that explains the sample ids the selected
        tasks will not know, and the failed builds (project -> why)."""
        from coderun.manifests.schema import find_manifest, known_manifests
        from coderun.tasks import built_projects
        from coderun.tasks.declared import declared_ids, explaining_resolver, owner

        s = self.settings
        manifests, broken = known_manifests(s) if req.samples else ([], {})
        for e in broken.values():
            self.on_event(Note("", f"skipping a manifest that does not load: {e.message}", "warning"))
        declared = declared_ids(manifests)
        built = built_projects(s)
        todo: dict[str, tuple[Manifest, int]] = {n: (find_manifest(n, s), 0) for n in req.projects if n not in built}
        for key in ids:
            d = owner(declared, manifests, key)
            if d is not None and d.project not in built and (not req.projects or d.project in req.projects):
                m, n = todo.get(d.project, (d.manifest, 0))
                todo[d.project] = (m, n + 1)
        failed: dict[str, str] = {}
        if todo:  # the build machinery (analyzers, jedi) is imported only when something is to be built
            from coderun.tasks import build_tasks
        for i, (name, (m, n)) in enumerate(todo.items(), start=1):
            self.on_event(BuildingTasks(name, i, len(todo), n))
            try:
                for report in build_tasks(m, s, include_weak=req.include_weak, on_event=self.on_event).projects:
                    self.on_event(TasksBuilt(report))
            except CoderunError as e:
                failed[name] = e.message
                self.on_event(BuildFailed(name, e))
        resolver = explaining_resolver(s, declared, manifests, failed=failed, include_weak=req.include_weak,
                                       projects=req.projects, level=req.level, rigor=req.rigor)
        return resolver, failed
