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

from coderun.errors import UsageError
from coderun.records import Evidence
from coderun.runner.execute import SampleRun
from coderun.runner.executors.naive import NaivePool, run_naive
from coderun.runner.executors.workers import WorkerLost, WorkerPool
from coderun.sandbox import SandboxSpec

EXECUTORS = ("workers", "naive")


class Pool(Protocol):
    name: str
    notes: list[str]

    def __enter__(self) -> Pool: ...

    def __exit__(self, *exc: object) -> None: ...

    def run(self, project: str, run: SampleRun) -> Evidence: ...


def executor_names() -> tuple[str, ...]:
    return EXECUTORS


def make_pool(executor: str, backend: str, specs: dict[str, SandboxSpec], jobs: int) -> WorkerPool | NaivePool:
    if executor == "workers":
        return WorkerPool(backend, specs, jobs)
    if executor == "naive":
        return NaivePool(backend, specs, jobs)
    raise UsageError(f"unknown executor {executor!r}; use {' or '.join(EXECUTORS)}")


__all__ = ["EXECUTORS", "NaivePool", "Pool", "WorkerLost", "WorkerPool", "executor_names", "make_pool", "run_naive"]
