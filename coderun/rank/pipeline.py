"""`coderun rank`: the stages in order (see coderun/rank/__init__.py).

`--tests both` runs both sets: two samples share a cluster when they agree on every input and pass the same
generated tests, and the agreement is the inputs run without error plus the generated tests passed.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from coderun.config import Settings
from coderun.envs.sources import checkout
from coderun.errors import UsageError
from coderun.evaluation.store import RunSample, RunStore, RunTask
from coderun.generate.base import RetryPolicy, get_provider
from coderun.manifests.schema import find_manifest
from coderun.rank.clustering import Member, rank_task
from coderun.rank.execute import Job, inputs_key, pending, run_jobs
from coderun.rank.generate import DOES_NOT_PARSE, PARAMETRIZED, READS_SOURCE, ask
from coderun.rank.metrics import summarize
from coderun.rank.output import write_folder, write_ranked
from coderun.rank.records import (
    ExecStatus,
    Execution,
    GeneratedTests,
    RankSummary,
    RankTests,
    TaskRanking,
)
from coderun.rank.store import RankStore

Executions = dict[tuple[str, str, str], Execution]


@dataclass(frozen=True)
class ModelSpec:
    """The OpenAI-compatible server asked for tests (`--tests model|both`)."""

    base_url: str
    model: str
    api_key: str | None = None
    requests: int = 1               # answers asked per task
    timeout: float = 120.0
    max_attempts: int = 8

    def __post_init__(self) -> None:
        if self.requests < 1:
            raise UsageError(f"--test-requests must be at least 1, not {self.requests}")


@dataclass(frozen=True)
class RankRequest:
    run_dir: Path
    tests: RankTests = RankTests.INPUTS
    output: Path | None = None
    jobs: int = 2
    model: ModelSpec | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "tests", RankTests.parse(self.tests))
        if self.tests is not RankTests.INPUTS and self.model is None:
            raise UsageError(f"--tests {self.tests.value} asks a model for tests: give --base-url and --model")
        if self.jobs < 1:
            raise UsageError(f"-j must be at least 1, got {self.jobs}")

    @property
    def kinds(self) -> tuple[RankTests, ...]:
        return (RankTests.INPUTS, RankTests.MODEL) if self.tests is RankTests.BOTH else (self.tests,)


@dataclass
class RankOutcome:
    summary: RankSummary
    rankings: list[TaskRanking]
    folder: Path
    executed: int                  # executions run now (the others came from the store)
    cached: int


@dataclass(frozen=True)
class _Task:
    run: RunTask
    samples: list[RunSample]
    generated: GeneratedTests | None


def rank(req: RankRequest, settings: Settings, *, on_start: Callable[[int], None] = lambda _n: None,
         progress: Callable[[Execution], None] = lambda _e: None) -> RankOutcome:
    with RunStore.open(req.run_dir) as store:
        ranks = RankStore(store)
        config = store.info().eval_config()
        if store.pending():
            raise UsageError(f"{req.run_dir}: the run is not finished ({len(store.pending())} samples without a "
                             "verdict)", hint=f"finish it first: coderun eval --resume {req.run_dir}")
        tasks = _tasks(ranks, req, settings)
        jobs = [j for kind in req.kinds for j in _jobs(kind, tasks)]
        done = {kind: ranks.executions(kind) for kind in req.kinds}
        todo = [j for kind in req.kinds for j in pending([j for j in jobs if j.tests is kind], done[kind])]
        on_start(len(todo))
        run_jobs(todo, ranks, settings, slots=req.jobs, progress=progress)
        done = {kind: ranks.executions(kind) for kind in req.kinds}
        rankings = [_rank(t, done, req) for t in tasks]
        summary = summarize(store.info().run_id, req.tests, config.rigor, rankings, store.results())
        summary.counts = dict(sum((Counter(r.counts) for r in rankings), Counter()))
        ranks.set_ranking(rankings, summary)
        samples = {(s.task_id, s.index): s for t in tasks for s in t.samples}
        folder = write_folder(store.path, summary, rankings, samples)
        if req.output is not None:
            write_ranked(req.output, rankings, samples)
    return RankOutcome(summary, rankings, folder, executed=len(todo), cached=len(jobs) - len(todo))


def _tasks(ranks: RankStore, req: RankRequest, settings: Settings) -> list[_Task]:
    """The run's tasks with samples; with model tests, each with the tests the model wrote (asked now when
    the store has none for it)."""
    store = ranks.run
    run_tasks = {t.task_id: t for t in store.tasks() if t.task is not None}
    by_task: dict[str, list[RunSample]] = defaultdict(list)
    for s in store.samples():
        by_task[s.task_id].append(s)
    generated = ranks.generated_tests() if RankTests.MODEL in req.kinds else {}
    missing = [t for t in sorted(by_task) if RankTests.MODEL in req.kinds and t not in generated]
    if missing:
        generated.update(_ask(ranks, req, settings, [run_tasks[t] for t in missing]))
    return [_Task(run_tasks[t], samples, generated.get(t)) for t, samples in sorted(by_task.items())]


def _ask(ranks: RankStore, req: RankRequest, settings: Settings, tasks: list[RunTask]) -> dict[str, GeneratedTests]:
    m = req.model
    assert m is not None  # checked by RankRequest
    manifests = ranks.run.info().eval_config().manifests
    projects = {p: find_manifest(manifests.get(p) or p, settings) for p in {rt.project for rt in tasks}}
    roots = {p: checkout(manifest, settings).path for p, manifest in projects.items()}  # the run's manifests
    out = {}
    retry = RetryPolicy(max_attempts=m.max_attempts, timeout=m.timeout)
    with get_provider("openai", base_url=m.base_url, api_key=m.api_key, retry=retry) as provider:
        for rt in tasks:
            g = ask(provider, m.model, rt.task, roots[rt.project], projects[rt.project].import_root, m.requests)
            ranks.set_generated_tests(g)  # kept at once: a resumed ranking does not ask again
            out[rt.task_id] = g
    return out


def _jobs(kind: RankTests, tasks: list[_Task]) -> list[Job]:
    jobs = []
    for t in tasks:
        codes = {s.hash: s.code for s in sorted(t.samples, key=lambda s: s.index)}
        inputs, generated = t.run.inputs, t.generated
        if kind is RankTests.INPUTS and inputs is not None and inputs.inputs:
            jobs += [Job(task=t.run.task, hash=h, code=c, tests=kind, key=inputs_key(inputs), inputs=inputs)
                     for h, c in codes.items()]
        if kind is RankTests.MODEL and generated is not None and generated.tests:
            jobs += [Job(task=t.run.task, hash=h, code=c, tests=kind, key=generated.key, generated=generated)
                     for h, c in codes.items()]
    return jobs


def _rank(t: _Task, done: dict[RankTests, Executions], req: RankRequest) -> TaskRanking:
    rt = t.run
    n_inputs = len(rt.inputs.inputs) if rt.inputs and RankTests.INPUTS in req.kinds else 0
    n_tests = len(t.generated.tests) if t.generated and RankTests.MODEL in req.kinds else 0
    by_kind = {RankTests.INPUTS: _of(done.get(RankTests.INPUTS), rt.task_id, inputs_key(rt.inputs) if n_inputs else None),
               RankTests.MODEL: _of(done.get(RankTests.MODEL), rt.task_id, t.generated.key if n_tests else None)}
    hashes = {s.hash for s in t.samples}
    execs = {h: e for h in hashes if (e := _merged(by_kind[RankTests.INPUTS].get(h), by_kind[RankTests.MODEL].get(h)))}
    method = " and ".join([f"behaviour on {n_inputs} inputs"] * bool(n_inputs)
                          + [f"{n_tests} generated tests"] * bool(n_tests)) or "nothing to run: identical code only"
    ranking = rank_task(rt.task_id, rt.level.value, req.tests, [Member(s.index, s.hash) for s in t.samples],
                        execs, n_inputs + n_tests, method)
    if t.generated is not None and RankTests.MODEL in req.kinds:
        ranking.counts = _test_counts(t.generated, list(by_kind[RankTests.MODEL].values()))
    return ranking


def _of(done: Executions | None, task_id: str, key: str | None) -> dict[str, Execution]:
    if not done or key is None:
        return {}
    return {h: e for (t, h, k), e in done.items() if t == task_id and k == key}


def _merged(a: Execution | None, b: Execution | None) -> Execution | None:
    """One execution of both kinds: what ran of each."""
    if a is None or b is None:
        return a or b
    ran = [e for e in (a, b) if e.status is ExecStatus.RAN]
    if not ran:
        return a
    return a.model_copy(update={"status": ExecStatus.RAN,
                                "observations": a.observations if a.status is ExecStatus.RAN else [],
                                "passed": b.passed if b.status is ExecStatus.RAN else [],
                                "timed_out": b.timed_out})


def _test_counts(g: GeneratedTests, execs: list[Execution]) -> dict[str, int]:
    """What became of the tests the model wrote for a task."""
    ran = [e for e in execs if e.status is ExecStatus.RAN]
    passed = {n for e in ran for n in e.passed}
    timed_out = {n for e in ran for n in e.timed_out}
    return {"generated": len(g.tests) + sum(g.dropped.values()), "kept": len(g.tests),
            **{why: g.dropped.get(why, 0) for why in (DOES_NOT_PARSE, READS_SOURCE, PARAMETRIZED)},
            "timed out": len(timed_out),
            "fail on every sample": sum(1 for x in g.tests if x.name not in passed) if ran else len(g.tests)}
