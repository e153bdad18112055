"""`coderun eval`: evaluate samples in their projects and print the per-level report."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from coderun.cli._common import (
    JsonOption,
    ProjectsDirOption,
    RegistryOption,
    WideOption,
    console,
    err_console,
    print_error,
    print_json,
    print_table,
    project_selection,
    say_isolation,
    warn_if_unisolated,
    with_registry,
)
from coderun.cli.render import Renderer
from coderun.evaluation.evaluate import EvalRequest, RunSummary
from coderun.evaluation.folder import PROBLEMS_FILE, problem_kind, problem_kinds
from coderun.evaluation.session import (
    BuildFailed,
    BuildingTasks,
    EvalSession,
    Event,
    Graded,
    InputProblem,
    RunReady,
    TasksBuilt,
)
from coderun.evaluation.store import Result, RunStore
from coderun.parallel import Tally
from coderun.records import Level
from coderun.report.metrics import UnderK, parse_ks
from coderun.sandbox.project import default_backend


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
    with EvalView() as view:
        session = EvalSession(s, view)
        if resume:
            store = session.resume(resume)
        else:
            store = session.start(EvalRequest(
                samples=samples, ground_truth=ground_truth, blank=blank, projects=tuple(project or ()),
                level=Level.parse(level) if level else None, backend=backend or default_backend(), jobs=jobs,
                include_weak=include_weak, run_dir=run_dir, label=label, executor=executor, cluster=cluster,
                rigor=rigor, isolation=isolation))
    with EvalView.progress_of(view.ready) as view:
        session.on_event = view
        summary = session.execute(store, jobs=jobs if resume else None, cluster=cluster)
    for note in summary.problems:  # samples that fell back from the workers executor to the naive one
        err_console.print(note, style="yellow", soft_wrap=True, markup=False, highlight=False)
    _finish(store, ks, under_k, summary, as_json, wide, s.runs)


MAX_PROBLEMS_SHOWN = 10  # of each kind: a few rare ones stay visible among many unknown ids


class EvalView:
    """Renders an EvalSession's events on stderr (stdout is the report's, or --json's): the run's own here,
    the library's (messages, task builds' steps and counts) by the CLI's Renderer."""

    def __init__(self) -> None:
        self.shown: Counter[str] = Counter()
        self.ready: RunReady | None = None
        self.tick: Callable[[Result], None] = lambda _r: None
        self.renderer = Renderer(err_console)

    def __enter__(self) -> EvalView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.renderer.close()

    def __call__(self, event: Event) -> None:
        match event:
            case BuildingTasks(name, position, of, ids):
                why = f", whose manifest knows {ids} of the samples' ids" if ids else ""
                step = f"[{position}/{of}] " if of > 1 else ""
                err_console.print(f"{step}no tasks stored for {name}{why}: building them first "
                                  f"(coderun tasks build {name})", markup=False, highlight=False)
            case TasksBuilt(report):
                from coderun.cli.tasks import print_project  # with the build: a warm run needs neither

                self._restart_renderer()  # its bar and last lines end before the build's summary
                print_project(report, err_console)
            case BuildFailed(name, error):
                self._restart_renderer()
                print_error(error, prefix=f"{name}: ")
            case InputProblem(message):
                # One line per problem, never wrapped: people grep these for the line numbers.
                if self.shown[problem_kind(message)] < MAX_PROBLEMS_SHOWN:
                    self.shown[problem_kind(message)] += 1
                    err_console.print(message, style="yellow", soft_wrap=True, markup=False, highlight=False)
            case RunReady():
                self._ready(event)
            case Graded(result):
                self.tick(result)
            case _:
                self.renderer(event)

    def _restart_renderer(self) -> None:
        self.renderer.close()
        self.renderer = Renderer(err_console)

    def _ready(self, r: RunReady) -> None:
        self.ready = r
        if not r.resumed:
            self._problems_summary(r.path, list(r.problems))
            if r.skipped:
                err_console.print(f"{r.skipped} samples are for tasks outside the selection and were left out")
            err_console.print(f"run folder: {r.path}", soft_wrap=True)
        if r.isolation:
            say_isolation(r.isolation, r.isolation_note)
        else:  # a run started before coderun recorded its isolation
            warn_if_unisolated(r.backend)

    def _problems_summary(self, run_dir: Path, problems: list[str]) -> None:
        """Every problem is in the run folder (the run wrote it); the terminal gets a count per kind."""
        if not problems:
            return
        kinds, shown = problem_kinds(problems), self.shown.total()
        more = f"; {len(problems) - shown} more not shown" if len(problems) > shown else ""
        err_console.print(f"{len(problems)} input problems ({', '.join(f'{n} {k}' for k, n in kinds.items())}"
                          f"{more}); all listed in {run_dir / PROBLEMS_FILE}", soft_wrap=True, highlight=False)

    @classmethod
    @contextmanager
    def progress_of(cls, ready: RunReady | None) -> Iterator[EvalView]:
        """A view for the evaluation: graded samples as a bar on a terminal; in a log or CI, a line every few
        samples or seconds."""
        total, done = (ready.total, ready.done) if ready else (0, 0)
        with cls() as view:
            view.ready = ready
            if not err_console.is_terminal:
                tally = Tally("eval", total, Counter({"done before": done} if done else {}), view.renderer,
                              unit="samples")
                view.tick = lambda r: tally.advance(r.verdict.value)
                yield view
                return
            counts = {"pass": 0, "fail": 0, "infra": 0}
            bar = Progress(TextColumn("[bold]eval[/]"), BarColumn(), MofNCompleteColumn(),
                           TextColumn("[green]{task.fields[ok]} pass[/] [red]{task.fields[bad]} fail[/] "
                                      "[yellow]{task.fields[infra]} infra[/]"),
                           TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), console=err_console)
            with bar:
                tid = bar.add_task("eval", total=total, completed=done, ok=0, bad=0, infra=0, rate="")

                def tick(result: Result) -> None:
                    counts[result.verdict.value] += 1
                    graded = counts["pass"] + counts["fail"]
                    rate = f"pass rate {counts['pass'] / graded:.1%}" if graded else ""
                    bar.update(tid, advance=1, ok=counts["pass"], bad=counts["fail"], infra=counts["infra"],
                               rate=rate)

                view.tick = tick
                yield view


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
