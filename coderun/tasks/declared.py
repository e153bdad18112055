"""Task ids the manifests know before any task is built, and why a known id cannot be evaluated.

    declared_ids(manifests) -> {id: Declared}        each explicit target's task id and aliases
    owner(declared, manifests, id) -> Declared | None  also "project/file.py::name" of a known project
    explaining_resolver(settings, declared, manifests, failed=...) -> Resolver

`coderun eval --samples` uses the first two to build the projects a samples file needs, and the last to
turn an id the selected tasks do not know into a precise problem ("declared but not verified: weak",
"its project failed to build") instead of "unknown task id", which stays for ids no manifest knows.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass

from coderun.config import Settings
from coderun.manifests.schema import Manifest, TaskTarget
from coderun.records import Level, Task, TaskStatus, task_id
from coderun.tasks import load_tasks, store
from coderun.tasks.reports import ProjectTaskReport
from coderun.tasks.resolve import ProblemKind, Resolver, TaskRef, Unavailable, default_prompt


@dataclass(frozen=True)
class Declared:
    """A task id a manifest knows: an explicit target (by its id or an alias), or an id of the
    `project/file.py::qualname` form naming a known project (a discovered task, once built)."""

    manifest: Manifest
    task_id: str
    target: TaskTarget | None = None

    @property
    def project(self) -> str:
        return self.manifest.name

    def by(self, key: str) -> str:
        if self.target is None:
            return f"task {key} names project {self.project}"
        return f"task {key} is declared by manifest {self.manifest.origin or self.project}"


def declared_ids(manifests: Iterable[Manifest]) -> dict[str, Declared]:
    """Every explicit target's task id and aliases, for manifests with distinct names."""
    out: dict[str, Declared] = {}
    for m in manifests:
        for t in m.tasks.targets:
            d = Declared(m, task_id(m.name, t.file, t.qualname), t)
            for key in (d.task_id, *t.aliases):
                out.setdefault(key, d)
    return out


def owner(declared: dict[str, Declared], manifests: Iterable[Manifest], key: str) -> Declared | None:
    """The manifest that knows `key`: it declares it, or `key` is `project/file.py::qualname` of it."""
    if key in declared:
        return declared[key]
    project, _, rest = key.partition("/")
    file, sep, qualname = rest.partition("::")
    if not (sep and file.endswith(".py") and qualname):
        return None
    return next((Declared(m, key) for m in manifests if m.name == project), None)


def _stored(settings: Settings, include_weak: bool, rigor: str
            ) -> tuple[dict[str, Task], set[str], dict[str, ProjectTaskReport]]:
    """Every stored task by id and alias, the benchmark's ids, the build reports."""
    by_key: dict[str, Task] = {}
    for t in store.query(settings):
        for key in (t.task_id, *t.aliases):
            by_key.setdefault(key, t)
    benchmark = {t.task_id for t in load_tasks(settings, include_weak=include_weak, rigor=rigor)}
    return by_key, benchmark, {p: ProjectTaskReport.model_validate_json(r)
                               for p, r in store.build_reports(settings).items()}


def explaining_resolver(settings: Settings, declared: dict[str, Declared], manifests: list[Manifest], *,
                        failed: dict[str, str], include_weak: bool = False, projects: Iterable[str] = (),
                        level: Level | None = None, rigor: str = "base") -> Resolver:
    """A resolver for the ids the selected tasks do not know (ask the selection's resolver first).

    A stored task (any status) or a declared one of a project outside the selection (`projects`,
    `level`) resolves, so the run counts its samples as left out. A stored task that is not in the
    benchmark is `Unavailable` with its build's reason; so is a declared task of a project whose build
    failed (`failed`: project -> why) or whose build did not produce it. Other ids stay unknown (None).
    """
    wanted = set(projects)
    # read when the first id is asked about: a run with no samples, or only known ones, never reads them
    stored = functools.cache(lambda: _stored(settings, include_weak, rigor))

    def selected(project: str, lv: Level | None = None) -> bool:
        return (not wanted or project in wanted) and (level is None or lv is None or lv == level)

    def resolve(key: str) -> TaskRef | Unavailable | None:
        by_key, benchmark, reports = stored()
        d = owner(declared, manifests, key)
        task = by_key.get(key) or (by_key.get(d.task_id) if d else None)
        if task is not None:
            if task.task_id in benchmark or not selected(task.project, task.level):
                return TaskRef(task.task_id, default_prompt(task))
            why = reports[task.project].reasons.get(task.task_id) if task.project in reports else None
            head = f"{d.by(key)} but" if d and d.target else f"task {key}"
            note = f"; the manifest says: {d.target.status_note}" if d and d.target and d.target.status_note else ""
            if task.status is TaskStatus.VERIFIED:   # left out of the headline: see tasks.in_benchmark
                return Unavailable(task.task_id, ProblemKind.UNVERIFIED, f"{head} is left out: trivial bodies "
                                   f"pass its tests ({', '.join(task.trivially_passed(rigor))}"
                                   f"{', pass+ too' if rigor == 'plus' else ''}); --include-weak evaluates it{note}")
            return Unavailable(task.task_id, ProblemKind.UNVERIFIED,
                               f"{head} was not verified ({task.status.value}{': ' + why if why else ''}{note})")
        if d is None:
            return None
        if not selected(d.project):
            return TaskRef(d.task_id, "")  # outside --project: left out, like a stored task
        if d.project in failed:
            return Unavailable(d.task_id, ProblemKind.UNBUILT,
                               f"{d.by(key)}, but building {d.project}'s tasks failed: {failed[d.project]}")
        report = reports.get(d.project)
        if d.target is None:  # a discovered task's id: known only once built
            return None
        if report is None:
            return Unavailable(d.task_id, ProblemKind.UNBUILT, f"{d.by(key)}, but {d.project}'s tasks are not "
                               f"built; build them: coderun tasks build {d.project}")
        if d.target.function in report.unresolved:
            note = f" (the manifest says: {d.target.status_note})" if d.target.status_note else ""
            return Unavailable(d.task_id, ProblemKind.UNBUILT, f"{d.by(key)}, but {d.target.function} is not "
                               f"in {d.project}'s source at {report.commit[:12]}{note}")
        return Unavailable(d.task_id, ProblemKind.UNBUILT, f"{d.by(key)}, but {d.project}'s stored tasks do not "
                           f"have it (built from an older manifest?); rebuild them: coderun tasks build {d.project}")

    return resolve
