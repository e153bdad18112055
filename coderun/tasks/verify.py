"""Prove that a task's tests can tell right from wrong, before it enters the benchmark.

1. The original function passes its mapped tests in three runs. A test that fails in any run is flaky:
   it is dropped from the task and reported. Two of the runs execute the union of every task's tests at
   once (a test is flaky or not whatever task asks for it); the third runs each task's own tests, grouped
   exactly as the evaluation will group them. When that drops a test, the original runs once more on what is
   left, which is what the evaluation will run: a test that then fails needed the dropped ones before it
   (state a test leaves behind, a service only an earlier test sets up) and is dropped too, until what is
   left passes alone. Tasks with the very same tests share these runs (`OriginalRuns`): one run of the same
   tests on the same code, not one per task.
2. With its body replaced by `raise NotImplementedError`, the function fails at least one remaining test;
   otherwise the task is `weak`: its tests do not notice the function missing.
3. With its body replaced by each other trivial body (tasks/trivial: `return None`, the first argument, an
   empty value of the return type, a constant the original returned), it should fail one too; a task whose
   tests one of them passes is kept but marked (`trivial_passes`, their names; `pass_stub_passes` when
   `return None` is one): its tests do not check what the function returns.

With `tests.configurations`, every run is made in each configuration: a test the original fails in every
run of one configuration (skipped there, say) is not expected there, and a stub is caught when it fails in
any configuration.

Every run goes through a `TestRunner`, the same sandbox call the evaluation uses (see `sandbox_runner`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Protocol

from coderun.errors import TaskError
from coderun.parallel import parallel
from coderun.records import TaskStatus
from coderun.tasks.trivial import NONE, RAISE_STATEMENT

ORIGINAL_RUNS = 3
STUB_RUN, TRIVIAL_RUN = "stub", "trivial bodies"   # the `kind` of their runs (the build's time by kind)
SETTLE_RUNS = 3   # re-runs of the original on what is left after drops (each drops at least one more test)


class TestRunner(Protocol):
    """Runs `nodeids` on a fresh copy of the project, with `relfile` replaced by `new_source` when given;
    returns each node id's outcome ("passed", "failed", "error", "skipped"). A missing id did not pass.
    With `first_failure`, the run may stop at the first failing test (enough to prove a difference). `kind`:
    what the run is for (STUB_RUN, TRIVIAL_RUN; "" for the original's), as the build reports its time."""

    __test__ = False

    def __call__(self, relfile: str | None, new_source: str | None, nodeids: list[str], *,
                 first_failure: bool = False, configuration: str = "", kind: str = "") -> dict[str, str]: ...


@dataclass(frozen=True)
class TaskTests:
    """What verification needs to know about one task."""

    task_id: str
    file: str
    qualname: str
    lineno: int
    tests: tuple[str, ...]
    # The trivial bodies (name, statement) tried once `raise` is caught: tasks/trivial's, `raise` aside.
    trivial: tuple[tuple[str, str], ...] = ((NONE, "return None"),)
    # The differential step's payload exploring the original (pass+, plus/derive), made at the end of the
    # task's own runs of the original: the last one is the run pass+ needs, on the tests the task keeps.
    explore: str | None = None


@dataclass(frozen=True)
class Shared:
    """The shared runs of the original in one configuration ("": tests.env alone)."""

    flaky: frozenset[str]            # failed in some run, not all
    always_failed: frozenset[str]    # failed in every run


@dataclass(frozen=True)
class Verification:
    task_id: str
    status: TaskStatus
    tests: tuple[str, ...]          # mapped tests that passed every run of the original (in some configuration)
    flaky: tuple[str, ...]          # mapped tests that failed in at least one run of the original
    blank_failed: tuple[str, ...]   # remaining tests that did not pass with the body blanked (-x: or did not run)
    reason: str = ""
    # Per configuration (name, tests the original passes there); empty without tests.configurations.
    configurations: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # The trivial bodies (names, of TaskTests.trivial) with which every configuration's tests pass.
    trivial_passes: tuple[str, ...] = ()
    # With TaskTests.explore: the run of the original on exactly `tests` that explored, (outcomes, record);
    # None when another task's run of the same tests was shared, or when resumed. Not kept with the decision.
    explored: tuple[dict[str, str], dict | None] | None = field(default=None, compare=False)

    @property
    def pass_stub_passes(self) -> bool:
        """Every configuration's tests pass with the body replaced by `return None`."""
        return NONE in self.trivial_passes

    def to_json(self, task: TaskTests) -> str:
        """The decision, with the mapped tests and trivial bodies it was made for (kept while a build runs)."""
        return json.dumps({"task_id": self.task_id, "status": self.status.value, "tests": list(self.tests),
                           "flaky": list(self.flaky), "blank_failed": list(self.blank_failed),
                           "reason": self.reason, "mapped": list(task.tests),
                           "trivial": [list(b) for b in task.trivial],
                           "configurations": [[c, list(t)] for c, t in self.configurations],
                           "trivial_passes": list(self.trivial_passes)})

    @classmethod
    def from_json(cls, text: str, task: TaskTests) -> Verification | None:
        """A kept decision for `task`; None when it was made for other tests or other trivial bodies (a
        recording that changed a constant, say), or cannot be read."""
        try:
            d = json.loads(text)
            if (d["task_id"] != task.task_id or d["mapped"] != list(task.tests)
                    or d["trivial"] != [list(b) for b in task.trivial]):
                return None
            return cls(d["task_id"], TaskStatus(d["status"]), tuple(d["tests"]), tuple(d["flaky"]),
                       tuple(d["blank_failed"]), d["reason"],
                       tuple((c, tuple(t)) for c, t in d["configurations"]), tuple(d["trivial_passes"]))
        except (ValueError, KeyError, TypeError):
            return None


def unstable_tests(runner: TestRunner, nodeids: Iterable[str], runs: int, configuration: str = "",
                   jobs: int = 1) -> tuple[set[str], set[str]]:
    """(failed in at least one of `runs` runs, failed in every run) for the union of `nodeids`, `jobs`
    runs at a time."""
    ids = sorted(set(nodeids))
    if not ids or runs <= 0:
        return set(), set()
    failed_any: set[str] = set()
    failed_all = set(ids)
    for _, outcomes in parallel(lambda _: runner(None, None, ids, configuration=configuration),
                                list(range(runs)), jobs):
        bad = {n for n in ids if outcomes.get(n) != "passed"}
        failed_any |= bad
        failed_all &= bad
    return failed_any, failed_all


# (node ids, the differential payload, configuration) -> (outcomes, the step's record): a run of the original
# that ends with the differential step (tasks/sandbox_runs: SandboxTests.explore_original)
Explorer = Callable[[list[str], str, str], "tuple[dict[str, str], dict | None]"]


class OriginalRuns:
    """The runs of the original on a task's own tests, made once for every task that asks for the very same
    tests in the same order and configuration (a file's functions that one test class exercises): the same
    run of the same code, so its outcome is theirs too. Safe across threads: a task asking while the run is
    under way waits for it. With an `explorer`, the run a task makes itself (default configuration) ends with
    its `explore` step, kept for it (`explored`)."""

    def __init__(self, runner: TestRunner, explorer: Explorer | None = None) -> None:
        self._runner, self._explorer = runner, explorer
        self._lock = threading.Lock()
        self._runs: dict[tuple[str, tuple[str, ...]], Future] = {}
        self._explored: dict[str, tuple[tuple[str, ...], tuple[dict[str, str], dict | None]]] = {}

    def __call__(self, task: TaskTests, tests: Sequence[str], configuration: str) -> dict[str, str]:
        key = (configuration, tuple(tests))
        with self._lock:
            run = self._runs.get(key)
            mine = run is None
            if mine:
                run = self._runs[key] = Future()
        if mine:
            try:
                run.set_result(self._run(task, tuple(tests), configuration))
            except BaseException as e:
                run.set_exception(e)
                raise
        return run.result()

    def _run(self, task: TaskTests, tests: tuple[str, ...], configuration: str) -> dict[str, str]:
        if self._explorer is None or not task.explore or configuration:
            return self._runner(task.file, None, list(tests), configuration=configuration)
        outcomes, record = self._explorer(list(tests), task.explore, configuration)
        with self._lock:
            self._explored[task.task_id] = (tests, (outcomes, record))
        return outcomes

    def explored(self, task: TaskTests, tests: Sequence[str]) -> tuple[dict[str, str], dict | None] | None:
        """The task's own exploring run, when it ran exactly `tests` (the tests it keeps)."""
        ran = self._explored.get(task.task_id)
        return ran[1] if ran is not None and ran[0] == tuple(tests) else None


def verify_task(task: TaskTests, runner: TestRunner, original_file: str,
                blank: Callable[[str, str, int, str], str], shared: dict[str, Shared],
                originals: OriginalRuns | None = None) -> Verification:
    """Check one task given the outcome of the shared runs in each configuration (`shared`, keyed by
    configuration name; {"": ...} without configurations).

    `blank(file_source, qualname, lineno, statement)` returns the file with the function's body replaced
    by `statement`. `raise NotImplementedError` decides `weak`; each of `task.trivial` runs once it is
    caught, like it (every configuration, stopping at the first failure). `originals`: the runs of the
    original shared with the other tasks of the build (a task of its own without).
    """
    if not task.tests:
        return Verification(task.task_id, TaskStatus.UNCOVERED, (), (), (), "no test executes the body")
    originals = originals or OriginalRuns(runner)
    per_conf, flaky = _originals(task, originals, shared)
    per_conf, flaky = _settle(task, originals, per_conf, flaky)
    kept = tuple(n for n in task.tests if n not in flaky and any(n in t for t in per_conf.values()))
    dropped = tuple(sorted(set(task.tests) - set(kept)))
    if not kept:
        broken = not flaky
        status = TaskStatus.BROKEN if broken else TaskStatus.FLAKY
        why = "the original fails every mapped test" if broken else "every mapped test is flaky"
        return Verification(task.task_id, status, (), dropped, (), why)
    runs = {c: tuple(n for n in tests if n in kept) for c, tests in per_conf.items()}
    configurations = () if "" in shared else tuple((c, t) for c, t in runs.items() if t)
    try:
        blanked = blank(original_file, task.qualname, task.lineno, RAISE_STATEMENT)
        trivial = [(name, blank(original_file, task.qualname, task.lineno, stmt)) for name, stmt in task.trivial]
    except TaskError as e:
        return Verification(task.task_id, TaskStatus.BROKEN, kept, dropped, (),
                            f"cannot blank the body: {e.message}")
    failed = _stub_failures(task, runner, blanked, runs, STUB_RUN)
    if not failed:
        return Verification(task.task_id, TaskStatus.WEAK, kept, dropped, (),
                            f"the tests pass with the body replaced by `{RAISE_STATEMENT}`"
                            + _in_every(runs), configurations, explored=originals.explored(task, runs.get("", ())))
    passes = tuple(name for name, source in trivial if not _stub_failures(task, runner, source, runs, TRIVIAL_RUN))
    return Verification(task.task_id, TaskStatus.VERIFIED, kept, dropped, failed, "", configurations, passes,
                        originals.explored(task, runs.get("", ())))


def _originals(task: TaskTests, runner: OriginalRuns, shared: dict[str, Shared]
               ) -> tuple[dict[str, tuple[str, ...]], set[str]]:
    """The task's own run of the original in each configuration: (tests it passes there, flaky tests).
    A test failing every run of a configuration is not expected there; failing only some, it is flaky."""
    per_conf: dict[str, tuple[str, ...]] = {}
    flaky: set[str] = set()
    for conf, s in shared.items():
        own = runner(task, task.tests, conf)
        failed = {n for n in task.tests if own.get(n) != "passed"}
        always = failed & s.always_failed
        flaky |= {n for n in task.tests if (n in failed or n in s.flaky) and n not in always}
        per_conf[conf] = tuple(n for n in task.tests if n not in failed and n not in s.flaky)
    return per_conf, flaky


def _settle(task: TaskTests, runner: OriginalRuns, per_conf: dict[str, tuple[str, ...]], flaky: set[str]
            ) -> tuple[dict[str, tuple[str, ...]], set[str]]:
    """Re-run the original on each configuration's remaining tests while the task's own run dropped any:
    the evaluation runs exactly those, without the dropped ones before them. A test failing now is flaky
    (order-dependent); after SETTLE_RUNS rounds that still drop tests, nothing is left to trust."""
    for _ in range(SETTLE_RUNS):
        left = {c: tuple(n for n in tests if n not in flaky) for c, tests in per_conf.items()}
        moved = {c: t for c, t in left.items() if t and t != task.tests}
        failed = set()
        for conf, tests in moved.items():
            out = runner(task, tests, conf)
            failed |= {n for n in tests if out.get(n) != "passed"}
        per_conf = left
        if not failed:
            return per_conf, flaky
        flaky = flaky | failed
    return {c: () for c in per_conf}, flaky | {n for t in per_conf.values() for n in t}


def _stub_failures(task: TaskTests, runner: TestRunner, source: str, runs: dict[str, tuple[str, ...]],
                   kind: str) -> tuple[str, ...]:
    """The tests that do not pass with `source` in the first configuration where any does not."""
    for conf, tests in runs.items():
        if not tests:
            continue
        outcomes = runner(task.file, source, list(tests), first_failure=True, configuration=conf, kind=kind)
        failed = tuple(n for n in tests if outcomes.get(n) != "passed")
        if failed:
            return failed
    return ()


def _in_every(runs: dict[str, tuple[str, ...]]) -> str:
    names = [c for c, t in runs.items() if c and t]
    return f" (in every configuration: {', '.join(names)})" if names else ""
