"""Prove that a task's tests can tell right from wrong, before it enters the benchmark.

1. The original function passes its mapped tests in three runs. A test that fails in any run is flaky:
   it is dropped from the task and reported. Two of the runs execute the union of every task's tests at
   once (a test is flaky or not whatever task asks for it); the third runs each task's own tests, grouped
   exactly as the evaluation will group them.
2. With its body replaced by `raise NotImplementedError`, the function fails at least one remaining test;
   otherwise the task is `weak`: its tests do not notice the function missing.

Every run goes through a `TestRunner`, the same sandbox call the evaluation uses (see `sandbox_runner`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from coderun.errors import TaskError
from coderun.records import TaskStatus

ORIGINAL_RUNS = 3


class TestRunner(Protocol):
    """Runs `nodeids` on a fresh copy of the project, with `relfile` replaced by `new_source` when given;
    returns each node id's outcome ("passed", "failed", "error", "skipped"). A missing id did not pass.
    With `first_failure`, the run may stop at the first failing test (enough to prove a difference)."""

    __test__ = False

    def __call__(self, relfile: str | None, new_source: str | None, nodeids: list[str], *,
                 first_failure: bool = False) -> dict[str, str]: ...


@dataclass(frozen=True)
class TaskTests:
    """What verification needs to know about one task."""

    task_id: str
    file: str
    qualname: str
    lineno: int
    tests: tuple[str, ...]


@dataclass(frozen=True)
class Verification:
    task_id: str
    status: TaskStatus
    tests: tuple[str, ...]          # mapped tests that passed every run of the original
    flaky: tuple[str, ...]          # mapped tests that failed in at least one run of the original
    blank_failed: tuple[str, ...]   # remaining tests that did not pass with the body blanked (-x: or did not run)
    reason: str = ""

    def to_json(self, mapped: Iterable[str]) -> str:
        """The decision, with the mapped tests it was made for (kept while a build runs)."""
        return json.dumps({"task_id": self.task_id, "status": self.status.value, "tests": list(self.tests),
                           "flaky": list(self.flaky), "blank_failed": list(self.blank_failed),
                           "reason": self.reason, "mapped": list(mapped)})

    @classmethod
    def from_json(cls, text: str, task: TaskTests) -> Verification | None:
        """A kept decision for `task`; None when it was made for other tests (or cannot be read)."""
        try:
            d = json.loads(text)
            if d["task_id"] != task.task_id or d["mapped"] != list(task.tests):
                return None
            return cls(d["task_id"], TaskStatus(d["status"]), tuple(d["tests"]), tuple(d["flaky"]),
                       tuple(d["blank_failed"]), d["reason"])
        except (ValueError, KeyError, TypeError):
            return None


def unstable_tests(runner: TestRunner, nodeids: Iterable[str], runs: int) -> tuple[set[str], set[str]]:
    """(failed in at least one of `runs` runs, failed in every run) for the union of `nodeids`."""
    ids = sorted(set(nodeids))
    if not ids or runs <= 0:
        return set(), set()
    failed_any: set[str] = set()
    failed_all = set(ids)
    for _ in range(runs):
        outcomes = runner(None, None, ids)
        bad = {n for n in ids if outcomes.get(n) != "passed"}
        failed_any |= bad
        failed_all &= bad
    return failed_any, failed_all


def verify_task(task: TaskTests, runner: TestRunner, original_file: str,
                blank: Callable[[str, str, int], str], *, flaky: set[str], always_failed: set[str]
                ) -> Verification:
    """Check one task given the outcome of the shared runs (`flaky`, `always_failed`).

    `blank(file_source, qualname, lineno)` returns the file with the function's body blanked.
    """
    if not task.tests:
        return Verification(task.task_id, TaskStatus.UNCOVERED, (), (), (), "no test executes the body")
    own = runner(task.file, None, list(task.tests))
    dropped = {n for n in task.tests if n in flaky or own.get(n) != "passed"}
    kept = tuple(n for n in task.tests if n not in dropped)
    if not kept:
        broken = all(n in always_failed and own.get(n) != "passed" for n in task.tests)
        status = TaskStatus.BROKEN if broken else TaskStatus.FLAKY
        why = "the original fails every mapped test" if broken else "every mapped test is flaky"
        return Verification(task.task_id, status, (), tuple(sorted(dropped)), (), why)
    try:
        blanked = blank(original_file, task.qualname, task.lineno)
    except TaskError as e:
        return Verification(task.task_id, TaskStatus.BROKEN, kept, tuple(sorted(dropped)), (),
                            f"cannot blank the body: {e.message}")
    outcomes = runner(task.file, blanked, list(kept), first_failure=True)
    failed = tuple(n for n in kept if outcomes.get(n) != "passed")
    if not failed:
        return Verification(task.task_id, TaskStatus.WEAK, kept, tuple(sorted(dropped)), (),
                            "the tests pass with the body replaced by `raise NotImplementedError`")
    return Verification(task.task_id, TaskStatus.VERIFIED, kept, tuple(sorted(dropped)), failed)
