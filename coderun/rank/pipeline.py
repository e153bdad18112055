"""`coderun rank`: the stages in order (see coderun/rank/__init__.py)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from coderun.config import Settings
from coderun.errors import UsageError
from coderun.evaluation.store import RunSample, RunStore, RunTask
from coderun.rank.cluster import Member, rank_task
from coderun.rank.execute import Job, inputs_key, pending, run_jobs
from coderun.rank.metrics import summarize
from coderun.rank.output import write_folder, write_ranked
from coderun.rank.records import Execution, RankSummary, RankTests, TaskRanking


@dataclass(frozen=True)
class RankRequest:
    run_dir: Path
    tests: RankTests = RankTests.INPUTS
    output: Path | None = None
    jobs: int = 2

    def __post_init__(self) -> None:
        object.__setattr__(self, "tests", RankTests.parse(self.tests))
        if self.tests is not RankTests.INPUTS:
            raise UsageError(f"--tests {self.tests.value} is not available yet; use --tests inputs")
        if self.jobs < 1:
            raise UsageError(f"-j must be at least 1, got {self.jobs}")


@dataclass
class RankOutcome:
    summary: RankSummary
    rankings: list[TaskRanking]
    folder: Path
    executed: int                  # executions run now (the others came from the store)
    cached: int


def rank(req: RankRequest, settings: Settings, *, on_start: Callable[[int], None] = lambda _n: None,
         progress: Callable[[Execution], None] = lambda _e: None) -> RankOutcome:
    with RunStore.open(req.run_dir) as store:
        config = store.info().eval_config()
        if store.pending():
            raise UsageError(f"{req.run_dir}: the run is not finished ({len(store.pending())} samples without a "
                             "verdict)", hint=f"finish it first: coderun eval --resume {req.run_dir}")
        tasks = {t.task_id: t for t in store.tasks() if t.task is not None}
        by_task: dict[str, list[RunSample]] = defaultdict(list)
        for s in store.samples():
            by_task[s.task_id].append(s)
        jobs = _input_jobs(tasks, by_task)
        todo = pending(jobs, store.rank_executions(RankTests.INPUTS))
        on_start(len(todo))
        run_jobs(todo, store, settings, slots=req.jobs, progress=progress)
        done = store.rank_executions(RankTests.INPUTS)
        rankings = [_rank(tasks[t], samples, done, req.tests) for t, samples in sorted(by_task.items())]
        summary = summarize(store.info().run_id, req.tests, config.rigor, rankings, store.results())
        store.set_ranking(rankings, summary)
        samples = {(s.task_id, s.index): s for ss in by_task.values() for s in ss}
        folder = write_folder(store.path, summary, rankings, samples)
        if req.output is not None:
            write_ranked(req.output, rankings, samples)
    return RankOutcome(summary, rankings, folder, executed=len(todo), cached=len(jobs) - len(todo))


def _input_jobs(tasks: dict[str, RunTask], by_task: dict[str, list[RunSample]]) -> list[Job]:
    jobs = []
    for task_id, samples in sorted(by_task.items()):
        rt = tasks[task_id]
        if rt.inputs is None or not rt.inputs.inputs:
            continue
        key = inputs_key(rt.inputs)
        codes = {s.hash: s.code for s in sorted(samples, key=lambda s: s.index)}
        jobs += [Job(task=rt.task, hash=h, code=c, tests=RankTests.INPUTS, key=key, inputs=rt.inputs)
                 for h, c in codes.items()]
    return jobs


def _rank(rt: RunTask, samples: list[RunSample], done: dict[tuple[str, str, str], Execution],
          tests: RankTests) -> TaskRanking:
    members = [Member(s.index, s.hash) for s in samples]
    checks = len(rt.inputs.inputs) if rt.inputs else 0
    key = inputs_key(rt.inputs) if checks else ""
    execs = {h: e for (t, h, k), e in done.items() if t == rt.task_id and k == key} if checks else {}
    method = f"behaviour on {checks} inputs" if checks else "no inputs: identical code only"
    return rank_task(rt.task_id, rt.level.value, tests, members, execs, checks, method)
