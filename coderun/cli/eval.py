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
    WideOption,
    console,
    err_console,
    print_json,
    print_table,
    settings,
)
from coderun.errors import UsageError
from coderun.records import Level, VerdictKind
from coderun.runner.evaluate import EvalRequest, RunSummary, execute, start_run
from coderun.runner.metrics import UnderK, parse_ks
from coderun.runner.store import RunStore, resolve_run_dir
from coderun.runner.workers import EXECUTORS


def default_backend() -> str:
    """docker when an engine answers, else local (the embedded default)."""
    try:
        import docker

        docker.from_env(timeout=3).ping()
        return "docker"
    except Exception:  # no SDK config, no socket, no engine: all mean "not available"
        return "local"


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
    s = settings(projects_dir)
    ks = parse_ks(k)
    if resume:
        store = RunStore.open(resolve_run_dir(resume, s))
        err_console.print(f"resuming {store.path}: {len(store.results())} of {len(store.samples())} "
                          "samples already have a verdict")
    else:
        store = _start(s, samples, ground_truth, blank, project, level, backend, jobs, include_weak, run_dir,
                       label, executor)
    backend_used = str(store.info().config.get("backend"))
    if backend_used == "local":
        err_console.print("[yellow]local backend: samples run as your user, without isolation; use it for "
                          "trusted code or inside a disposable machine (see README, threat model)[/]")
    summary = _execute(store, s, jobs if resume else None)
    for note in summary.problems:  # samples that fell back from the workers executor to the naive one
        err_console.print(note, style="yellow", soft_wrap=True, markup=False, highlight=False)
    _finish(store, ks, under_k, summary, as_json, wide, s.runs)


def _start(s, samples, ground_truth, blank, project, level, backend, jobs, include_weak, run_dir, label,
           executor="workers"):
    from coderun.tasks import load_tasks

    lv = Level.parse(level) if level else None
    names = list(project or [])
    tasks = []
    for name in names or [None]:
        tasks += load_tasks(s, project=name, level=lv, include_weak=include_weak)
    if names and not tasks:
        tasks = _build_missing_tasks(s, names, lv, include_weak)
    req = EvalRequest(samples=samples, ground_truth=ground_truth, blank=blank, projects=tuple(names), level=lv,
                      backend=backend or default_backend(), jobs=jobs, include_weak=include_weak,
                      run_dir=run_dir, label=label, executor=executor)
    if req.backend not in ("local", "docker"):
        raise UsageError(f"unknown backend {req.backend!r}; use local or docker")
    if req.executor not in EXECUTORS:
        raise UsageError(f"unknown executor {req.executor!r}; use {' or '.join(EXECUTORS)}")
    shown: list[str] = []
    store, summary = start_run(req, s, tasks, on_problem=lambda m: _problem(m, shown))
    _problems_summary(store.path, summary.problems, len(shown))
    if summary.skipped_samples:
        err_console.print(f"{summary.skipped_samples} samples are for tasks outside the selection and were "
                          "left out")
    console.print(f"run folder: {store.path}", soft_wrap=True)
    return store


MAX_PROBLEMS_SHOWN = 20


def _problem(message: str, shown: list[str]) -> None:
    # One line per problem, never wrapped: people grep these for the line numbers.
    if len(shown) < MAX_PROBLEMS_SHOWN:
        shown.append(message)
        err_console.print(message, style="yellow", soft_wrap=True, markup=False, highlight=False)


def _problems_summary(run_dir: Path, problems: list[str], shown: int) -> None:
    """Every problem goes to the run folder; the terminal gets the first few and a count per kind."""
    if not problems:
        return
    (run_dir / "problems.txt").write_text("\n".join(problems) + "\n")
    kinds = Counter(p.split(": ", 2)[1] if p.count(": ") >= 2 else "other" for p in problems)
    more = f"; {len(problems) - shown} more not shown" if len(problems) > shown else ""
    err_console.print(f"{len(problems)} input problems ({', '.join(f'{n} {k}' for k, n in kinds.items())}{more}); "
                      f"all listed in {run_dir / 'problems.txt'}", soft_wrap=True, highlight=False)


def _build_missing_tasks(s, names, lv, include_weak):
    """`coderun eval --project P` on a fresh machine: build P's environment and tasks first."""
    from coderun.manifest import find_manifest
    from coderun.tasks import build_tasks, load_tasks

    for name in names:
        if not load_tasks(s, project=name, status="all"):
            err_console.print(f"no tasks stored for {name}: building them first (coderun tasks build {name})")
            build_tasks(find_manifest(name, s), s, include_weak=include_weak)
    return [t for n in names for t in load_tasks(s, project=n, level=lv, include_weak=include_weak)]


def _execute(store: RunStore, s, jobs: int | None) -> RunSummary:
    total = len(store.samples())
    done = len([r for r in store.results() if r.verdict != VerdictKind.INFRA])
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

        return execute(store, s, jobs=jobs, progress=tick)


def _finish(store: RunStore, ks: list[int], under_k: UnderK, summary: RunSummary, as_json: bool,
            wide: bool = False, runs: Path | None = None) -> None:
    from coderun.report.aggregate import build_report
    from coderun.report.render import to_json, to_markdown, to_rich

    report = build_report(store, ks, under_k)
    (store.path / "report.json").write_text(to_json([report], []))
    (store.path / "report.md").write_text(to_markdown([report], []))
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
