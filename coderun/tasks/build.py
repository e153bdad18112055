"""`build_tasks`: environment → analysis → selection → test mapping → verification → store.

The mapping always runs in the project's local venv (coverage needs the venv's own tracer); the
verification runs in the sandbox backend the evaluation will use (`local` or `docker`).
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from pydantic import Field
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from coderun.config import Settings
from coderun.envs.local import LocalEnv, build_local_env, find_local_env, load_baseline
from coderun.errors import SandboxError, TaskError
from coderun.manifest import Manifest
from coderun.records import Level, Record, Task, TaskStatus
from coderun.tasks import store
from coderun.tasks.coverage_map import CoverageMap, collect_coverage, test_file
from coderun.tasks.discovery import Candidate, select, task_id
from coderun.tasks.verify import (
    ORIGINAL_RUNS,
    TaskTests,
    TestRunner,
    Verification,
    unstable_tests,
    verify_task,
)

_err = Console(stderr=True)


class ProjectTaskReport(Record):
    """What one project's task build found (saved in the store beside its tasks)."""

    project: str
    commit: str
    backend: str
    include_weak: bool = False
    candidates: int = 0                      # explicit + discovered
    explicit: int = 0
    discovered: int = 0
    unresolved: list[str] = Field(default_factory=list)
    rejected: dict[str, int] = Field(default_factory=dict)
    mapping: str = "coverage"                # coverage | filename
    mapping_note: str = ""
    covered: int = 0
    statuses: dict[str, int] = Field(default_factory=dict)
    levels: dict[str, int] = Field(default_factory=dict)   # benchmark tasks per level
    flaky_tests: list[str] = Field(default_factory=list)
    reasons: dict[str, str] = Field(default_factory=dict)  # task id -> why it is not verified
    seconds: float = 0.0


class TaskBuildReport(Record):
    projects: list[ProjectTaskReport] = Field(default_factory=list)

    def levels(self) -> dict[str, int]:
        total: Counter[str] = Counter()
        for p in self.projects:
            total.update(p.levels)
        return {lv.value: total[lv.value] for lv in Level}


def in_benchmark(task: Task, include_weak: bool) -> bool:
    return task.status is TaskStatus.VERIFIED or (include_weak and task.status is TaskStatus.WEAK)


def build_tasks(manifest: Manifest | list[Manifest], settings: Settings, backend: str = "local",
                include_weak: bool = False, progress: bool = True) -> TaskBuildReport:
    manifests = manifest if isinstance(manifest, list) else [manifest]
    return TaskBuildReport(projects=[build_project(m, settings, backend, include_weak, progress)
                                     for m in manifests])


def build_project(manifest: Manifest, settings: Settings, backend: str = "local", include_weak: bool = False,
                  progress: bool = True) -> ProjectTaskReport:
    started = time.monotonic()
    say = _err.print if progress else (lambda *a, **k: None)
    env = find_local_env(manifest, settings) or build_local_env(
        manifest, settings, warn=lambda msg: say(f"[yellow]{msg}[/]"))
    baseline = load_baseline(env)
    logs = settings.runs / "tasks" / manifest.name
    shutil.rmtree(logs, ignore_errors=True)  # the logs of this build only
    logs.mkdir(parents=True)
    say(f"[bold]{manifest.name}[/]: analyzing")
    analysis = _analyze(manifest, env, settings, say)
    selection = select(manifest, analysis)
    say(f"[bold]{manifest.name}[/]: {len(selection.candidates)} candidate functions; "
        "mapping tests (one coverage run of the suite)")
    covmap = collect_coverage(manifest, env.python, env.checkout.path, baseline, log=logs / "coverage.log")
    mapped = [(c, *_map(c, covmap)) for c in selection.candidates]
    with _runner(manifest, settings, backend, env, logs) as runner:
        verdicts = _verify_all(manifest, env, runner, [(c, tests) for c, tests, _ in mapped], progress)
    tasks = [_task(manifest, env, c, tests, kind, covmap, verdicts[_tid(manifest, c)])
             for c, tests, kind in mapped]
    report = _report(manifest, env, backend, include_weak, selection, covmap, tasks, verdicts, started)
    store.save_project(settings, manifest.name, env.checkout.commit, tasks, report.model_dump_json(),
                       include_weak)
    return report


def _analyze(manifest: Manifest, env: LocalEnv, settings: Settings, say):
    from coderun.analyzers import analyze_cached
    from coderun.errors import AnalysisError

    try:
        return analyze_cached(env.checkout, settings, python=env.python, import_root=manifest.import_root)
    except AnalysisError as e:
        if "jedi" not in e.message:
            raise
        # jedi runs a helper inside the project's interpreter; some jedi releases cannot (e.g. 0.20 on 3.9)
        say(f"[yellow]{manifest.name}: {e.message}; analyzing without jedi[/]")
        return analyze_cached(env.checkout, settings, python=env.python, use_jedi=False,
                              import_root=manifest.import_root)


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


def _verify_all(manifest: Manifest, env: LocalEnv, runner: TestRunner,
                mapped: list[tuple[Candidate, list[str]]], progress: bool) -> dict[str, Verification]:
    from coderun.runner.splice import blank_body

    union = {n for _, tests in mapped for n in tests}
    out: dict[str, Verification] = {}
    with _progress(progress) as bar:
        shared = bar.add_task(f"{manifest.name}: original x{ORIGINAL_RUNS - 1} (all mapped tests)",
                              total=1)
        flaky, always = unstable_tests(runner, union, ORIGINAL_RUNS - 1)
        bar.advance(shared)
        each = bar.add_task(f"{manifest.name}: verify tasks", total=len(mapped))
        sources: dict[str, str] = {}
        for c, tests in mapped:
            fn = c.function
            if tests and fn.file not in sources:
                sources[fn.file] = (env.checkout.path / fn.file).read_text(encoding="utf-8")
            spec = TaskTests(_tid(manifest, c), fn.file, fn.qualname, fn.lineno, tuple(tests))
            out[spec.task_id] = verify_task(spec, runner, sources.get(fn.file, ""),
                                            lambda src, q, ln: blank_body(src, q, lineno=ln),
                                            flaky=flaky, always_failed=always)
            bar.advance(each)
    return out


@contextlib.contextmanager
def _progress(enabled: bool) -> Iterator[Progress]:
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   console=_err, disable=not enabled, transient=False)
    with bar:
        yield bar


@contextlib.contextmanager
def _runner(manifest: Manifest, settings: Settings, backend: str, env: LocalEnv, logs: Path
            ) -> Iterator[TestRunner]:
    """A TestRunner backed by the evaluation's sandbox and `run_sample`."""
    import warnings

    from coderun.runner.evaluate import project_sandbox_spec
    from coderun.runner.execute import run_sample
    from coderun.runner.grade import tampered_machinery
    from coderun.runner.sandbox import create_sandbox
    from coderun.runner.sandbox.local import UntrustedCodeWarning
    from coderun.testrun import test_env

    spec = project_sandbox_spec(manifest, settings, backend)  # exactly the evaluation's sandbox
    counter = iter(range(1, 1 << 30))
    tree = env.checkout.path
    t_env = {k: v for k, v in test_env(manifest, tree).items() if k != "PYTHONPATH"}

    def run(relfile: str | None, new_source: str | None, nodeids: list[str], *,
            first_failure: bool = False) -> dict[str, str]:
        # run_sample always writes one file: with nothing to change, write a test file back unchanged.
        relfile = relfile or test_file(nodeids[0])
        if new_source is None:
            new_source = (tree / relfile).read_text(encoding="utf-8")
        ev = run_sample(sandbox, relfile=relfile, new_source=new_source, nodeids=nodeids,
                        timeout=manifest.tests.timeout, per_test_timeout=manifest.tests.timeout_per_test,
                        env=t_env, pytest_args=[*manifest.tests.args, *(["-x"] if first_failure else [])],
                        log_path=logs / f"run-{next(counter):05d}.log")
        if ev.infra_error:
            raise SandboxError(f"{manifest.name}: the sandbox failed while verifying tasks: {ev.infra_error}")
        machinery = tampered_machinery(ev.tampering)
        if machinery:  # evaluation would grade every sample of this run as tampering: say so now
            raise TaskError(f"{manifest.name}: running the project's own code trips coderun's tampering check "
                            f"({'; '.join(machinery)}); every sample would fail as tampering",
                            hint=f"see {ev.log_path}; this is the environment (a test dependency hooking pytest "
                                 "the way a sample would), so please report it with the log")
        return {t.nodeid: t.outcome for t in ev.outcomes}

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UntrustedCodeWarning)  # our own, original code
        sandbox = create_sandbox(backend, spec)
        with sandbox:
            yield run


def _task(manifest: Manifest, env: LocalEnv, c: Candidate, tests: list[str], kind: str, covmap: CoverageMap,
          v: Verification) -> Task:
    fn = c.function
    kept = list(v.tests) if v.status in (TaskStatus.VERIFIED, TaskStatus.WEAK) else tests
    return Task(
        task_id=_tid(manifest, c), aliases=list(c.aliases), project=manifest.name, commit=env.checkout.commit,
        file=fn.file, qualname=fn.qualname, name=fn.name, lineno=fn.lineno, end_lineno=fn.end_lineno,
        is_async=fn.is_async, class_name=fn.class_name, signature=fn.signature, docstring=fn.docstring,
        human_docstring=c.human_docstring, source=fn.source, level=fn.level,
        oracle_context=fn.oracle_context, all_context=fn.all_context, tests=kept,
        test_files=sorted({test_file(n) for n in kept}),
        test_durations={n: covmap.outcomes[n].duration for n in kept if n in covmap.outcomes},
        mapping=kind, flaky_tests=list(v.flaky), status=v.status, explicit=c.explicit)


def _report(manifest: Manifest, env: LocalEnv, backend: str, include_weak: bool, selection, covmap: CoverageMap,
            tasks: list[Task], verdicts: dict[str, Verification], started: float) -> ProjectTaskReport:
    explicit = sum(t.explicit for t in tasks)
    levels = Counter(t.level.value for t in tasks if in_benchmark(t, include_weak))
    return ProjectTaskReport(
        project=manifest.name, commit=env.checkout.commit, backend=backend, include_weak=include_weak,
        candidates=len(tasks), explicit=explicit, discovered=len(tasks) - explicit,
        unresolved=list(selection.unresolved), rejected=dict(selection.rejected), mapping=covmap.kind,
        mapping_note=covmap.reason, covered=sum(bool(t.tests) for t in tasks),
        statuses=dict(Counter(t.status.value for t in tasks)), levels=dict(levels),
        flaky_tests=sorted({n for t in tasks for n in t.flaky_tests}),
        reasons={tid: v.reason for tid, v in verdicts.items() if v.reason},
        seconds=round(time.monotonic() - started, 1))

