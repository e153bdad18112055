"""The projects of a run, ready to run its tasks: each one's manifest, sandbox (with the run's isolation),
original tree and recorded environment."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from coderun.choices import Backend, Isolation
from coderun.config import Settings
from coderun.envs.sources import checkout
from coderun.errors import TaskError
from coderun.evaluation.store import RunConfig, RunStore
from coderun.manifests.schema import Manifest, find_manifest
from coderun.records import ProjectEnvironment, ProjectSource, Task
from coderun.sandbox import SandboxSpec
from coderun.sandbox.project import isolation_of, original_tree, project_sandbox, top_level_packages


@dataclass(frozen=True)
class RunProject:
    """A project as a run executes it: its manifest, sandbox, original tree and installed packages."""

    manifest: Manifest
    spec: SandboxSpec
    tree: Path
    packages: frozenset[str]
    environment: ProjectEnvironment



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


def run_projects(names: list[str], config: RunConfig, settings: Settings,
                 tasks: dict[str, Task], isolation: str = "auto", run_id: str = "") -> dict[str, RunProject]:
    """Each named project ready to run the run's tasks (environments built when missing); a TaskError when
    its source has moved past the commit the tasks were built at. `run_id` labels the run's sandboxes
    (docker: `org.coderun.run`), so a run's containers can be found among others'."""
    out = {}
    for name in names:
        manifest = find_manifest(config.manifests.get(name) or name, settings)
        co = checkout(manifest, settings)
        spec, environment = project_sandbox(manifest, settings, config.backend)  # builds the pre_install tree too
        spec = replace(spec, isolation=isolation, run_id=run_id or spec.run_id)
        tree, co_commit = original_tree(manifest, settings, co.path), co.commit
        commits = {t.commit for t in tasks.values() if t.project == name}
        if commits - {co_commit}:
            raise TaskError(f"{name}: the run's tasks were built at {sorted(commits)[0][:12]} but the source is "
                            f"now at {co_commit[:12]}", hint=f"rebuild them: coderun tasks build {name}")
        environment = environment.model_copy(
            update={"source": ProjectSource(kind=co.kind, commit=co.commit, origin=co.origin)})
        out[name] = RunProject(manifest, spec, tree, top_level_packages(tree / manifest.import_root), environment)
    return out
