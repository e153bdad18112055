"""The verdict engine behind `coderun serve`: tasks, projects, warm worker pools, a bounded queue, the store.

    engine = Engine(settings, ServeConfig(...)); engine.start()
    ticket = engine.submit(task, code, rigor)       recorded in the store before it returns
    row = ticket.result()                           the finished row (a Future; done at once when cached)

Each (task, code) is judged by `evaluation.judge.judge`, the function `coderun eval` calls per unique sample,
with the same projects (runner/project.py) and the same workers executor: the same code gets the same
verdict. Both rigors come from one judging; the request's rigor picks the headline.

Bounded: at most `queue` judgings accepted and not finished (`Busy` past it: the server answers 429); the
judgings run on `slots` threads. Each project has its own `WorkerPool`; at most `warm` projects keep theirs,
the least recently used idle one is closed past that. A restarted engine judges what the store holds as
pending before anything new.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from coderun.choices import Backend, Isolation
from coderun.config import Settings
from coderun.errors import TaskError, UsageError
from coderun.evaluation.judge import judge
from coderun.evaluation.samples import parse_samples, resolver_from_tasks
from coderun.evaluation.store import code_hash
from coderun.records import PlusOutcome, Task, TaskInputs, VerdictKind
from coderun.runner.executors import WorkerPool
from coderun.runner.project import RunProject, run_projects, task_slug
from coderun.sandbox.project import isolation_of
from coderun.serve.metrics import Metrics
from coderun.serve.models import Durations, Judgement
from coderun.serve.store import Row, VerdictStore, verdict_id

log = logging.getLogger("coderun.serve")


@dataclass(frozen=True)
class ServeConfig:
    projects: tuple[str, ...] = ()     # served and preloaded; none: every built project, loaded on first use
    backend: Backend = Backend.LOCAL
    slots: int = 2                     # judgings at once
    isolation: Isolation = Isolation.AUTO
    queue: int = 256                   # judgings accepted and not finished
    warm: int = 4                      # projects whose workers are kept
    include_weak: bool = False         # also judge tasks a trivial body passes
    max_code: int = 64 * 1024          # characters of code or completion
    state: Path | None = None          # the store and the judgings' logs (default: $CODERUN_HOME/serve)

    def __post_init__(self) -> None:
        object.__setattr__(self, "backend", Backend.parse(self.backend))
        object.__setattr__(self, "isolation", Isolation.parse(self.isolation))
        for name in ("slots", "queue", "warm", "max_code"):
            if getattr(self, name) < 1:
                raise UsageError(f"--{name.replace('_', '-')} must be at least 1, not {getattr(self, name)}")


class Busy(Exception):
    """The queue is full: try again after `retry_after` seconds."""

    def __init__(self, retry_after: int):
        super().__init__(f"the queue is full; retry after {retry_after} s")
        self.retry_after = retry_after


class Rejected(Exception):
    """A request the engine cannot take, with what to fix; `status` is the HTTP status to answer."""

    def __init__(self, message: str, status: int = 422):
        super().__init__(message)
        self.message, self.status = message, status


@dataclass
class _Job:
    """One judging of (task, code); every request id in `ids` is answered by it."""

    task: Task
    code: str
    ids: set[str]
    accepted: float = field(default_factory=time.monotonic)
    future: Future = field(default_factory=Future)


class Engine:
    def __init__(self, settings: Settings, config: ServeConfig):
        self.settings, self.config = settings, config
        self.state = config.state or settings.home / "serve"
        self.store = VerdictStore(self.state / "verdicts.sqlite")
        self.metrics = Metrics()
        self.tasks: dict[str, Task] = {}            # every task of the served projects, by id
        self.by_key: dict[str, Task] = {}           # ... and by alias
        self.inputs: dict[str, TaskInputs] = {}
        self._weak_ok: set[str] = set()
        self._projects: dict[str, RunProject] = {}
        self._pools: OrderedDict[str, WorkerPool] = OrderedDict()
        self._using: dict[str, int] = {}
        self._jobs: dict[tuple[str, str], _Job] = {}
        self._closing = False
        self._lock = threading.Lock()
        self._project_lock = threading.Lock()
        self._threads = ThreadPoolExecutor(config.slots, thread_name_prefix="coderun-serve")
        self.isolation = self._isolation()

    # ------------------------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Load the served projects' tasks, make the preloaded projects ready (environments built when
        missing), and queue what the store holds as pending."""
        from coderun.tasks import built_projects, load_tasks
        from coderun.tasks import store as task_store
        from coderun.tasks.store import load_inputs

        names = list(self.config.projects) or sorted(built_projects(self.settings))
        missing = [n for n in names if n not in built_projects(self.settings)]
        if missing:
            raise TaskError(f"no tasks are built for {', '.join(missing)}",
                            hint=f"build them first: coderun tasks build {' '.join(missing)}")
        for name in names:
            for t in load_tasks(self.settings, project=name, status="all"):
                self.tasks[t.task_id] = t
                for key in (t.task_id, *t.aliases):
                    self.by_key.setdefault(key, t)
        if not self.tasks:
            raise TaskError("no tasks to serve", hint="build a project's tasks: coderun tasks build PROJECT")
        self.inputs = load_inputs(self.settings, list(self.tasks))
        self._weak_ok = set(task_store.weak_included(self.settings))
        for name in self.config.projects:
            self._project(name)
        self._resume()

    def close(self) -> None:
        self._closing = True
        self._threads.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            pools, self._pools = list(self._pools.values()), OrderedDict()
        for p in pools:
            with contextlib.suppress(Exception):
                p.__exit__(None, None, None)
        self.store.close()

    def _resume(self) -> None:
        pending = self.store.pending()
        for row in pending:
            task = self.tasks.get(row.task_id)
            if task is None:
                log.warning("%s: pending request for %s, a task this server does not serve; left pending",
                            row.id, row.task_id)
                continue
            with self._lock:
                self._schedule(task, row.code, row.id)
        if pending:
            log.info("resuming %d accepted requests that had no verdict yet", len(pending))

    # ------------------------------------------------------------------------------- requests

    def task(self, key: str, rigor: str) -> Task:
        """The task a request names (by id or alias), if this server judges it."""
        task = self.by_key.get(key)
        if task is None:
            raise Rejected(f"unknown task {key!r}: GET /v1/tasks lists the tasks this server judges", 404)
        from coderun.tasks import in_benchmark

        if not in_benchmark(task, self.config.include_weak or task.project in self._weak_ok, rigor):
            why = ("a trivial body passes its tests" if task.trivially_passed(rigor)
                   else f"it is {task.status.value}, not verified")
            raise Rejected(f"task {task.task_id} is not judged at rigor {rigor}: {why} "
                           "(GET /v1/tasks lists the tasks this server judges)")
        return task

    def code_of(self, task: Task, code: str | None, completion: str | None) -> str:
        """The sample's function text, as `coderun eval` reads a samples file's record."""
        text = code if code is not None else completion or ""
        if len(text) > self.config.max_code:
            raise Rejected(f"the code is {len(text)} characters; this server takes at most "
                           f"{self.config.max_code} (--max-code)", 413)
        field_name = "solution" if code is not None else "completion"
        loaded = parse_samples([json.dumps({"task_id": task.task_id, field_name: text})],
                               resolver_from_tasks([task]))
        if loaded.problems:
            raise Rejected(f"{field_name}: {loaded.problems[0].message}")
        return loaded.samples[0].code

    def submit(self, task: Task, code: str, rigor: str) -> tuple[Future, bool]:
        """(a future of the request's finished row, whether it was answered from the store). Recorded in
        the store before this returns; `Busy` when the queue is full (nothing recorded)."""
        vid = verdict_id(task.task_id, code, rigor)
        with self._lock:
            row = self.store.get(vid)
            if row is not None and row.state == "done" and not _is_infra(row):
                self.metrics.answered(row, cached=True)
                return _done(row), True
            job = self._jobs.get((task.task_id, code_hash(code)))
            if job is None and len(self._jobs) >= self.config.queue:
                raise Busy(self.retry_after())
            if row is not None and row.state == "done":  # an infra verdict is not kept: judged again
                self.store.retry(vid)
            self.store.accept(task.task_id, code, rigor)
            if job is None and (judged := self.store.judged_code(task.task_id, code)) is not None \
                    and not _is_infra_json(judged):
                self.store.finish(vid, judged)       # the other rigor's judging answers this one
                done = self.store.get(vid)
                self.metrics.answered(done, cached=True)
                return _done(done), True
            job = job or self._schedule(task, code, None)
            job.ids.add(vid)
        return _chain(job.future, lambda: self.store.get(vid)), False

    def get(self, vid: str) -> Row | None:
        return self.store.get(vid)

    def get_accepted(self, task: Task, code: str, rigor: str) -> Row:
        row = self.store.get(verdict_id(task.task_id, code, rigor))
        assert row is not None, "submit records a request before it returns"
        return row

    def queue_depth(self) -> int:
        return len(self._jobs)

    # ------------------------------------------------------------------------------- judging

    def _schedule(self, task: Task, code: str, vid: str | None) -> _Job:
        """A job for (task, code), created if none is running (call under the lock)."""
        key = (task.task_id, code_hash(code))
        job = self._jobs.get(key)
        if job is None:
            job = self._jobs[key] = _Job(task, code, set())
            self._threads.submit(self._run, job)
        if vid:
            job.ids.add(vid)
        return job

    def _run(self, job: _Job) -> None:
        started = time.monotonic()
        try:
            judgement = self._judge(job, started)
        except Exception as e:  # a bug or a broken project: the requests get an infra verdict, not a hang
            log.exception("judging %s failed", job.task.task_id)
            reason = f"the service could not judge it: {e}"
            judgement = Judgement(outcome=PlusOutcome(base=VerdictKind.INFRA, base_reason=reason,
                                                      plus=VerdictKind.INFRA, plus_reason=reason),
                                  durations=Durations(queued=round(started - job.accepted, 3)))
        if self._closing:  # its sandbox was closed under it: left pending, judged again after a restart
            return
        text = judgement.model_dump_json()
        with self._lock:
            self._jobs.pop((job.task.task_id, code_hash(job.code)), None)
            rows = []
            for vid in sorted(job.ids):
                self.store.finish(vid, text)
                rows.append(self.store.get(vid))
        for row in rows:
            self.metrics.answered(row, cached=False)
        self.metrics.judged(time.monotonic() - started)
        job.future.set_result(judgement)

    def _judge(self, job: _Job, started: float) -> Judgement:
        task = job.task
        project = self._project(task.project)
        pool = self._lend(task.project)
        try:
            log_path = self.state / "logs" / task_slug(task.task_id) / f"{code_hash(job.code)[:16]}.log"
            judged = judge(task, job.code, project, pool, inputs=self.inputs.get(task.task_id), log=log_path)
        finally:
            self._give_back(task.project)
        ev = judged.evidence
        return Judgement(outcome=judged.outcome, tests=list(ev.outcomes) if ev else [],
                         timed_out=bool(ev and ev.timed_out),
                         durations=Durations(queued=round(started - job.accepted, 3),
                                             judged=round(time.monotonic() - started, 3),
                                             tests=round(ev.duration, 3) if ev else 0.0))

    def _project(self, name: str) -> RunProject:
        with self._project_lock:
            if name not in self._projects:
                tasks = {t.task_id: t for t in self.tasks.values() if t.project == name}
                self._projects.update(run_projects([name], self.config.backend, self.settings, tasks,
                                                   isolation=self.isolation, run_id=f"serve-{id(self):x}"))
            return self._projects[name]

    def _lend(self, name: str) -> WorkerPool:
        """The project's pool (made when it has none), marked in use; idle pools past the warm budget, least
        recently used first, are closed."""
        with self._lock:
            pool = self._pools.pop(name, None) or WorkerPool(self.config.backend,
                                                             {name: self._projects[name].spec}, self.config.slots)
            self._pools[name] = pool
            self._using[name] = self._using.get(name, 0) + 1
            idle = [n for n in self._pools if n != name and not self._using.get(n)]
            retire = [self._pools.pop(n) for n in idle[:max(0, len(self._pools) - self.config.warm)]]
        for p in retire:
            self.metrics.retired += 1
            with contextlib.suppress(Exception):
                p.__exit__(None, None, None)
        return pool

    def _give_back(self, name: str) -> None:
        with self._lock:
            self._using[name] -= 1

    def warm_projects(self) -> list[str]:
        with self._lock:
            return list(self._pools)

    def busy_slots(self) -> int:
        with self._lock:
            return sum(self._using.values())

    def retry_after(self) -> int:
        per = self.metrics.mean_judging() or 1.0
        return max(1, math.ceil(len(self._jobs) * per / self.config.slots))

    def _isolation(self) -> str:
        """What `coderun eval` records for a new run: docker's as asked, local's as this machine makes it."""
        if self.config.backend is Backend.DOCKER:
            return self.config.isolation.value
        return isolation_of(self.config.backend, self.config.isolation)[0]


def _is_infra(row: Row) -> bool:
    return row.judged is not None and _is_infra_json(row.judged)


def _is_infra_json(judged: str) -> bool:
    return Judgement.model_validate_json(judged).outcome.base is VerdictKind.INFRA


def _done(row: Row | None) -> Future:
    f: Future = Future()
    f.set_result(row)
    return f


def _chain(future: Future, then) -> Future:
    out: Future = Future()
    future.add_done_callback(lambda _f: out.set_result(then()))
    return out


