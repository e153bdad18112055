"""`coderun tasks`: build a project's tasks (select, map tests, verify), list, export and prune them."""

from __future__ import annotations

from pathlib import Path

import typer

from coderun.cli._common import JsonOption, ProjectsDirOption, console, print_json, settings
from coderun.errors import UsageError
from coderun.manifest import find_manifest
from coderun.report.terminal import table_or_stacked
from coderun.tasks import TaskBuildReport, build_tasks, load_tasks, prune_tasks
from coderun.tasks.build import default_jobs
from coderun.tasks.store import export_jsonl

app = typer.Typer(no_args_is_help=True, help="Tasks: target functions, their tests, and proof the tests "
                  "can tell right from wrong.")

_LIST_FIELDS = ("task_id", "aliases", "project", "file", "qualname", "name", "level", "tests", "source",
                "status", "mapping", "explicit", "flaky_tests", "test_files", "signature")


@app.command("build")
def build(projects: list[str] = typer.Argument(..., help="Project names or manifest paths."),
          backend: str = typer.Option("local", help="Sandbox for verification: local or docker."),
          include_weak: bool = typer.Option(False, "--include-weak",
                                            help="Keep tasks whose tests do not notice the body missing."),
          jobs: int = typer.Option(None, "-j", "--jobs", help="Tasks verified at once (default: the number of "
                                   "cores)."),
          projects_dir: list[Path] = ProjectsDirOption, as_json: bool = JsonOption) -> None:
    """Select each project's tasks, map them to the tests that reach them, verify, store. An interrupted
    build run again with the same inputs resumes: tasks already decided are not verified again."""
    if backend not in ("local", "docker"):
        raise UsageError(f"unknown backend {backend!r}; use local or docker")
    if jobs is not None and jobs < 1:
        raise UsageError(f"-j must be at least 1, got {jobs}")
    s = settings(projects_dir)
    manifests = [find_manifest(p, s) for p in projects]
    report = build_tasks(manifests, s, backend=backend, include_weak=include_weak, progress=not as_json,
                         jobs=jobs or default_jobs())
    if as_json:
        print_json(report.model_dump(mode="json"))
    else:
        _print_report(report)


MAX_CAPPED_SHOWN = 10


def _print_report(report: TaskBuildReport) -> None:
    for p in report.projects:
        st = p.statuses
        counts = ", ".join(f"{st.get(k, 0)} {k}" for k in ("verified", "weak", "flaky", "broken", "uncovered"))
        console.print(f"[bold]{p.project}[/]: {p.candidates} candidates ({p.explicit} from the manifest, "
                      f"{p.discovered} discovered), {p.covered} covered ({p.mapping}): {counts}; "
                      f"{len(p.flaky_tests)} flaky tests dropped")
        if p.unresolved:
            console.print(f"[yellow]  manifest targets not found: {', '.join(p.unresolved)}[/]")
        if p.mapping_note:
            console.print(f"[yellow]  coverage failed, tests mapped by file name: {p.mapping_note}[/]")
        if p.resumed:
            console.print(f"  {p.resumed} tasks taken from the interrupted build (same inputs), not verified again")
        if p.capped:
            console.print(f"  {len(p.capped)} tasks capped (max_tests_per_task {p.max_tests_per_task}, "
                          f"max_seconds_per_task {p.max_seconds_per_task:g}); slowest mapped tests dropped:")
            for tid, dropped in list(p.capped.items())[:MAX_CAPPED_SHOWN]:
                console.print(f"    {tid}: {len(dropped)} dropped, slowest {dropped[0]}", soft_wrap=True,
                              highlight=False, markup=False)
            if len(p.capped) > MAX_CAPPED_SHOWN:
                console.print(f"    and {len(p.capped) - MAX_CAPPED_SHOWN} more (all in `--json`: capped)")
        for note in p.fallbacks:
            console.print(f"  {note}", style="yellow", soft_wrap=True, markup=False, highlight=False)
    levels = report.levels()
    console.print("benchmark tasks per level: " + ", ".join(f"{k} {v}" for k, v in levels.items())
                  + f" (total {sum(levels.values())})")


@app.command("list")
def list_(project: str = typer.Option(None, "--project", help="Only this project."),
          level: str = typer.Option(None, "--level", help="Only this runnable level."),
          status: str = typer.Option(None, "--status", help="verified, weak, flaky, uncovered, broken or "
                                     "all (default: the benchmark, i.e. verified)."),
          include_weak: bool = typer.Option(False, "--include-weak", help="Count weak tasks in."),
          projects_dir: list[Path] = ProjectsDirOption, as_json: bool = JsonOption) -> None:
    """List stored tasks; with --json one JSON object per line."""
    tasks = load_tasks(settings(projects_dir), project=project, level=level, include_weak=include_weak,
                       status=status)
    if as_json:
        for t in tasks:
            print_json(t.model_dump(mode="json", include=set(_LIST_FIELDS)))
        return
    console.print(table_or_stacked(["task", "level", "status", "tests"],
                                   [[t.task_id, t.level.value, t.status.value, str(len(t.tests))] for t in tasks],
                                   "aliases", [", ".join(t.aliases) for t in tasks], left=(0, 1, 2)))
    console.print(f"{len(tasks)} tasks")


@app.command("export")
def export(output: Path = typer.Option(..., "-o", "--output", help="JSONL file to write."),
           project: str = typer.Option(None, "--project", help="Only this project."),
           status: str = typer.Option(None, "--status", help="As for `list` (default: the benchmark)."),
           include_weak: bool = typer.Option(False, "--include-weak", help="Count weak tasks in."),
           projects_dir: list[Path] = ProjectsDirOption) -> None:
    """Write full task records, one JSON object per line."""
    tasks = load_tasks(settings(projects_dir), project=project, include_weak=include_weak, status=status)
    n = export_jsonl(tasks, output)
    console.print(f"wrote {n} tasks to {output}")


@app.command("prune")
def prune(projects_dir: list[Path] = ProjectsDirOption) -> None:
    """Remove stored tasks of projects whose manifest is no longer known (e.g. a deleted user manifest)."""
    removed = prune_tasks(settings(projects_dir))
    for name, n in removed.items():
        console.print(f"removed {n} tasks of {name} (no manifest named {name!r} is known any more)")
    if not removed:
        console.print("nothing to prune: every stored project has a manifest")
