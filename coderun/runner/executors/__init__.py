"""Executors: how a sample's tests get run, one module each, both using only the sandbox interface.

naive     (naive.py) for every sample a fresh sandbox, a fresh copy of the project, `python -m pytest` on
          the task's mapped node ids, then the sandbox is torn down: the reference for correctness and speed.
workers   (workers.py, the default) one long-lived worker per (project, slot) inside a sandbox started once,
          forking a child per sample; a sample it cannot run goes to the naive path, visibly.
cluster   (cluster.py, `--cluster`) the workers executor on the nodes of a Ray cluster: a Ray actor per
          (project, slot) holds a worker; a unit whose actor is lost with its node runs again elsewhere.

An executor is a pool: a context manager with `run(project, SampleRun) -> Evidence` and `notes` (what a
person should know about the run, e.g. fallbacks). `make_pool` picks one by name.
"""

from __future__ import annotations

from typing import Protocol

from coderun.choices import Backend, Executor
from coderun.errors import UsageError
from coderun.records import Evidence
from coderun.runner.evidence import SampleRun
from coderun.runner.executors.cluster import ClusterPool
from coderun.runner.executors.naive import NaivePool, run_naive
from coderun.runner.executors.workers import WorkerLost, WorkerPool
from coderun.sandbox import SandboxSpec

_POOLS = {Executor.WORKERS: WorkerPool, Executor.NAIVE: NaivePool}


class Pool(Protocol):
    name: str
    notes: list[str]

    def __enter__(self) -> Pool: ...

    def __exit__(self, *exc: object) -> None: ...

    def run(self, project: str, run: SampleRun) -> Evidence: ...


def make_pool(executor: Executor | str, backend: Backend | str, specs: dict[str, SandboxSpec], jobs: int, *,
              cluster: str | None = None, manifests: dict[str, object] | None = None,
              registry: str | None = None) -> Pool:
    """The pool of `executor` (a name is checked here: a UsageError naming the choices); with `cluster`, the
    workers executor on a Ray cluster (`manifests` let a node build a project's environment itself, `registry`
    pull its image)."""
    executor, backend = Executor.parse(executor), Backend.parse(backend)
    if cluster:
        if executor is not Executor.WORKERS:
            raise UsageError(f"--cluster runs the workers executor on every node, not {executor}",
                             hint="drop --executor, or run without --cluster")
        return ClusterPool(backend, specs, jobs, cluster=cluster, manifests=manifests, registry=registry)
    return _POOLS[executor](backend, specs, jobs)


__all__ = ["ClusterPool", "NaivePool", "Pool", "WorkerLost", "WorkerPool", "make_pool", "run_naive"]
