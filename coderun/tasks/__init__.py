"""Tasks: the functions to regenerate, the tests that exercise each, and proof those tests discriminate.

    build_tasks(manifest, settings, backend="local", include_weak=False) -> TaskBuildReport
    load_tasks(settings, project=None, level=None, include_weak=False, status=None) -> list[Task]
    load_targets(settings, project=None) -> list[TargetOutcome]   each declared target: verified, or why not
    built_projects(settings) -> set of project names whose tasks are stored
    find_task(settings, "project/pkg/mod.py::Class.method" or an alias) -> Task
    unknown_projects(settings, names) -> set[str]     stored projects whose manifest is no longer found
    prune_tasks(settings) -> {project: tasks removed}

Stages: `discovery` (which functions), `coverage_map` (which tests reach each), `verify` (the original
passes them three times; a blanked body fails one), `store` (SQLite under $CODERUN_HOME, JSONL export).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from coderun.config import Settings
from coderun.errors import TaskError
from coderun.records import Level, TargetOutcome, Task, TaskStatus
from coderun.tasks import store

if TYPE_CHECKING:
    from coderun.tasks.build import build_tasks
    from coderun.tasks.reports import ProjectTaskReport, TaskBuildReport

__all__ = ["ProjectTaskReport", "TaskBuildReport", "build_tasks", "built_projects", "find_task", "in_benchmark",
           "load_targets", "load_tasks", "prune_tasks", "unknown_projects"]

def __getattr__(name: str) -> object:
    # The build (analyzers, jedi, coverage mapping) is imported when first used: reading stored tasks, as an
    # evaluation does, does not need it.
    if name == "build_tasks":
        from coderun.tasks.build import build_tasks

        return build_tasks
    if name in ("ProjectTaskReport", "TaskBuildReport"):
        from coderun.tasks import reports

        return getattr(reports, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def in_benchmark(task: Task, include_weak: bool, rigor: str = "base") -> bool:
    """Whether the task counts in the headline of a `rigor` evaluation: verified, and no trivial body gets that
    verdict on it (its tests, or pass+, check what the function does); the others only with --include-weak."""
    if include_weak:
        return task.status in (TaskStatus.VERIFIED, TaskStatus.WEAK)
    return task.status is TaskStatus.VERIFIED and not task.trivially_passed(rigor)


def built_projects(settings: Settings) -> set[str]:
    """Projects whose tasks are stored (a build finished, whatever it found)."""
    return set(store.build_reports(settings))


def load_tasks(settings: Settings, project: str | None = None, level: Level | str | None = None,
               include_weak: bool = False, status: TaskStatus | str | Iterable[TaskStatus | str] | None = None,
               rigor: str = "base") -> list[Task]:
    """Stored tasks. Without `status`: the benchmark of a `rigor` evaluation, i.e. verified tasks no trivial
    body passes (in_benchmark), plus the others when asked for here or when their project was built
    with --include-weak. `status="all"` gives every task."""
    lv = Level.parse(level).value if isinstance(level, str) else level.value if level else None
    if status is None:
        tasks = store.query(settings, project=project, level=lv,
                            statuses=[TaskStatus.VERIFIED.value, TaskStatus.WEAK.value])
        weak_ok = store.weak_included(settings)
        return [t for t in tasks if in_benchmark(t, include_weak or t.project in weak_ok, rigor)]
    if status == "all":
        return store.query(settings, project=project, level=lv)
    wanted = [status] if isinstance(status, str | TaskStatus) else list(status)
    return store.query(settings, project=project, level=lv, statuses=[_status(s).value for s in wanted])


def load_targets(settings: Settings, project: str | None = None) -> list[TargetOutcome]:
    """The outcome of every target the manifests declared, as their projects' latest builds left them."""
    return store.target_outcomes(settings, project)


def _status(value: TaskStatus | str) -> TaskStatus:
    if isinstance(value, TaskStatus):
        return value
    try:
        return TaskStatus(value)
    except ValueError:
        from coderun.errors import UsageError

        raise UsageError(f"unknown task status {value!r}; one of: all, "
                         f"{', '.join(s.value for s in TaskStatus)}") from None


def find_task(settings: Settings, task_id_or_alias: str) -> Task:
    """A stored task by its id or one of its aliases (e.g. a CoderEval _id), whatever its status."""
    tasks = store.query(settings)
    for t in tasks:
        if t.task_id == task_id_or_alias:
            return t
    hits = [t for t in tasks if task_id_or_alias in t.aliases]
    if len(hits) == 1:
        return hits[0]
    if hits:
        raise TaskError(f"{task_id_or_alias!r} is an alias of several tasks: "
                        f"{', '.join(t.task_id for t in hits)}", hint="use the task id")
    raise TaskError(f"no task {task_id_or_alias!r} in the store",
                    hint="build tasks with `coderun tasks build PROJECT`; `coderun tasks list` shows ids")


def unknown_projects(settings: Settings, names: Iterable[str]) -> set[str]:
    """Those of `names` that no manifest is known for (built-in, --projects / CODERUN_PROJECTS).
    An invalid manifest is an error, not an unknown project."""
    from coderun.errors import ProjectNotFound
    from coderun.manifests.schema import find_manifest

    out = set()
    for name in set(names):
        try:
            find_manifest(name, settings)
        except ProjectNotFound:
            out.add(name)
    return out


def prune_tasks(settings: Settings) -> dict[str, int]:
    """Remove every stored row of the projects whose manifest is no longer known; {project: tasks removed}."""
    stored = store.stored_projects(settings)
    gone = unknown_projects(settings, stored)
    store.remove_projects(settings, gone)
    return {p: stored[p] for p in sorted(gone)}
