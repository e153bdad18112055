"""The projects of a run, ready to run its tasks: each one's run context (runner/project.py) with the run's
isolation and id."""

from __future__ import annotations

from collections.abc import Sequence

from coderun.choices import Backend, Isolation
from coderun.config import Settings
from coderun.evaluation.store import RunConfig, RunStore
from coderun.records import Task
from coderun.runner.project import RunProject, run_projects
from coderun.sandbox.project import isolation_of


def run_isolation(store: RunStore, config: RunConfig) -> str:
    """The isolation the run's local sandboxes must have: what the run recorded when it started. A run that
    started in namespaces goes on only in namespaces (a resume on a machine without them stops, saying so)."""
    env = store.environment()
    recorded = env.isolation if env is not None else ""
    if config.backend is Backend.DOCKER or not recorded:
        return config.isolation.value
    if recorded == "namespaces":
        isolation_of(config.backend, Isolation.NAMESPACES)
    return recorded


def projects_of_run(store: RunStore, names: Sequence[str], settings: Settings,
                    tasks: dict[str, Task]) -> dict[str, RunProject]:
    """The named projects as the run executes them: its backend, manifests, isolation and id."""
    config = store.info().eval_config()
    return run_projects(sorted(set(names)), config.backend, settings, tasks, manifests=config.manifests,
                        isolation=run_isolation(store, config), run_id=store.info().run_id)
