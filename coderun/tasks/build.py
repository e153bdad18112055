"""`build_tasks`: environment → analysis → selection → test mapping → caps → verification → store.

The mapping always runs in the project's local venv (coverage needs the venv's own tracer); the
verification runs in the sandbox backend the evaluation will use (`local` or `docker`), through the
evaluation's workers executor: one long-lived worker per slot keeps the tree in memory and forks a child
per run, so no run copies the project from disk. Distinct tasks are verified in parallel (`jobs`); each
decision is kept in the store as soon as it is made, so an interrupted build resumes where it stopped.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from coderun.config import Settings
from coderun.envs.local import LocalEnv, build_local_env, find_local_env, load_baseline
from coderun.errors import CoderunError, EnvironmentBuildError, SourceError, TaskError
from coderun.events import Listener, Note, silent
from coderun.manifests.schema import Manifest, supplementary_files
from coderun.parallel import JobSlots, Tally, parallel
from coderun.plus.derive import project_inputs, record
from coderun.plus.inputs import explore_payload
from coderun.plus.record import Recording
from coderun.records import (
    ConfigurationTests,
    NetworkAttempt,
    TargetOutcome,
    Task,
    TaskInputs,
    TaskStatus,
    Unverified,
    task_id,
)
from coderun.tasks import in_benchmark, store
from coderun.tasks.coverage_map import CoverageMap, cap_tests, collect_coverage, test_file
from coderun.tasks.discovery import Candidate, Selection, select
from coderun.tasks.reports import ProjectTaskReport, RunKindTime, TaskBuildReport
from coderun.tasks.sandbox_runs import configuration_names, run_kinds_line, sandbox_tests
from coderun.tasks.trivial import RAISE, bodies_for, task_bodies
from coderun.tasks.verify import (
    ORIGINAL_RUNS,
    OriginalRuns,
    Shared,
    TaskTests,
    TestRunner,
    Verification,
    unstable_tests,
    verify_task,
)

# Part of the key under which an unfinished build's decisions are kept: bump when verification changes.
VERIFY_VERSION = "4"


def default_jobs() -> int:
    return max(1, os.cpu_count() or 1)


def build_tasks(manifest: Manifest | list[Manifest], settings: Settings, backend: str = "local",
                include_weak: bool = False, jobs: int | None = None, rigor: bool = True, *,
                on_event: Listener = silent) -> TaskBuildReport:
    manifests = manifest if isinstance(manifest, list) else [manifest]
    return TaskBuildReport(projects=[build_project(m, settings, backend, include_weak, jobs, rigor,
                                                   on_event=on_event)
                                     for m in manifests])


def build_project(manifest: Manifest, settings: Settings, backend: str = "local", include_weak: bool = False,
                  jobs: int | None = None, rigor: bool = True, *, on_event: Listener = silent) -> ProjectTaskReport:
    """Build one project's tasks. A failed build records why on each declared target of a project with no
    stored build (a stored one keeps the outcomes of the tasks it stored) and re-raises."""
    try:
        return _build_project(manifest, settings, backend, include_weak, jobs, rigor, on_event)
    except CoderunError as e:
        store.save_failed_targets(settings, manifest.name, failed_outcomes(manifest, e))
        raise


def _build_project(manifest: Manifest, settings: Settings, backend: str, include_weak: bool, jobs: int | None,
                   rigor: bool, on_event: Listener) -> ProjectTaskReport:
    started = time.monotonic()
    jobs = max(1, jobs or default_jobs())
    say = _say(manifest, on_event)
    JobSlots.hold_own(lambda: say("waiting for a core the builds beside this one hold"))
    lap = _Laps()
    env = find_local_env(manifest, settings) or build_local_env(manifest, settings, on_event=on_event)
    lap("environment")
    baseline = load_baseline(env)
    kept = _Kept(settings, manifest.name, _inputs(manifest, env, backend))
    logs = settings.runs / "tasks" / manifest.name
    if not kept.records:
        shutil.rmtree(logs, ignore_errors=True)  # the logs of this build only (kept ones: of the one resumed)
    logs.mkdir(parents=True, exist_ok=True)
    say("analyzing")
    analysis = _analyze(manifest, env, settings, say)
    selection = select(manifest, analysis)
    lap("analysis")
    say(f"{len(selection.candidates)} candidate functions")
    if not selection.candidates:
        raise no_candidates(manifest, selection, len(analysis.functions))
    covmap = _coverage(manifest, env, baseline, logs, kept, say, selection.candidates)
    lap("coverage map")
    durations = {n: o.duration for n, o in covmap.outcomes.items()}  # what the evaluation's limits use
    mapped, capped = _map_all(manifest, selection.candidates, covmap,
                              {**durations, **{t.nodeid: t.duration for t in baseline.tests}})
    _say_capped(say, manifest, capped)
    notes: list[str] = []
    with sandbox_tests(manifest, settings, backend, env, logs, durations, jobs, notes) as runner:
        runner.prestart()  # the workers start on the other core while the recording runs on one
        recorded = record(manifest, env, {_tid(manifest, c): (_candidate_target(c), tests)
                                          for c, tests, _ in mapped if tests}, logs, say) if rigor else {}
        lap("recording")
        verifying = time.monotonic()
        supplementary = set(supplementary_files(manifest))  # paths as the tree has them
        verdicts = _verify_all(manifest, env, runner, [(c, tests) for c, tests, _ in mapped], jobs, kept,
                               on_event, recorded)
        lap("verification")
        tasks = [_task(manifest, env, c, tests, kind, covmap, verdicts[_tid(manifest, c)], supplementary)
                 for c, tests, kind in mapped]
        inputs: list[TaskInputs] = []
        if rigor:
            say("deriving pass+ inputs from the recorded calls")
            tasks, inputs = project_inputs(tasks, recorded, runner.observe, task_bodies, jobs, on_event,
                                           manifest.name, env.checkout.path,
                                           {tid: v.explored for tid, v in verdicts.items() if v.explored})
            lap("pass+")
    _say_times(say, lap, runner.by_kind())
    report = _report(manifest, env, backend, include_weak, selection, covmap, tasks, verdicts, started,
                     capped=capped, max_tests_per_task=manifest.tasks.max_tests_per_task,
                     max_seconds_per_task=manifest.tasks.max_seconds_per_task, jobs=jobs, resumed=kept.resumed,
                     fallbacks=notes, verify_seconds=round(time.monotonic() - verifying, 1),
                     stage_seconds=lap.seconds, run_kinds=runner.by_kind())
    store.save_project(settings, manifest.name, env.checkout.commit, tasks, report.model_dump_json(),
                       include_weak, targets=target_outcomes(manifest, tasks, report))
    store.save_rigor(settings, manifest.name, tasks, inputs)
    return report


def target_outcomes(manifest: Manifest, tasks: list[Task], report: ProjectTaskReport) -> list[TargetOutcome]:
    """Each declared target's outcome in a finished build: verified, or why not."""
    by_id = {t.task_id: t for t in tasks}
    out = []
    for target in manifest.tasks.targets:
        tid = task_id(manifest.name, target.file, target.qualname)
        task = by_id.get(tid)
        if task is None:
            reason, detail = Unverified.ABSENT, f"not in the source at {report.upstream_commit[:12]}"
        else:
            reason, detail = Unverified.of(task.status), report.reasons.get(tid, "")
        out.append(TargetOutcome(project=manifest.name, function=target.function, task_id=tid,
                                 aliases=list(target.aliases), reason=reason, detail=detail,
                                 status_note=target.status_note,
                                 supplementary=task is not None and task.supplementary))
    return out


def failed_outcomes(manifest: Manifest, error: CoderunError) -> list[TargetOutcome]:
    """Each declared target's outcome when its project's build failed with `error`."""
    reason = (Unverified.SOURCE_FAILED if isinstance(error, SourceError) else
              Unverified.ENV_FAILED if isinstance(error, EnvironmentBuildError) else Unverified.BUILD_FAILED)
    detail = error.message.splitlines()[0] if error.message else type(error).__name__
    return [TargetOutcome(project=manifest.name, function=t.function,
                          task_id=task_id(manifest.name, t.file, t.qualname), aliases=list(t.aliases),
                          reason=reason, detail=detail, status_note=t.status_note)
            for t in manifest.tasks.targets]


class _Laps:
    """Seconds since the previous lap, by stage name: `lap("analysis")`."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._mark = time.monotonic()

    def __call__(self, stage: str) -> None:
        now = time.monotonic()
        self.seconds[stage] = round(now - self._mark, 1)
        self._mark = now


def _say_capped(say, manifest: Manifest, capped: dict[str, list[str]]) -> None:
    if capped:
        say(f"{len(capped)} tasks capped (max_tests_per_task "
            f"{manifest.tasks.max_tests_per_task or 'none'}, max_seconds_per_task {manifest.tasks.max_seconds_per_task:g}): "
            f"{sum(map(len, capped.values()))} of their slowest mapped tests dropped")


def _say_times(say, lap: _Laps, kinds: dict[str, RunKindTime]) -> None:
    say("time by stage: " + ", ".join(f"{k} {v:.1f}s" for k, v in lap.seconds.items()))
    if kinds:
        say(run_kinds_line(kinds))


def _say(manifest: Manifest, on_event: Listener) -> Callable[..., None]:
    """A note about the project's build: `say(text)`, or `say(text, "warning")`."""
    return lambda text, level="info": on_event(Note(manifest.name, text, level))


def _coverage(manifest: Manifest, env: LocalEnv, baseline, logs: Path, kept: _Kept, say,
              candidates: list[Candidate]) -> CoverageMap:
    """The test mapping: kept by the interrupted build with the same inputs, else one coverage run of the
    candidates' files."""
    covmap = CoverageMap.from_json(kept.records["coverage"]) if "coverage" in kept.records else None
    if covmap is not None:
        say("test mapping taken from the interrupted build")
        return covmap
    say("mapping tests (one coverage run of the suite)")
    covmap = collect_coverage(manifest, env.python, env.checkout.path, baseline, log=logs / "coverage.log",
                              measure={c.function.file for c in candidates})
    kept.keep("coverage", covmap.to_json())
    return covmap


def _inputs(manifest: Manifest, env: LocalEnv, backend: str) -> str:
    """What a kept decision depends on: commit, manifest (tests, caps, targets), environment, backend."""
    return manifest.spec_hash(env.checkout.commit, env.key, env.tests_key, backend, VERIFY_VERSION)


@dataclass
class _Kept:
    """The decisions of an interrupted build with the same inputs; every new one is kept at once."""

    settings: Settings
    project: str
    inputs: str
    records: dict[str, str] = field(default_factory=dict)
    resumed: int = 0

    def __post_init__(self) -> None:
        self.records = store.progress(self.settings, self.project, self.inputs)

    def keep(self, key: str, record: str) -> None:
        store.keep_progress(self.settings, self.project, self.inputs, key, record)


def _analyze(manifest: Manifest, env: LocalEnv, settings: Settings, say):
    from coderun.analyzers import analyze_cached
    from coderun.errors import AnalysisError

    try:
        return analyze_cached(env.checkout, settings, python=env.python, import_root=manifest.import_root)
    except AnalysisError as e:
        if "jedi" not in e.message:
            raise
        # jedi runs a helper inside the project's interpreter; some jedi releases cannot (e.g. 0.20 on 3.9)
        say(f"{e.message}; analyzing without jedi", "warning")
        return analyze_cached(env.checkout, settings, python=env.python, use_jedi=False,
                              import_root=manifest.import_root)


def no_candidates(manifest: Manifest, selection: Selection, functions: int) -> TaskError:
    """The error of a build with no candidate: which rules dropped the functions, and the option that helps."""
    why = ", ".join(f"{n} {reason}" for reason, n in sorted(selection.rejected.items(), key=lambda kv: -kv[1]))
    hint = "check tasks.discover (include, exclude) and tasks.targets in the manifest"
    code = functions - selection.rejected.get("test code", 0) - selection.rejected.get("file not included", 0)
    if selection.rejected.get("no English docstring", 0) * 2 >= code > 0:
        hint = ("most functions have no docstring: `tasks.discover.undocumented: true` takes them too (their "
                "prompt has the signature and context only), or `coderun projects add ... --undocumented`")
    elif code <= 0 < selection.rejected.get("file not included", 0):
        hint = "no function is in a file tasks.discover.include names: check its globs"
    return TaskError(f"{manifest.name}: no candidate function among the {functions} the analysis found"
                     + (f" ({why})" if why else "") + "; nothing to build", hint=hint)


def _tid(manifest: Manifest, c: Candidate) -> str:
    return task_id(manifest.name, c.function.file, c.function.qualname)


def _map(c: Candidate, covmap: CoverageMap) -> tuple[list[str], str]:
    """The passing tests that execute the function's body (decorators and `def` run at import)."""
    fn = c.function
    if covmap.kind == "coverage":
        tests = covmap.tests_for(fn.file, range(fn.body_lineno, fn.body_end_lineno + 1))
        return sorted(tests), "coverage" if tests else "none"
    tests = covmap.tests_by_filename(fn.file)
    return sorted(tests), "filename" if tests else "none"


def _map_all(manifest: Manifest, candidates: list[Candidate], covmap: CoverageMap, slowness: dict[str, float]
             ) -> tuple[list[tuple[Candidate, list[str], str]], dict[str, list[str]]]:
    """Each candidate's mapped tests within the manifest's caps (`slowness`: baseline durations), and the
    tests the caps dropped per task id."""
    mapped, capped = [], {}
    for c in candidates:
        tests, kind = _map(c, covmap)
        if tests:
            tests, dropped = cap_tests(tests, slowness, manifest.tasks.max_tests_per_task,
                                       manifest.tasks.max_seconds_per_task)
            if dropped:
                capped[_tid(manifest, c)] = dropped
        mapped.append((c, tests, kind))
    return mapped, capped


def _verify_all(manifest: Manifest, env: LocalEnv, runner: TestRunner, mapped: list[tuple[Candidate, list[str]]],
                jobs: int, kept: _Kept, on_event: Listener, recorded: dict[str, Recording] | None = None
                ) -> dict[str, Verification]:
    """Every task's verdict: the shared runs of the original first, then the tasks, `jobs` at a time.
    `recorded`: per task id, the original's recorded calls (the trivial bodies' `empty` and `constant` read
    their return values; without them they come from the signature alone). A task with calls explores them
    for pass+ at the end of its own runs of the original (`Verification.explored`)."""
    from coderun.runner.splice import blank_body

    say = _say(manifest, on_event)
    specs = [(c, _spec(manifest, c, tests, (recorded or {}).get(_tid(manifest, c)))) for c, tests in mapped]
    shared = {conf: _shared_runs(manifest, runner, {n for _, tests in mapped for n in tests}, kept, say, conf,
                                 jobs) for conf in configuration_names(manifest)}
    out: dict[str, Verification] = {}
    todo = []
    for _, spec in specs:
        v = Verification.from_json(kept.records[spec.task_id], spec) if spec.task_id in kept.records else None
        if v is not None:
            out[spec.task_id] = v
        else:
            todo.append(spec)
    kept.resumed = len(out)
    if out:
        say(f"{len(out)} of {len(specs)} tasks already decided by the interrupted "
            "build with the same inputs; verifying the rest")
    sources = {spec.file: (env.checkout.path / spec.file).read_text(encoding="utf-8") for spec in todo if spec.tests}

    originals = OriginalRuns(runner, getattr(runner, "explore_original", None))

    def one(spec: TaskTests) -> Verification:
        return verify_task(spec, runner, sources.get(spec.file, ""),
                           lambda src, q, ln, stmt: blank_body(src, q, lineno=ln, statement=stmt), shared,
                           originals)

    tally = Tally(manifest.name, len(specs), Counter(v.status.value for v in out.values()), on_event)
    for spec, v in parallel(one, todo, jobs, on_event=on_event):
        kept.keep(spec.task_id, v.to_json(spec))
        out[spec.task_id] = v
        tally.advance(v.status.value)
    return out


def _spec(manifest: Manifest, c: Candidate, tests: list[str], recording: Recording | None) -> TaskTests:
    """What verification needs of one task: its tests, the trivial bodies to try (`raise` aside) and, with
    recorded calls, pass+'s exploring step (the payload plus/derive would send)."""
    fn, tid = c.function, _tid(manifest, c)
    calls = recording.calls if recording else []
    bodies = bodies_for(fn.signature, fn.class_name, fn.decorators, [call.obs for call in calls])
    explore = explore_payload(tid, fn, [call.input for call in calls]) if calls else None
    return TaskTests(tid, fn.file, fn.qualname, fn.lineno, tuple(tests), tuple(b for b in bodies if b[0] != RAISE),
                     explore)


def _candidate_target(c: Candidate) -> dict[str, object]:
    """Where a candidate function is, as the recorder (harness/coderun_recorder) finds its code."""
    fn = c.function
    return {"file": fn.file, "qualname": fn.qualname, "name": fn.name, "lineno": fn.lineno,
            "first": fn.start_lineno, "end_lineno": fn.end_lineno}


def _shared_runs(manifest: Manifest, runner: TestRunner, union: set[str], kept: _Kept, say, conf: str,
                 jobs: int) -> Shared:
    """(flaky, always failed) from the runs of the original on every mapped test at once, or as kept."""
    key = "shared:" + hashlib.sha256("\n".join([conf, *sorted(union)]).encode()).hexdigest()[:16]
    if key in kept.records:
        d = json.loads(kept.records[key])
        return Shared(frozenset(d["flaky"]), frozenset(d["always"]))
    where = f" in configuration {conf}" if conf else ""
    say(f"running the original x{ORIGINAL_RUNS - 1} on all {len(union)} mapped tests"
        + where)
    flaky, always = unstable_tests(runner, union, ORIGINAL_RUNS - 1, conf, jobs)
    kept.keep(key, json.dumps({"flaky": sorted(flaky), "always": sorted(always)}))
    return Shared(frozenset(flaky), frozenset(always))


def _task(manifest: Manifest, env: LocalEnv, c: Candidate, tests: list[str], kind: str, covmap: CoverageMap,
          v: Verification, supplementary: set[str]) -> Task:
    fn = c.function
    kept = list(v.tests) if v.status in (TaskStatus.VERIFIED, TaskStatus.WEAK) else tests
    files = sorted({test_file(n) for n in kept})
    return Task(
        task_id=_tid(manifest, c), aliases=list(c.aliases), project=manifest.name, commit=env.checkout.commit,
        file=fn.file, qualname=fn.qualname, name=fn.name, lineno=fn.lineno, end_lineno=fn.end_lineno,
        is_async=fn.is_async, class_name=fn.class_name, signature=fn.signature, docstring=fn.docstring,
        human_docstring=c.human_docstring, source=fn.source, level=fn.level,
        oracle_context=fn.oracle_context, all_context=fn.all_context, tests=kept,
        test_files=files, test_durations={n: covmap.outcomes[n].duration for n in kept if n in covmap.outcomes},
        mapping=kind, flaky_tests=list(v.flaky), status=v.status, explicit=c.explicit,
        supplementary=bool(supplementary.intersection(files)),
        configurations=[ConfigurationTests(name=n, tests=list(t)) for n, t in v.configurations],
        pass_stub_passes=v.pass_stub_passes, trivial_passes=list(v.trivial_passes),
        network_tests=[NetworkAttempt(nodeid=n, addresses=list(covmap.network[n])) for n in kept
                       if n in covmap.network])


def _report(manifest: Manifest, env: LocalEnv, backend: str, include_weak: bool, selection, covmap: CoverageMap,
            tasks: list[Task], verdicts: dict[str, Verification], started: float, **build) -> ProjectTaskReport:
    explicit = sum(t.explicit for t in tasks)
    levels = Counter(t.level.value for t in tasks if in_benchmark(t, include_weak))
    return ProjectTaskReport(
        project=manifest.name, commit=env.checkout.commit, upstream_commit=env.checkout.upstream_commit,
        backend=backend, include_weak=include_weak,
        candidates=len(tasks), explicit=explicit, discovered=len(tasks) - explicit,
        unresolved=list(selection.unresolved), rejected=dict(selection.rejected), mapping=covmap.kind,
        mapping_note=covmap.reason, covered=sum(bool(t.tests) for t in tasks),
        statuses=dict(Counter(t.status.value for t in tasks)), levels=dict(levels),
        flaky_tests=sorted({n for t in tasks for n in t.flaky_tests}),
        reasons={tid: v.reason for tid, v in verdicts.items() if v.reason},
        seconds=round(time.monotonic() - started, 1),
        configurations=[c.name for c in manifest.tests.configurations],
        pass_stub_passes=sorted(t.task_id for t in tasks if t.pass_stub_passes),
        trivial_passes={t.task_id: list(t.trivial_passes) for t in tasks if t.trivial_passes},
        network_tests={n: list(a) for t in tasks for n, a in ((x.nodeid, x.addresses) for x in t.network_tests)},
        network_note=covmap.network_note, positions=dict(covmap.positions), **build)

