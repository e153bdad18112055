"""Executors: how a sample's tests get run, one module each, both using only the sandbox interface.

naive     (naive.py) for every sample a fresh sandbox, a fresh copy of the project, `python -m pytest` on
          the task's mapped node ids, then the sandbox is torn down: the reference for correctness and speed.
workers   (workers.py, the default) one long-lived worker per (project, slot) inside a sandbox started once,
          forking a child per sample; a sample it cannot run goes to the naive path, visibly.

An executor is a pool: a context manager with `run(project, SampleRun) -> Evidence` and `notes` (what a
person should know about the run, e.g. fallbacks). `make_pool` picks one by name.
"""

from __future__ import annotations

from typing import Protocol

from coderun.choices import Backend, Executor
from coderun.records import Evidence
from coderun.runner.evidence import SampleRun
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


def make_pool(executor: Executor | str, backend: Backend | str, specs: dict[str, SandboxSpec], jobs: int
              ) -> WorkerPool | NaivePool:
    """The pool of `executor` (a name is checked here: a UsageError naming the choices)."""
    return _POOLS[Executor.parse(executor)](Backend.parse(backend), specs, jobs)


__all__ = ["NaivePool", "Pool", "WorkerLost", "WorkerPool", "make_pool", "run_naive"]
