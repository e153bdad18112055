"""`coderun eval`: evaluate samples in their projects and print the per-level report."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from coderun.cli._common import (
    JsonOption,
    ProjectsDirOption,
    RegistryOption,
    WideOption,
    build_each,
    console,
    err_console,
    print_json,
    print_table,
    project_selection,
    say_isolation,
    warn_if_unisolated,
    with_registry,
)
from coderun.cli.render import Renderer
from coderun.config import Settings
from coderun.errors import EnvironmentBuildError
from coderun.evaluation.evaluate import EvalRequest, RunSummary, execute, start_run
from coderun.evaluation.folder import PROBLEMS_FILE, problem_kind, problem_kinds
from coderun.evaluation.samples import Resolver
from coderun.evaluation.store import RunStore, resolve_run_dir
from coderun.manifests.schema import Manifest
from coderun.records import Level, VerdictKind
from coderun.report.metrics import UnderK, parse_ks
from coderun.sandbox.project import default_backend
from coderun.tasks.parallel import Tally


def eval_command(
    samples: Path = typer.Option(None, "--samples", "-s", help="JSON lines of samples (coderun or CoderEval "
                                 "result format)."),
    ground_truth: bool = typer.Option(False, "--ground-truth", help="Evaluate each task's original function "
                                      "(a sanity check that must score 100%)."),
    blank: bool = typer.Option(False, "--blank", help="Evaluate bodies that raise NotImplementedError "
                               "(a negative control that must score 0%)."),
    project: list[str] = typer.Option(None, "--project", "-p", help="Only these projects (repeatable)."),
    level: str = typer.Option(None, "--level", "-l", help="Only tasks of this runnable level."),
    backend: str = typer.Option(None, "--backend", "-b", help="docker or local (default: docker when an "
                                "engine answers, else local)."),
    jobs: int = typer.Option(os.cpu_count() or 1, "--jobs", "-j", help="Parallel workers."),
    executor: str = typer.Option("workers", "--executor", help="workers: a long-lived worker per project and "
                                 "slot forks a child per unique sample; naive: a fresh sandbox for every sample "
                                 "(the reference)."),
    cluster: str = typer.Option(None, "--cluster", help="Run on a Ray cluster: ray (RAY_ADDRESS, else a "
                                "local Ray instance), auto (a running cluster), ray://HOST:PORT (Ray Client) or "
                                "the HOST:PORT of a running cluster. Needs pip install 'coderun\\[ray]'."),
    registry: str = RegistryOption,
    rigor: str = typer.Option("base", "--rigor", help="The headline verdict: base (the project's tests) or "
                              "plus (pass+: and agreeing with the original on the task's differential inputs). "
                              "Both are kept and reported."),
    isolation: str = typer.Option("auto", "--isolation", help="local backend: auto (each sample in namespaces of "
                                  "its own where this machine can make them, else none, said at the start), "
                                  "namespaces (required) or none (samples share this machine)."),
    k: str = typer.Option("1,5,10", "-k", help="Comma-separated k for pass@k."),
    under_k: UnderK = typer.Option(UnderK.EXCLUDE, "--under-k", help="Tasks with fewer than k samples: "
                                   "exclude them, or count them CoderEval's way."),
    include_weak: bool = typer.Option(False, "--include-weak", help="Also evaluate weak tasks."),
    run_dir: Path = typer.Option(None, "--run-dir", help="Where the run folder goes (default: "
                                 "$CODERUN_HOME/runs/<run id>)."),
    resume: str = typer.Option(None, "--resume", help="Continue an interrupted run (folder or run id)."),
    label: str = typer.Option("", "--label", help="Name shown in reports."),
    projects_dir: list[Path] = ProjectsDirOption,
    as_json: bool = JsonOption,
    wide: bool = WideOption,
) -> None:
    """Splice samples into their projects, run the mapped tests in a sandbox, grade, report."""
    s, project = project_selection(project, projects_dir)
    s = with_registry(s, registry)
    ks = parse_ks(k)
    if resume:
        store = RunStore.open(resolve_run_dir(resume, s))
        err_console.print(f"resuming {store.path}: {len(store.results())} of {len(store.samples())} "
                          "samples already have a verdict")
    else:
        store = _start(s, EvalRequest(
            samples=samples, ground_truth=ground_truth, blank=blank, projects=tuple(project or ()),
            level=Level.parse(level) if level else None, backend=backend or default_backend(), jobs=jobs,
            include_weak=include_weak, run_dir=run_dir, label=label, executor=executor, cluster=cluster,
            rigor=rigor, isolation=isolation))
    env = store.environment()
    if env is not None and env.isolation:
        say_isolation(env.isolation, env.isolation_note)
    else:  # a run started before coderun recorded its isolation
        warn_if_unisolated(store.info().eval_config().backend)
    summary = _execute(store, s, jobs if resume else None, cluster)
    for note in summary.problems:  # samples that fell back from the workers executor to the naive one
        err_console.print(note, style="yellow", soft_wrap=True, markup=False, highlight=False)
    _finish(store, ks, under_k, summary, as_json, wide, s.runs)


def _start(s: Settings, req: EvalRequest) -> RunStore:
    from coderun.tasks import load_tasks

    fallback, failed = _build_missing_tasks(s, req)
    tasks, left_out = [], []
    for name in req.projects or [None]:
        tasks += load_tasks(s, project=name, level=req.level, include_weak=req.include_weak, rigor=req.rigor)
        left_out += [t for t in load_tasks(s, project=name, level=req.level, status="verified")
                     if t.trivially_passed(req.rigor) and not req.include_weak]
    if left_out:
        plus = " and pass+ lets it through" if req.rigor == "plus" else ""
        err_console.print(f"{len(left_out)} verified tasks are left out of this run: a trivial body passes their "
                          f"tests{plus} (weak or trivial in `coderun tasks list`); --include-weak evaluates them",
                          soft_wrap=True, highlight=False)
    if not tasks and failed:
        raise EnvironmentBuildError(f"no tasks to evaluate: building the tasks of {', '.join(failed)} failed "
                                    "(see above)")
    shown: Counter[str] = Counter()
    store, summary = start_run(req, s, tasks, on_problem=lambda m: _problem(m, shown), fallback=fallback)
    _problems_summary(store.path, summary.problems, shown.total())
    if summary.skipped_samples:
        err_console.print(f"{summary.skipped_samples} samples are for tasks outside the selection and were "
                          "left out")
    err_console.print(f"run folder: {store.path}", soft_wrap=True)  # stdout is the report's (or --json's)
    return store


MAX_PROBLEMS_SHOWN = 10  # of each kind: a few rare ones stay visible among many unknown ids


def _problem(message: str, shown: Counter[str]) -> None:
    # One line per problem, never wrapped: people grep these for the line numbers.
    if shown[problem_kind(message)] < MAX_PROBLEMS_SHOWN:
        shown[problem_kind(message)] += 1
        err_console.print(message, style="yellow", soft_wrap=True, markup=False, highlight=False)


def _problems_summary(run_dir: Path, problems: list[str], shown: int) -> None:
    """Every problem is in the run folder (start_run wrote it); the terminal gets a count per kind."""
    if not problems:
        return
    kinds = problem_kinds(problems)
    more = f"; {len(problems) - shown} more not shown" if len(problems) > shown else ""
    err_console.print(f"{len(problems)} input problems ({', '.join(f'{n} {k}' for k, n in kinds.items())}{more}); "
                      f"all listed in {run_dir / PROBLEMS_FILE}", soft_wrap=True, highlight=False)


def _build_missing_tasks(s, req: EvalRequest) -> tuple[Resolver, dict[str, str]]:
    """Build the tasks the run needs and the store lacks, one progress line per project: each --project P
    (`coderun eval --project P` on a fresh machine), and each project whose manifest declares a sample's
    id (or is named by it). A failed build is printed and the others go on. Returns the resolver that
    explains the sample ids the selected tasks will not know, and the failed builds (project -> why)."""
    from coderun.cli.tasks import print_project
    from coderun.evaluation.samples import read_sample_ids
    from coderun.manifests.schema import find_manifest, known_manifests
    from coderun.tasks import build_tasks, built_projects
    from coderun.tasks.declared import declared_ids, explaining_resolver, owner

    manifests, broken = known_manifests(s) if req.samples else ([], {})
    for e in broken.values():
        err_console.print(f"skipping a manifest that does not load: {e.message}", style="yellow",
                          markup=False, highlight=False)
    declared = declared_ids(manifests)
    built = built_projects(s)
    todo: dict[str, tuple[Manifest, int]] = {n: (find_manifest(n, s), 0) for n in req.projects if n not in built}
    for key in read_sample_ids(req.samples) if req.samples else []:
        d = owner(declared, manifests, key)
        if d is not None and d.project not in built and (not req.projects or d.project in req.projects):
            m, n = todo.get(d.project, (d.manifest, 0))
            todo[d.project] = (m, n + 1)
    position = {name: i for i, name in enumerate(todo, start=1)}

    def build(m: Manifest) -> None:
        ids = todo[m.name][1]
        why = f", whose manifest knows {ids} of the samples' ids" if ids else ""
        step = f"[{position[m.name]}/{len(todo)}] " if len(todo) > 1 else ""
        err_console.print(f"{step}no tasks stored for {m.name}{why}: building them first "
                          f"(coderun tasks build {m.name})", markup=False, highlight=False)
        with Renderer(err_console) as show:
            reports = build_tasks(m, s, include_weak=req.include_weak, on_event=show).projects
        for report in reports:
            print_project(report, err_console)

    failed: dict[str, str] = {}
    for _ in build_each([m for m, _ in todo.values()], build, "task builds", failed=failed):
        pass
    resolver = explaining_resolver(s, declared, manifests, failed=failed, include_weak=req.include_weak,
                                   projects=req.projects, level=req.level, rigor=req.rigor)
    return resolver, failed


def _execute(store: RunStore, s, jobs: int | None, cluster: str | None = None) -> RunSummary:
    total = len(store.samples())
    done = len([r for r in store.results() if r.verdict != VerdictKind.INFRA])
    if not err_console.is_terminal:  # a log or CI: a line every few samples or seconds, not a silent bar
        with Renderer(err_console) as show:
            tally = Tally("eval", total, Counter({"done before": done} if done else {}), show, unit="samples")
            return execute(store, s, jobs=jobs, cluster=cluster, progress=lambda r: tally.advance(r.verdict.value))
    counts = {"pass": 0, "fail": 0, "infra": 0}
    bar = Progress(TextColumn("[bold]eval[/]"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("[green]{task.fields[ok]} pass[/] [red]{task.fields[bad]} fail[/] "
                              "[yellow]{task.fields[infra]} infra[/]"),
                   TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), console=err_console)
    with bar:
        tid = bar.add_task("eval", total=total, completed=done, ok=0, bad=0, infra=0, rate="")

        def tick(result) -> None:
            counts[result.verdict.value] += 1
            graded = counts["pass"] + counts["fail"]
            rate = f"pass rate {counts['pass'] / graded:.1%}" if graded else ""
            bar.update(tid, advance=1, ok=counts["pass"], bad=counts["fail"], infra=counts["infra"], rate=rate)

        return execute(store, s, jobs=jobs, cluster=cluster, progress=tick)


def _finish(store: RunStore, ks: list[int], under_k: UnderK, summary: RunSummary, as_json: bool,
            wide: bool = False, runs: Path | None = None) -> None:
    from coderun.report.folder import write_reports
    from coderun.report.render import to_rich

    report = write_reports(store, ks, under_k)
    if as_json:
        print_json({"run_dir": str(store.path), "executed": summary.executed, "problems": summary.problems})
        return
    print_table(console, to_rich([report], [], wide=wide), wide)
    console.print(f"run folder: {store.path}", soft_wrap=True)
    console.print(f"report: coderun report {_run_ref(store.path, runs)}", soft_wrap=True)


def _run_ref(run_dir: Path, runs: Path | None) -> str:
    """The run id when the folder is under $CODERUN_HOME/runs (what `coderun report` takes), else the path."""
    if runs is not None and run_dir.resolve().parent == runs.resolve():
        return run_dir.name
    return str(run_dir)
