"""Evaluation: the main job. Samples in, a run folder with verdicts and a report out.

    start_run(request, settings)   select tasks, read samples, create the run folder and its store
    execute(store, settings)       run every pending sample (also what `--resume` calls)

What ran the benchmark is recorded in the run: coderun's version, the interpreter and coderun's dependency
versions at `start_run`; each project environment's interpreter and installed versions when `execute` first
uses it. Both go to the store and to `environment.txt` in the run folder; a resumed run keeps them and
reports any difference it sees instead of overwriting them.

For each unique (task, sample code) the sample is spliced into the task's original file (never the
worktree: the sandbox copies the project for every sample), the task's mapped tests run in a sandbox of
the chosen backend, and the one pure `grade` function turns the evidence into a verdict. Identical
samples of a task (up to whitespace) run once and share the verdict. Results are committed to the store
one sample at a time, so a killed run loses nothing that finished and `--resume` continues it.
"""

from __future__ import annotations

import textwrap
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path

from coderun.choices import Backend, Executor, Isolation
from coderun.config import Settings
from coderun.envs.testrun import files_of
from coderun.envs.versions import ENVIRONMENT_FILE, coderun_environment, differences, environment_text
from coderun.errors import SandboxError, StoreError, TaskError, UsageError
from coderun.evaluation.folder import write_problems
from coderun.evaluation.judge import judge
from coderun.evaluation.projects import projects_of_run
from coderun.evaluation.samples import Resolver, first_of, parse_samples, read_samples, resolver_from_tasks
from coderun.evaluation.store import (
    Result,
    RunConfig,
    RunInfo,
    RunSample,
    RunStore,
    RunTask,
    code_hash,
    new_run_id,
)
from coderun.manifests.schema import find_manifest
from coderun.records import (
    Evidence,
    Level,
    Package,
    PlusOutcome,
    RunEnvironment,
    Task,
    TaskInputs,
    VerdictKind,
)
from coderun.runner.executors import Pool, make_pool
from coderun.runner.executors.cluster import parse_cluster, require_ray
from coderun.runner.project import RunProject, task_slug
from coderun.sandbox.isolation import prefetch_index
from coderun.sandbox.project import isolation_of
from coderun.tasks.store import load_inputs

# Consecutive sandbox failures after which the run stops (the engine or the disk is gone), resumable.
MAX_CONSECUTIVE_INFRA = 3


@dataclass(frozen=True)
class EvalRequest:
    """What `coderun eval` (or an ablation arm) asks for; checked when made, so a run starts only from a
    request it can serve (a usage error names the choices before anything is built for it)."""

    samples: Path | None = None
    ground_truth: bool = False
    blank: bool = False
    projects: tuple[str, ...] = ()
    level: Level | None = None
    backend: Backend = Backend.LOCAL
    jobs: int = 2
    include_weak: bool = False
    run_dir: Path | None = None
    label: str = ""
    executor: Executor = Executor.WORKERS
    cluster: str | None = None      # run on a Ray cluster (runner/executors/cluster.py); not kept in the run
    rigor: str = "base"             # the headline verdict: base (the project's tests) or plus (and pass+)
    isolation: Isolation = Isolation.AUTO   # local: namespaces where possible (see sandbox/isolation.py)

    def __post_init__(self) -> None:
        if sum([self.samples is not None, self.ground_truth, self.blank]) != 1:
            raise UsageError("give exactly one of --samples FILE, --ground-truth or --blank")
        object.__setattr__(self, "backend", Backend.parse(self.backend))     # a name given as a string
        object.__setattr__(self, "executor", Executor.parse(self.executor))
        object.__setattr__(self, "isolation", Isolation.parse(self.isolation))
        if self.rigor not in ("base", "plus"):
            raise UsageError(f"unknown rigor {self.rigor!r}; one of: base, plus")
        if self.cluster:  # before the run folder is made
            parse_cluster(self.cluster)
            require_ray()

    def config(self, tasks: list[Task], settings: Settings) -> RunConfig:
        projects = sorted({t.project for t in tasks})
        return RunConfig(samples=str(self.samples) if self.samples else None, ground_truth=self.ground_truth,
                         blank=self.blank, level=self.level, backend=self.backend, jobs=self.jobs,
                         include_weak=self.include_weak, executor=self.executor, rigor=self.rigor,
                         isolation=self.isolation,
                         manifests={p: str(find_manifest(p, settings).origin) for p in projects})


@dataclass
class RunSummary:
    run_dir: Path
    samples: int = 0
    executed: int = 0
    passed: int = 0
    failed: int = 0
    infra: int = 0
    skipped_samples: int = 0
    problems: list[str] = field(default_factory=list)


# ------------------------------------------------------------------------------------- starting


def start_run(req: EvalRequest, settings: Settings, tasks: list[Task], *,
              on_problem: Callable[[str], None] = lambda _m: None,
              fallback: Resolver = lambda _id: None,
              sample_lines: list[str] | None = None) -> tuple[RunStore, RunSummary]:
    """Create the run folder and store: the selected tasks and every sample to evaluate. Sample ids the
    selected tasks do not know are asked of `fallback`: a task outside the selection is left out (counted),
    an `Unavailable` one is a problem with its reason, an unknown one a problem too."""
    summary = RunSummary(Path())
    tasks = _known_projects_only(tasks, settings, summary, on_problem)
    if not tasks:
        raise TaskError("no tasks selected", hint="build them with `coderun tasks build PROJECT`, "
                        "or check --project / --level")
    isolation, note = isolation_of(req.backend, req.isolation)  # before the run folder: it may refuse
    if isolation == "namespaces":
        prefetch_index()
    run_id = new_run_id()
    run_dir = (req.run_dir or settings.runs / run_id).resolve()
    info = RunInfo(run_id=run_id, label=req.label or _default_label(req), config=req.config(tasks, settings))
    store = RunStore.create(run_dir, info)
    _save_environment(store, RunEnvironment(coderun=coderun_environment(), isolation=isolation,
                                            isolation_note=note))
    inputs = load_inputs(settings, [t.task_id for t in tasks])  # kept in the run: it is graded on them
    store.add_tasks(RunTask.from_task(t, inputs.get(t.task_id)) for t in tasks)
    summary.run_dir = run_dir
    store.add_samples(_samples(req, tasks, summary, on_problem, fallback, sample_lines))
    summary.samples = len(store.samples())
    write_problems(run_dir, summary.problems)
    return store, summary


def _save_environment(store: RunStore, env: RunEnvironment) -> None:
    store.set_environment(env)
    (store.path / ENVIRONMENT_FILE).write_text(environment_text(env), encoding="utf-8")


def _known_projects_only(tasks: list[Task], settings: Settings, summary: RunSummary,
                         on_problem: Callable[[str], None]) -> list[Task]:
    """Stored tasks of a project whose manifest is no longer on the path are left out, with a note
    (`coderun tasks prune` removes them from the store); a sample for one of them is an unknown id."""
    from coderun.tasks import unknown_projects

    gone = unknown_projects(settings, {t.project for t in tasks})
    for name in sorted(gone):
        n = sum(t.project == name for t in tasks)
        msg = (f"{name}: unknown project: {n} stored tasks left out, no manifest named {name!r} is known any "
               "more (`coderun tasks prune` removes them; --projects DIR finds a manifest elsewhere)")
        summary.problems.append(msg)
        on_problem(msg)
    return [t for t in tasks if t.project not in gone]


def _default_label(req: EvalRequest) -> str:
    if req.ground_truth:
        return "ground truth"
    if req.blank:
        return "blank bodies"
    return req.samples.stem if req.samples else "run"


def _samples(req: EvalRequest, tasks: list[Task], summary: RunSummary, on_problem: Callable[[str], None],
             fallback: Resolver, lines: list[str] | None = None) -> list[RunSample]:
    if req.ground_truth or req.blank:
        make = _original_code if req.ground_truth else _blank_code
        return [RunSample(task_id=t.task_id, index=0, code=make(t), hash=code_hash(make(t))) for t in tasks]
    resolver = first_of(resolver_from_tasks(tasks), fallback)
    loaded = parse_samples(lines, resolver) if lines is not None else read_samples(req.samples, resolver)
    for p in loaded.problems:
        msg = f"{req.samples}:{p.line}: {p.kind.value}: {p.message}"
        summary.problems.append(msg)
        on_problem(msg)
    selected = {t.task_id for t in tasks}
    out = []
    for s in loaded.samples:
        if s.task_id not in selected:
            summary.skipped_samples += 1
            continue
        meta = {**s.metadata, "line": s.line, "input_id": s.input_id, "kind": s.kind.value}
        out.append(RunSample(task_id=s.task_id, index=s.index, code=s.code, hash=code_hash(s.code), metadata=meta))
    if not out:
        raise UsageError(f"{req.samples}: no usable sample for the selected tasks",
                         hint="check the task ids (coderun tasks list) and the problems listed above")
    return out


def _original_code(task: Task) -> str:
    return task.source


def _blank_code(task: Task) -> str:
    """The task's header with a body that raises: a negative control that must score 0%."""
    header = textwrap.dedent(task.signature).rstrip()
    return f"{header}\n    raise NotImplementedError\n"


# ------------------------------------------------------------------------------------ executing


@dataclass
class _Unit:
    """One unique (task, code): every sample in `samples` shares its verdict."""

    task: Task
    code: str
    samples: list[RunSample]
    inputs: TaskInputs | None = None    # the differential step's (pass+)
    rigor: str = "base"                 # which verdict is the headline
    template: bool = True               # more units of the task follow: keep a pytest template for them

    @property
    def cost(self) -> float:
        return sum(self.task.test_durations.values()) * len(self.task.runs())


def execute(store: RunStore, settings: Settings, *, jobs: int | None = None, cluster: str | None = None,
            progress: Callable[[Result], None] = lambda _r: None) -> RunSummary:
    """Evaluate every sample of the run that has no result yet (infra results are retried); with `cluster`,
    on a Ray cluster, with as many units at once as it has CPUs."""
    config = store.info().eval_config()
    jobs = max(1, int(jobs or config.jobs or 1))
    run_tasks = [t for t in store.tasks() if t.task is not None]
    tasks = {t.task_id: t.task for t in run_tasks}
    # naive: every sample runs, as the reference
    units = _units(store, tasks, dedupe=config.executor is not Executor.NAIVE)
    inputs = {t.task_id: t.inputs for t in run_tasks}
    per_task = Counter(u.task.task_id for u in units)
    for u in units:
        u.inputs, u.rigor, u.template = inputs.get(u.task.task_id), config.rigor, per_task[u.task.task_id] > 1
    summary = RunSummary(store.path)
    projects = _with_test_files(projects_of_run(store, [u.task.project for u in units], settings, tasks), units)
    summary.problems += _record_environments(store, projects) + _not_runnable_notes(units, projects)
    with make_pool(config.executor, config.backend, {n: p.spec for n, p in projects.items()}, jobs,
                   cluster=cluster, manifests={n: p.manifest for n, p in projects.items()},
                   registry=settings.registry) as pool:
        try:
            _run_units(units, store, pool, projects, getattr(pool, "slots", jobs), summary, progress)
        finally:
            summary.problems += pool.notes  # samples that fell back from workers to the naive path
    return summary


def _with_test_files(projects: dict[str, RunProject], units: list[_Unit]) -> dict[str, RunProject]:
    """Each project with the test files its units run, which each worker then primes at its first sample."""
    files: dict[str, dict[str, None]] = {}
    for u in units:
        for conf in u.task.runs():
            files.setdefault(u.task.project, {}).update(dict.fromkeys(files_of(conf.tests)))
    return {n: replace(p, prime_files=tuple(files.get(n, ()))) for n, p in projects.items()}


def _units(store: RunStore, tasks: dict[str, Task], dedupe: bool = True) -> list[_Unit]:
    infra = {(r.task_id, r.index) for r in store.results() if r.verdict == VerdictKind.INFRA}
    done = {(r.task_id, r.index) for r in store.results()} - infra
    groups: dict[tuple, _Unit] = {}
    for s in store.samples():
        if (s.task_id, s.index) in done:
            continue
        task = tasks.get(s.task_id)
        if task is None:
            raise TaskError(f"{store.path}: sample for {s.task_id}, which the run does not record")
        key = (s.task_id, s.hash) if dedupe else (s.task_id, s.hash, s.index)
        unit = groups.setdefault(key, _Unit(task, s.code, []))
        unit.samples.append(s)
    return sorted(groups.values(), key=lambda u: -u.cost)  # longest first keeps every worker busy


def _record_environments(store: RunStore, projects: dict[str, RunProject]) -> list[str]:
    """Add each project's environment to the run the first time the run uses it. A resumed run keeps
    what it recorded; a difference (a rebuilt env, another coderun) is returned as a note to show."""
    env = store.environment()
    if env is None:  # a run made before coderun recorded versions: what ran its first samples is unknown
        return []
    notes = []
    now = coderun_environment()
    changed = _changes(env.coderun.python, now.python, env.coderun.packages, now.packages)
    if env.coderun.coderun != now.coderun:
        changed.insert(0, f"coderun {env.coderun.coderun} -> {now.coderun}")
    if changed:
        notes.append(f"coderun differs from the one recorded at run start: {', '.join(changed)}; "
                     f"{ENVIRONMENT_FILE} keeps the recorded versions")
    for name, p in projects.items():
        old = env.projects.get(name)
        changed = _changes(old.python, p.environment.python, old.packages, p.environment.packages) if old else []
        if changed:
            notes.append(f"{name}: the environment differs from the one the run recorded: {', '.join(changed)}; "
                         f"{ENVIRONMENT_FILE} keeps the recorded one")
    new = {name: p.environment for name, p in projects.items() if name not in env.projects}
    if new:
        _save_environment(store, env.model_copy(update={"projects": {**env.projects, **new}}))
    return notes


def _not_runnable_notes(units: list[_Unit], projects: dict[str, RunProject]) -> list[str]:
    """A line per project with tasks whose tests do not all pass on the original in its environment (tasks
    built in another one): their samples are infrastructure errors, not run."""
    found: dict[str, dict[str, list[str]]] = {}
    for task in {u.task.task_id: u.task for u in units}.values():  # a task has a unit per distinct code
        tests = projects[task.project].not_passing_here(task)
        if tests:
            found.setdefault(task.project, {})[task.task_id] = tests
    notes = []
    for name, tasks in sorted(found.items()):
        tests = sorted({n for t in tasks.values() for n in t})
        notes.append(f"{name}: {len(tasks)} task(s) cannot be graded in this environment: its baseline does not "
                     f"pass {len(tests)} of their tests ({', '.join(tests[:3])}{', ...' if len(tests) > 3 else ''}); "
                     "their samples are infrastructure errors (left out of pass@k). The tasks were verified in "
                     f"another environment: rebuild them on this backend (coderun tasks build {name} --backend ...)")
    return notes


def _changes(old_python: str, new_python: str, old: list[Package], new: list[Package]) -> list[str]:
    python = [f"Python {old_python} -> {new_python}"] if old_python != new_python else []
    return python + differences(old, new)


def _run_units(units: list[_Unit], store: RunStore, pool: Pool, projects: dict[str, RunProject],
               jobs: int, summary: RunSummary, progress: Callable[[Result], None]) -> None:
    consecutive_infra = 0
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="coderun-eval") as ex:
        todo = list(units)
        running: dict[Future, _Unit] = {}
        freed: list[str] = []  # projects whose slot just finished a unit
        while True:
            while len(running) < jobs and todo:
                busy = {r.task.project for r in running.values()}
                u = todo.pop(_next_unit(todo, freed.pop() if freed else None, busy))
                running[ex.submit(_evaluate_unit, u, store, pool, projects[u.task.project])] = u
            if not running:
                break
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in finished:
                freed.append(running.pop(fut).task.project)
                results = _finished(fut, store)
                for r in results:
                    _count(summary, r)
                    progress(r)
                summary.executed += 1
                ran = results[0].evidence is not None  # an infra verdict without a run is not the sandbox's
                consecutive_infra = consecutive_infra + 1 if ran and results[0].verdict == VerdictKind.INFRA else 0
            if consecutive_infra >= MAX_CONSECUTIVE_INFRA:
                for fut in running:
                    fut.cancel()
                raise SandboxError(
                    f"the sandbox failed {consecutive_infra} times in a row: {results[0].reason}",
                    hint=f"fix the engine or disk, then continue with `coderun eval --resume {store.path}`")


def _next_unit(todo: list[_Unit], project: str | None, busy: set[str]) -> int:
    """The longest remaining unit of the project a slot just worked on; else of a project no other slot
    is on; else the longest of all. A slot stays with one project while it has work, so the workers
    executor starts about one worker per project, not one per project and slot."""
    for wanted in (lambda u: u.task.project == project, lambda u: u.task.project not in busy):
        for i, u in enumerate(todo):
            if wanted(u):
                return i
    return 0


def _finished(fut: Future, store: RunStore) -> list[Result]:
    """A unit's results; a failed write into the run folder (a full disk) stops the run, resumable."""
    try:
        return fut.result()
    except OSError as e:
        raise StoreError(f"cannot write into the run folder {store.path}: {e.strerror or e}",
                         hint=f"free some space, then continue with `coderun eval --resume {store.path}`") from None


def _count(summary: RunSummary, r: Result) -> None:
    summary.passed += r.verdict == VerdictKind.PASS
    summary.failed += r.verdict == VerdictKind.FAIL
    summary.infra += r.verdict == VerdictKind.INFRA


def _evaluate_unit(unit: _Unit, store: RunStore, pool: Pool, project: RunProject) -> list[Result]:
    task, first = unit.task, unit.samples[0]
    started = time.monotonic()
    log = store.path / "logs" / task_slug(task.task_id) / f"{first.index}.log"
    judged = judge(task, unit.code, project, pool, inputs=unit.inputs, log=log, template=unit.template)
    spliced_path = None
    if judged.new_source is not None:
        spliced_path = store.path / "spliced" / task_slug(task.task_id) / f"{first.index}.py"
        spliced_path.parent.mkdir(parents=True, exist_ok=True)
        spliced_path.write_text(judged.new_source, encoding="utf-8")
    return _record(store, unit, judged.outcome, judged.evidence, spliced_path, judged.log_path,
                   time.monotonic() - started)


def _record(store: RunStore, unit: _Unit, outcome: PlusOutcome, evidence: Evidence | None, spliced: Path | None,
            log: Path | None, duration: float) -> list[Result]:
    verdict = outcome.verdict(unit.rigor)
    results = []
    for i, s in enumerate(unit.samples):
        reason = verdict.reason if i == 0 else f"{verdict.reason} (same code as sample {unit.samples[0].index})"
        r = Result(task_id=s.task_id, index=s.index, verdict=verdict.verdict, failure=verdict.failure,
                   reason=reason, evidence=evidence, spliced_path=str(spliced) if spliced else None,
                   log_path=str(log) if log else None, duration=round(duration, 3), rigor=outcome)
        store.record_result(r)
        results.append(r)
    return results
