"""Running the distinct samples of a run for ranking, in the sandbox, through the run's executor.

`--tests inputs`: each distinct (task, code) is spliced as `coderun eval` splices it and run by the reporter
with a check-mode differential payload marked `"tests": "none"`: pytest collects an empty test file written
beside the task's first test file (so that directory's conftest files load as for the tests, no test
module is imported and no test runs), then the differential step imports the target's module, calls the
target on every input and returns observations. The payload holds the
inputs only; what the original did on them stays on the host (and ranking never reads it).
`--tests model`: the same run with the generated tests as the test file (see `model_run`).

Every execution is recorded in the run store as it finishes (`rank_executions`: store.py), keyed by the code's hash and
the set it ran against, so a ranking that is stopped resumes, and identical code runs once per task.
A sandbox failure is recorded as infra and run again next time.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from coderun.config import Settings
from coderun.evaluation.projects import projects_of_run
from coderun.plus.inputs import check_payload
from coderun.rank.generate import generated_file, generated_path
from coderun.rank.records import ExecStatus, Execution, GeneratedTests, RankTests
from coderun.rank.store import RankStore
from coderun.records import Evidence, Task, TaskInputs
from coderun.runner.executors import Pool, make_pool
from coderun.runner.project import RunProject, task_slug
from coderun.runner.splice import splice

INPUTS_FILE = "test_coderun_rank_inputs.py"  # empty: collected, and nothing runs
NOTHING = "coderun_rank_selects_nothing"   # a node id no test has
GENERATED_TEST_TIMEOUT = 5.0               # seconds per generated test: one that hangs is stopped and counted


@dataclass(frozen=True)
class Job:
    """One distinct sample code of a task to run against one set (inputs, or generated tests)."""

    task: Task
    hash: str
    code: str
    tests: RankTests
    key: str                                   # names the set (see inputs_key / GeneratedTests.key)
    inputs: TaskInputs | None = None           # inputs: the task's
    generated: GeneratedTests | None = None    # model: the tests the model wrote for the task


def inputs_key(inputs: TaskInputs) -> str:
    return hashlib.sha256(json.dumps([inputs.target, inputs.inputs]).encode("utf-8")).hexdigest()[:16]


def run_jobs(jobs: list[Job], ranks: RankStore, settings: Settings, *, slots: int,
             progress: Callable[[Execution], None] = lambda _e: None) -> list[Execution]:
    """Run every job (none is cached here: the caller leaves out what the store has), recording each."""
    if not jobs:
        return []
    store = ranks.run
    config = store.info().eval_config()
    tasks = {j.task.task_id: j.task for j in jobs}
    projects = projects_of_run(store, [j.task.project for j in jobs], settings, tasks)
    jobs = sorted(jobs, key=lambda j: (j.task.project, j.task.task_id, j.hash))  # a worker stays on a project
    out = []
    with make_pool(config.executor, config.backend, {n: p.spec for n, p in projects.items()}, slots) as pool, \
            ThreadPoolExecutor(max_workers=slots, thread_name_prefix="coderun-rank") as ex:
        futures = [ex.submit(_execute, j, pool, projects[j.task.project], store.path) for j in jobs]
        for fut in as_completed(futures):
            e = fut.result()
            ranks.record_execution(e)
            out.append(e)
            progress(e)
    return out


def _execute(job: Job, pool: Pool, project: RunProject, run_dir: Path) -> Execution:
    started = time.monotonic()
    original = (project.tree / job.task.file).read_text(encoding="utf-8")
    spliced = splice(original, job.task.qualname, job.code, lineno=job.task.lineno,
                     keep_docstring=bool(job.task.own_doctests()))
    if not spliced.ok or spliced.new_source is None:
        return _done(job, ExecStatus.UNSPLICEABLE, started, note=spliced.message or "does not splice")
    log = run_dir / "rank" / "logs" / task_slug(job.task.task_id) / f"{job.tests.value}-{job.hash[:12]}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    evidence = run_job(pool, job, project, spliced.new_source, log)
    if evidence.infra_error:
        return _done(job, ExecStatus.INFRA, started, note=evidence.infra_error)
    return _read(job, evidence, started)


def run_job(pool: Pool, job: Job, project: RunProject, new_source: str, log: Path) -> Evidence:
    """The run of one job: the task's first configuration (where its inputs were made)."""
    task = job.task
    conf = task.runs()[0]
    common = {"relfile": task.file, "new_source": new_source, "log_path": log, "configuration": conf.name}
    if job.generated is not None:
        path, tests = generated_path(task), job.generated.tests
        return project.run(pool, nodeids=[f"{path}::{t.name}" for t in tests], files=((path, generated_file(tests)),),
                           limits=(GENERATED_TEST_TIMEOUT, 30 + GENERATED_TEST_TIMEOUT * len(tests)), **common)
    i = job.inputs
    per_test, total = project.limits([task.test_durations.get(n, 1.0) for n in conf.tests[:1]])
    payload = json.dumps({**json.loads(check_payload(i.target, i.inputs, i.limit, i.budget)), "tests": "none"})
    empty = posixpath.join(posixpath.dirname(conf.tests[0].split("::", 1)[0]), INPUTS_FILE)
    return project.run(pool, nodeids=[f"{empty}::{NOTHING}"], limits=(per_test, total + i.budget),
                       differential=payload, files=((empty, "# coderun rank: no test, the inputs only\n"),),
                       **common)


def _read(job: Job, evidence: Evidence, started: float) -> Execution:
    if job.generated is not None:
        return _read_tests(job, evidence, started)
    record = evidence.differential or {}
    observations = record.get("observations")
    if isinstance(observations, list) and len(observations) == len(job.inputs.inputs if job.inputs else []):
        return _done(job, ExecStatus.RAN, started, observations=observations)
    why = record.get("error") or record.get("skipped") or ("the process timed out" if evidence.timed_out else
                                                           f"no differential record (exit code {evidence.exit_code})")
    return _done(job, ExecStatus.NO_OBSERVATIONS, started, note=str(why))


def _read_tests(job: Job, evidence: Evidence, started: float) -> Execution:
    """Which generated tests passed; a run in which none ran at all (the module or the file did not import)
    has no observations."""
    if not evidence.outcomes:
        tail = evidence.log_tail.strip().splitlines()[-1:] or [f"exit code {evidence.exit_code}"]
        return _done(job, ExecStatus.NO_OBSERVATIONS, started, note=f"no generated test ran: {tail[0]}")
    name = {o.nodeid: o.nodeid.rsplit("::", 1)[-1] for o in evidence.outcomes}
    return _done(job, ExecStatus.RAN, started,
                 passed=sorted(name[o.nodeid] for o in evidence.outcomes if o.outcome == "passed"),
                 timed_out=sorted(name[o.nodeid] for o in evidence.outcomes if "Timeout" in o.message))


def _done(job: Job, status: ExecStatus, started: float, **kw: object) -> Execution:
    return Execution(task_id=job.task.task_id, hash=job.hash, tests=job.tests, key=job.key, status=status,
                     duration=round(time.monotonic() - started, 3), **kw)


def pending(jobs: Iterable[Job], done: dict[tuple[str, str, str], Execution]) -> list[Job]:
    """The jobs without a stored execution (an infra one is run again)."""
    return [j for j in jobs if (e := done.get((j.task.task_id, j.hash, j.key))) is None
            or e.status is ExecStatus.INFRA]
