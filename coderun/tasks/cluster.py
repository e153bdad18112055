"""`coderun tasks build --cluster`: each project's tasks built by a Ray task on some node of a cluster.

A project is built by one Ray task (one CPU) on whichever node Ray picks, projects in parallel. The node
builds with its own settings (`load_settings()` there: its CODERUN_HOME, its environments, its task store),
exactly as `coderun tasks build` would on it, and sends back what it stored: the report, the tasks, the
target outcomes (or, for a failed build, why each target failed). The driver yields each project as it
finishes and saves it into its own task store, unless the node wrote into that very store (same host, same
store path): one machine, or a CODERUN_HOME the nodes share with the driver on the same host.

A node lost mid-build (its raylet or worker gone) is not retried by Ray (whose retries the driver cannot see):
the driver submits the build again, at most MAX_ATTEMPTS times, and says so. On the node it resumes from the
decisions kept in that node's store when Ray places it where the lost one had run, or on a shared store.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from coderun.config import Settings
from coderun.errors import CoderunError, EnvironmentBuildError, SandboxError
from coderun.events import Listener, Note, silent
from coderun.manifests.schema import Manifest
from coderun.records import TargetOutcome, Task, TaskInputs
from coderun.tasks import store
from coderun.tasks.reports import ProjectTaskReport

MAX_ATTEMPTS = 3   # submissions of one project's build while nodes are lost under it


@dataclass(frozen=True)
class StoreAddress:
    """Where a task store is: the host and the store's resolved path."""

    host: str
    path: str

    @classmethod
    def of(cls, settings: Settings) -> StoreAddress:
        return cls(os.uname().nodename, str(settings.store_path.resolve()))


@dataclass
class NodeBuild:
    """What a node sends back for one project: a finished build (report, tasks, targets) or a failure."""

    project: str
    node: str
    same_store: bool                       # the node wrote into the driver's own store
    report: ProjectTaskReport | None = None
    tasks: list[Task] = field(default_factory=list)
    targets: list[TargetOutcome] = field(default_factory=list)
    inputs: list[TaskInputs] = field(default_factory=list)  # the pass+ inputs of its tasks
    error: str | None = None               # the CoderunError's class name, for a failed build
    message: str = ""
    hint: str | None = None


def build_on_node(manifest: Manifest, backend: str, include_weak: bool, jobs: int,
                  driver_store: StoreAddress, registry: str | None = None, rigor: bool = True) -> NodeBuild:
    """The Ray task: build one project with this node's settings and store (its image pulled from the
    driver's registry when the node has none of its own); what it stored, to send back."""
    from coderun.config import load_settings
    from coderun.tasks.build import build_project, failed_outcomes

    settings = load_settings()
    settings = replace(settings, registry=settings.registry or registry)
    here = StoreAddress.of(settings)
    out = NodeBuild(manifest.name, here.host, same_store=here == driver_store)
    try:
        out.report = build_project(manifest, settings, backend, include_weak, jobs=jobs, rigor=rigor)
    except CoderunError as e:
        out.error, out.message, out.hint = type(e).__name__, e.message, e.hint
        out.targets = failed_outcomes(manifest, e)
        return out
    if not out.same_store:
        out.tasks = store.query(settings, project=manifest.name)
        out.targets = store.target_outcomes(settings, manifest.name)
        out.inputs = list(store.load_inputs(settings, [t.task_id for t in out.tasks]).values())
    return out


class NodeBuildError(CoderunError):
    """A project's build failed on a node (its message and hint are the node's error's)."""


def save_on_driver(settings: Settings, done: NodeBuild) -> None:
    """Keep what the node built (or why it failed) in the driver's store, unless the node wrote it there."""
    if done.same_store:
        return
    if done.report is None:
        store.save_failed_targets(settings, done.project, done.targets)
        return
    store.save_project(settings, done.project, done.report.commit, done.tasks, done.report.model_dump_json(),
                       done.report.include_weak, targets=done.targets)
    store.save_rigor(settings, done.project, done.tasks, done.inputs)


def build_on_cluster(manifests: list[Manifest], settings: Settings, backend: str, include_weak: bool,
                     jobs: int, cluster: str, *, rigor: bool = True, on_event: Listener = silent
                     ) -> Iterator[tuple[Manifest, ProjectTaskReport | CoderunError]]:
    """(manifest, report or error) for each project as its build finishes on the cluster, saved in the driver's
    store first. A lost node is said as a warning (a Note)."""
    from coderun.runner.executors.cluster import parse_cluster, require_ray
    from coderun.tasks.build import failed_outcomes

    init_args = parse_cluster(cluster)
    ray = require_ray()
    started = not ray.is_initialized()
    if started:
        ray.init(**init_args, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        remote = ray.remote(num_cpus=1, max_retries=0)(build_on_node)
        here = StoreAddress.of(settings)
        by_name = {m.name: m for m in manifests}
        attempts = dict.fromkeys(by_name, 1)

        def submit(m: Manifest):
            return remote.remote(m, backend, include_weak, jobs, here, settings.registry, rigor)

        pending = {submit(m): m.name for m in manifests}
        while pending:
            (ref,), _ = ray.wait(list(pending), num_returns=1)
            name = pending.pop(ref)
            m = by_name[name]
            try:
                done: NodeBuild = ray.get(ref)
            except ray.exceptions.RayTaskError as e:  # raised on the node outside coderun's errors: a bug there
                yield m, EnvironmentBuildError(f"{name}: the build failed on its node: {e}")
                continue
            except ray.exceptions.RayError as e:       # the node or its worker was lost
                if attempts[name] >= MAX_ATTEMPTS:
                    lost = SandboxError(f"{name}: lost the node building it {MAX_ATTEMPTS} times "
                                        f"({type(e).__name__})")
                    store.save_failed_targets(settings, name, failed_outcomes(m, lost))
                    yield m, lost
                    continue
                attempts[name] += 1
                on_event(Note(name, f"the node building it was lost ({type(e).__name__}); building it again "
                                    f"on another node (attempt {attempts[name]} of {MAX_ATTEMPTS})"))
                pending[submit(m)] = name
                continue
            save_on_driver(settings, done)
            yield m, (done.report if done.report is not None else
                      NodeBuildError(f"{done.message} (on node {done.node})", hint=done.hint))
    finally:
        if started:
            ray.shutdown()
