"""Runs of a project's tests for the task build, in the sandbox and executor the evaluation uses.

The verification (tasks/verify) and the pass+ inputs (tasks/rigor) run the project's tests here: one long-lived
worker per slot keeps the tree in memory and forks a child per run, so no run copies the project from disk;
the evaluation's time limits apply, and a run that trips the tampering check stops the build (every sample
would fail the same way).
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from coderun.config import Settings
from coderun.envs.local import LocalEnv
from coderun.errors import SandboxError, TaskError
from coderun.manifests.schema import Manifest
from coderun.records import Evidence
from coderun.tasks.coverage_map import test_file

# Whole-run limit of a run with a stubbed body, over five times its tests' baseline time (see stub_run_limit).
STUB_RUN_SECONDS = 60.0


def configuration_names(manifest: Manifest) -> list[str]:
    """The configurations every task is verified (and evaluated) in; [""]: tests.env alone."""
    return [c.name for c in manifest.tests.configurations] or [""]


def stub_run_limit(durations: list[float]) -> float:
    """The whole-run limit of a stubbed body's run. A stub can loop forever where no test's own limit
    reaches (a `pass` body in a loop run at import, e.g. zope's C3 merge); a timeout only counts as the
    stub being caught, so a limit this much over the original's time costs nothing but that wait."""
    return STUB_RUN_SECONDS + 5 * sum(durations)


@contextlib.contextmanager
def sandbox_tests(manifest: Manifest, settings: Settings, backend: str, env: LocalEnv, logs: Path,
            durations: dict[str, float], jobs: int, notes: list[str]) -> Iterator[SandboxTests]:
    """A TestRunner backed by the evaluation's sandbox and workers executor (up to `jobs` workers, each
    keeping the tree in memory), with the evaluation's time limits for the tests it runs."""
    from coderun.envs.testrun import test_env
    from coderun.runner.evidence import SampleRun
    from coderun.runner.executors import WorkerPool
    from coderun.sandbox.project import project_sandbox_spec, run_limits

    spec = project_sandbox_spec(manifest, settings, backend)  # exactly the evaluation's sandbox
    lock = threading.Lock()
    # A resumed build keeps the logs of the one it resumes and numbers its own after them.
    numbers = (p.stem.rsplit("-", 1)[-1] for pattern in ("run-*.log", "pass-plus-*.log") for p in logs.glob(pattern))
    counter = itertools.count(1 + max((int(n) for n in numbers if n.isdigit()), default=0))
    tree = env.checkout.path
    t_envs = {conf: {k: v for k, v in test_env(manifest, tree, conf).items() if k != "PYTHONPATH"}
              for conf in configuration_names(manifest)}

    def evidence(relfile: str | None, new_source: str | None, nodeids: list[str], *, first_failure: bool = False,
                 configuration: str = "", differential: str | None = None, extra_time: float = 0.0):
        # Every run writes one file: with nothing to change, write a test file back unchanged.
        relfile = relfile or test_file(nodeids[0])
        if new_source is None:
            new_source = (tree / relfile).read_text(encoding="utf-8")
        per_test, total = run_limits([durations.get(n, 1.0) for n in nodeids], manifest)
        if first_failure:
            total = min(total, stub_run_limit([durations.get(n, 1.0) for n in nodeids]))
        with lock:
            # Verification runs are run-N.log; the pass+ runs (exploring, confirming) pass-plus-N.log.
            log = logs / f"{'pass-plus' if differential else 'run'}-{next(counter):05d}.log"
        ev = pool.run(manifest.name, SampleRun(
            relfile=relfile, new_source=new_source, nodeids=list(nodeids), timeout=total + extra_time,
            per_test_timeout=per_test, env=t_envs[configuration],
            pytest_args=(*manifest.tests.args, *(["-x"] if first_failure else [])), log_path=log,
            template=False, differential=differential))  # no two runs alike: a template would not pay off
        if ev.infra_error:
            raise SandboxError(f"{manifest.name}: the sandbox failed while verifying tasks: {ev.infra_error}",
                               hint=f"see {log}; the decisions made so far are kept, run the build again")
        machinery = ev.machinery()
        if machinery:  # evaluation would grade every sample of this run as tampering: say so now
            raise TaskError(f"{manifest.name}: running the project's own code trips coderun's tampering check "
                            f"({'; '.join(f.detail for f in machinery)}); every sample would fail as tampering",
                            hint=f"see {ev.log_path}; this is the environment (a test dependency hooking pytest "
                                 "the way a sample would), so please report it with the log")
        return ev

    with WorkerPool(backend, {manifest.name: spec}, jobs) as pool:
        try:
            yield SandboxTests(evidence)
        finally:
            notes.extend(pool.notes)


@dataclass(frozen=True)
class SandboxTests:
    """Runs of the project's tests in the evaluation's sandbox: a `TestRunner` (outcomes per test), and
    `observe`, a run that also makes the differential step's calls after the tests and returns its record."""

    evidence: Callable[..., Evidence]

    def __call__(self, relfile: str | None, new_source: str | None, nodeids: list[str], *,
                 first_failure: bool = False, configuration: str = "") -> dict[str, str]:
        ev = self.evidence(relfile, new_source, nodeids, first_failure=first_failure, configuration=configuration)
        return {t.nodeid: t.outcome for t in ev.outcomes}

    def observe(self, nodeids: list[str], differential: str, budget: float, configuration: str = "",
                source: tuple[str, str] | None = None) -> tuple[dict[str, str], dict | None]:
        """`source`: (file, text) replacing the original's file (a trivial body), else the pristine tree."""
        relfile, text = source or (None, None)
        ev = self.evidence(relfile, text, nodeids, configuration=configuration, differential=differential,
                           extra_time=budget)
        return {t.nodeid: t.outcome for t in ev.outcomes}, ev.differential
