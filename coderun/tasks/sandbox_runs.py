"""Runs of a project's tests for the task build, in the sandbox and executor the evaluation uses.

The verification (tasks/verify) and the pass+ inputs (plus/derive) run the project's tests here: one long-lived
worker per slot keeps the tree in memory and forks a child per run, so no run copies the project from disk;
the evaluation's time limits apply, and a run that trips the tampering check stops the build (every sample
would fail the same way).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from coderun.config import Settings
from coderun.envs.local import LocalEnv
from coderun.errors import SandboxError, TaskError
from coderun.manifests.schema import Manifest
from coderun.plus.inputs import EXPLORE_BUDGET
from coderun.records import Evidence
from coderun.tasks.coverage_map import test_file
from coderun.tasks.reports import RunKindTime
from coderun.tasks.verify import STUB_RUN, TRIVIAL_RUN

if TYPE_CHECKING:
    from coderun.runner.project import RunProject

# Whole-run limit of a run with a stubbed body, over five times its tests' baseline time (see stub_run_limit);
# with a run of the original on the very same tests to go by, over five times that run's time.
STUB_RUN_SECONDS, STUB_RUN_FLOOR = 60.0, 10.0
# Per-test limit of a stubbed body's run: this many times the slowest test's baseline time, at least the floor;
# and of its CPU time, at least its own floor (a stub that loops burns CPU; see stub_cpu_limit).
STUB_TEST_FACTOR, STUB_TEST_FLOOR, STUB_CPU_FLOOR = 5.0, 0.5, 0.2
# Collection limit of a stubbed body's run: this many times the original's start-up and collection of the same
# tests, at least the floor (compiling the changed file is the only new work there).
STUB_COLLECT_FACTOR, STUB_COLLECT_FLOOR = 5.0, 5.0


# The kinds of run a task build makes, in the order they come (`SandboxTests.by_kind`).
SHARED, OWN = "original, all mapped tests", "original, a task's tests"
EXPLORING, CONFIRMING, TRIVIAL_PLUS = "pass+ exploring", "pass+ confirming", "pass+ trivial bodies"
RUN_KINDS = (SHARED, OWN, STUB_RUN, TRIVIAL_RUN, EXPLORING, CONFIRMING, TRIVIAL_PLUS)


def run_kinds_line(kinds: dict[str, RunKindTime]) -> str:
    """The build log's line: seconds and runs by kind, and the checks' share."""
    parts = [f"{k} {t.seconds:.1f}s ({t.runs} runs)" for k, t in kinds.items()]
    checks = sum(t.checks_seconds for t in kinds.values())
    return f"sandbox runs by kind: {', '.join(parts)}; integrity checks {checks:.1f}s of them"


def configuration_names(manifest: Manifest) -> list[str]:
    """The configurations every task is verified (and evaluated) in; [""]: tests.env alone."""
    return [c.name for c in manifest.tests.configurations] or [""]


def stub_run_limit(durations: list[float], original_run: float | None = None) -> float:
    """The whole-run limit of a stubbed body's run. A stub can loop forever where no test's own limit
    reaches (a `pass` body in a loop run at import, e.g. zope's C3 merge); a timeout only counts as the
    stub being caught, so a limit this much over the original's time costs nothing but that wait.
    `original_run`: how long the original's run of these very tests took, import and collection included
    (the tests' own times leave them out): the limit is then that much shorter, never longer."""
    limit = STUB_RUN_SECONDS + 5 * sum(durations)
    return limit if original_run is None else min(limit, STUB_RUN_FLOOR + 5 * original_run)


def stub_collect_limit(original_collect: float | None) -> float:
    """The collection limit of a stubbed body's run (0: none, without a run of the original on the same tests
    to go by). A body that loops when its module is imported (zope's C3 merge again) hangs before any test's
    own limit is armed: it sat out the whole run's limit, 56 s, where the original collected in a second."""
    if original_collect is None:
        return 0.0
    return max(STUB_COLLECT_FLOOR, STUB_COLLECT_FACTOR * original_collect)


def stub_test_limit(durations: list[float], per_test: float) -> float:
    """The per-test limit of a stubbed body's run. Such a run only decides whether the stub is caught, and a
    timeout counts as caught: waiting out the evaluation's limit (10 s or more) for a stub that loops (a
    `return None` in a cache's `popitem`) settles nothing the original's own time did not."""
    return min(per_test, max(STUB_TEST_FLOOR, STUB_TEST_FACTOR * max(durations, default=0.0)))


def stub_cpu_limit(durations: list[float]) -> float:
    """The per-test CPU limit of a stubbed body's run, beside its wall-clock limit (stub_test_limit). Most stubs
    that time out loop (a `return None` in a cache's `popitem` spins in `clear`): the CPU limit stops them at
    a fraction of the wall clock's floor, which has to stay high enough that a test descheduled by the
    builds beside it is not stopped. CPU time does not grow with the load, and a test uses no more CPU than
    its wall time (threads aside), so this many times the original's wall time stops no test that the
    original's pace would have finished."""
    return max(STUB_CPU_FLOOR, STUB_TEST_FACTOR * max(durations, default=0.0))


@contextlib.contextmanager
def sandbox_tests(manifest: Manifest, settings: Settings, backend: str, env: LocalEnv, logs: Path,
            durations: dict[str, float], jobs: int, notes: list[str]) -> Iterator[SandboxTests]:
    """A TestRunner backed by the evaluation's sandbox and workers executor (up to `jobs` workers, each
    keeping the tree in memory), with the evaluation's time limits for the tests it runs."""
    from coderun.runner.executors import WorkerPool
    from coderun.runner.project import RunProject
    from coderun.sandbox.project import project_sandbox_spec

    project = RunProject(manifest, project_sandbox_spec(manifest, settings, backend), env.checkout.path)
    lock = threading.Lock()
    # A resumed build keeps the logs of the one it resumes and numbers its own after them.
    numbers = (p.stem.rsplit("-", 1)[-1] for pattern in ("run-*.log", "pass-plus-*.log") for p in logs.glob(pattern))
    counter = itertools.count(1 + max((int(n) for n in numbers if n.isdigit()), default=0))
    tree = project.tree

    book = _RunBook()

    def evidence(relfile: str | None, new_source: str | None, nodeids: list[str], *, first_failure: bool = False,
                 configuration: str = "", differential: str | None = None, extra_time: float = 0.0,
                 verifying: bool = False, kind: str = ""):
        original = new_source is None
        # `verifying`: an own run of the original that also explores for pass+ is verification's all the same
        pass_plus = differential is not None and not verifying
        kind = kind or (STUB_RUN if not original else OWN if relfile else SHARED)
        # Every run writes one file: with nothing to change, write a test file back unchanged.
        relfile = relfile or test_file(nodeids[0])
        if new_source is None:
            new_source = (tree / relfile).read_text(encoding="utf-8")
        key = (configuration, tuple(nodeids))
        per_test, total, collect, cpu = book.limits(project, durations, key, first_failure)
        with lock:  # verification's runs are run-N.log, pass+'s (exploring, confirming) pass-plus-N.log
            log = logs / f"{'pass-plus' if pass_plus else 'run'}-{next(counter):05d}.log"
        ev = project.run(pool, relfile=relfile, new_source=new_source, nodeids=nodeids,
                         limits=(per_test, total + extra_time), log_path=log, configuration=configuration,
                         pytest_args=["-x"] if first_failure else [], differential=differential,
                         # A task's stub and trivial bodies run the same tests with the same arguments, one
                         # after another: pytest is configured once for them (the pool lends them the worker
                         # that keeps their template). No two runs of the original share their tests.
                         template=first_failure,
                         sample=not original,  # a test file written back is not a sample's file
                         # One run of the original keeps the test-code checks: the first shared run of each
                         # configuration, which takes every mapped test (a test or dependency that changes
                         # test code would fail every sample: the build stops there). Its other runs, like
                         # coderun's own bodies, skip them: the same tests and code have nothing more to tell,
                         # and they cost O(tests) after each test (rdflib: 30 s of a 113 s run).
                         trusted=not (kind == SHARED and book.check_once(configuration)),
                         collect_limit=collect, cpu_limit=cpu)
        _raise_if_unusable(manifest, ev, log)
        book.add(ev, kind, key if original and not pass_plus else None)
        return ev

    def prestart() -> None:
        pool.prestart(manifest.name, project.test_env(configuration_names(manifest)[0]), jobs)

    with WorkerPool(backend, {manifest.name: project.spec}, jobs) as pool:
        try:
            yield SandboxTests(evidence, book.kinds, prestart)
        finally:
            notes.extend(pool.notes)


@dataclass
class _RunBook:
    """What the runs so far tell the next ones, and the build's time by kind. `seen`: each test's longest time
    in a run of the original on a task's own tests (the first test of a subset pays for module fixtures that
    another test paid for in the baseline); `whole`: each such run's whole time; `collected`: its start-up
    and collection."""

    seen: dict[str, float] = field(default_factory=dict)
    whole: dict[tuple[str, tuple[str, ...]], float] = field(default_factory=dict)
    collected: dict[tuple[str, tuple[str, ...]], float] = field(default_factory=dict)
    kinds: dict[str, RunKindTime] = field(default_factory=dict)
    checked: set[str] = field(default_factory=set)   # configurations whose test code a run has checked
    lock: threading.Lock = field(default_factory=threading.Lock)

    def check_once(self, configuration: str) -> bool:
        """True the first time only, per configuration: that run checks the test code."""
        with self.lock:
            first = configuration not in self.checked
            self.checked.add(configuration)
            return first

    def limits(self, project: RunProject, durations: dict[str, float], key: tuple[str, tuple[str, ...]],
               first_failure: bool) -> tuple[float, float, float, float]:
        """(per test, whole run, collection, per test's CPU) limits of a run of the tests `key` names: the
        evaluation's, or, for a stubbed body's run (`first_failure`), those the original's times give (collection
        and CPU: 0, none)."""
        recorded = [max(durations.get(n, 1.0), self.seen.get(n, 0.0)) for n in key[1]]
        per_test, total = project.limits(recorded)
        if not first_failure:
            return per_test, total, 0.0, 0.0
        return (stub_test_limit(recorded, per_test), min(total, stub_run_limit(recorded, self.whole.get(key))),
                stub_collect_limit(self.collected.get(key)), min(per_test, stub_cpu_limit(recorded)))

    def add(self, ev: Evidence, kind: str, original: tuple[str, tuple[str, ...]] | None) -> None:
        """A run that ended; `original`: its (configuration, node ids) when it ran the original for verification."""
        with self.lock:
            self.kinds[kind] = self.kinds.get(kind, RunKindTime()).add(ev)
            if original is not None:
                self.seen.update({t.nodeid: max(self.seen.get(t.nodeid, 0.0), t.duration) for t in ev.outcomes})
                self.whole[original] = max(self.whole.get(original, 0.0), ev.duration)
                if ev.collect_seconds is not None:
                    self.collected[original] = max(self.collected.get(original, 0.0), ev.collect_seconds)


def _raise_if_unusable(manifest: Manifest, ev: Evidence, log: Path) -> None:
    """A run the build cannot go on from: the sandbox failed, or the project's own code trips the tampering
    check (evaluation would grade every sample of such a run as tampering: say so now)."""
    if ev.infra_error:
        raise SandboxError(f"{manifest.name}: the sandbox failed while verifying tasks: {ev.infra_error}",
                           hint=f"see {log}; the decisions made so far are kept, run the build again")
    machinery = ev.machinery()
    if machinery:
        raise TaskError(f"{manifest.name}: running the project's own code trips coderun's tampering check "
                        f"({'; '.join(f.detail for f in machinery)}); every sample would fail as tampering",
                        hint=f"see {ev.log_path}; this is the environment (a test dependency hooking pytest "
                             "the way a sample would), so please report it with the log")


@dataclass(frozen=True)
class SandboxTests:
    """Runs of the project's tests in the evaluation's sandbox: a `TestRunner` (outcomes per test), and
    `observe`, a run that also makes the differential step's calls after the tests and returns its record.
    `kinds`: the time of the runs made so far, by kind (filled as they end); `prestart()` starts the workers
    in the background, so that they are ready when the first runs come."""

    evidence: Callable[..., Evidence]
    kinds: dict[str, RunKindTime] = field(default_factory=dict)
    prestart: Callable[[], None] = lambda: None

    def __call__(self, relfile: str | None, new_source: str | None, nodeids: list[str], *,
                 first_failure: bool = False, configuration: str = "", kind: str = "") -> dict[str, str]:
        ev = self.evidence(relfile, new_source, nodeids, first_failure=first_failure, configuration=configuration,
                           kind=kind)
        return {t.nodeid: t.outcome for t in ev.outcomes}

    def by_kind(self) -> dict[str, RunKindTime]:
        """The runs' time by kind, in RUN_KINDS order, the kinds with runs only."""
        return {k: self.kinds[k] for k in RUN_KINDS if k in self.kinds}

    def observe(self, nodeids: list[str], differential: str, budget: float, configuration: str = "",
                source: tuple[str, str] | None = None) -> tuple[dict[str, str], dict | None]:
        """`source`: (file, text) replacing the original's file (a trivial body), else the pristine tree."""
        return self._with_step(nodeids, differential, budget, configuration, source)

    def explore_original(self, nodeids: list[str], payload: str, configuration: str = ""
                         ) -> tuple[dict[str, str], dict | None]:
        """Verification's own run of the original on a task's tests, ending with pass+'s exploring step
        (tasks/verify: OriginalRuns): the same run `observe` would make for pass+ later, made once."""
        return self._with_step(nodeids, payload, EXPLORE_BUDGET, configuration, None, verifying=True)

    def _with_step(self, nodeids: list[str], differential: str, budget: float, configuration: str,
                   source: tuple[str, str] | None, verifying: bool = False) -> tuple[dict[str, str], dict | None]:
        relfile, text = source or (None, None)
        ev = self.evidence(relfile, text, nodeids, configuration=configuration, differential=differential,
                           extra_time=budget, verifying=verifying, kind=_step_kind(differential, source, verifying))
        return {t.nodeid: t.outcome for t in ev.outcomes}, ev.differential


def _step_kind(payload: str, source: tuple[str, str] | None, verifying: bool) -> str:
    if verifying:
        return OWN
    if source is not None:
        return TRIVIAL_PLUS
    try:
        mode = json.loads(payload).get("mode")
    except (ValueError, AttributeError):
        mode = None
    return EXPLORING if mode == "explore" else CONFIRMING
