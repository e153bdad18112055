"""Where a task's project source is: the project's checkout (read only), at the commit its tasks came from."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from coderun.config import Settings
from coderun.envs.sources import checkout
from coderun.errors import TaskError
from coderun.manifests.schema import find_manifest
from coderun.records import Task


def checkout_resolver(settings: Settings) -> Callable[[Task], Path]:
    """task -> its project's worktree; each project is checked out once."""
    cache: dict[str, Path] = {}

    def resolve(task: Task) -> Path:
        if task.project not in cache:
            co = checkout(find_manifest(task.project, settings), settings)
            # A `path` source is snapshotted afresh on each checkout (its commit id changes with the time
            # of the snapshot), so only git and PyPI sources can be held to the tasks' commit.
            if co.kind != "path" and co.commit != task.commit:
                raise TaskError(f"{task.project}: tasks were built from commit {task.commit[:12]}, "
                                f"the checkout is at {co.commit[:12]}",
                                hint=f"rebuild them: coderun tasks build {task.project}")
            cache[task.project] = co.path
        return cache[task.project]

    return resolve
