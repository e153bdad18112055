"""`coderun tasks`: build a project's tasks (select, map tests, verify), list them, export them."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from coderun.cli._common import (
    JsonOption,
    ProjectsDirOption,
    build_each,
    console,
    print_error,
    print_json,
    settings,
)
from coderun.errors import EnvironmentBuildError, UsageError
from coderun.manifest import find_manifest, known_manifests
from coderun.report.terminal import table_or_stacked
from coderun.tasks import ProjectTaskReport, TaskBuildReport, load_tasks
from coderun.tasks.build import build_project
from coderun.tasks.store import export_jsonl

app = typer.Typer(no_args_is_help=True, help="Tasks: target functions, their tests, and proof the tests "
                  "can tell right from wrong.")

_LIST_FIELDS = ("task_id", "aliases", "project", "file", "qualname", "name", "level", "tests", "source",
                "status", "mapping", "explicit", "flaky_tests", "test_files", "signature")


@app.command("build")
def build(projects: list[str] = typer.Argument(None, help="Project names or manifest paths."),
          all_projects: bool = typer.Option(False, "--all", help="Every known project: the built-in manifests "
                                            "and those in --projects / CODERUN_PROJECTS."),
          backend: str = typer.Option("local", help="Sandbox for verification: local or docker."),
          include_weak: bool = typer.Option(False, "--include-weak",
                                            help="Keep tasks whose tests do not notice the body missing."),
          projects_dir: list[Path] = ProjectsDirOption, as_json: bool = JsonOption) -> None:
    """Select each project's tasks, map them to the tests that reach them, verify, store. With several
    projects a failed one is reported and the others go on; the exit code says if any failed."""
    if backend not in ("local", "docker"):
        raise UsageError(f"unknown backend {backend!r}; use local or docker")
    if bool(projects) == all_projects:
        raise UsageError("give project names or --all, not both" if projects else "give project names or --all")
    s = settings(projects_dir)
    failed: dict[str, str] = {}
    if all_projects:
        manifests, broken = known_manifests(s)
        for path, e in broken.items():
            print_error(e)
            failed[str(path)] = e.message
    else:
        manifests = [find_manifest(p, s) for p in projects]
    total = len(manifests) + len(failed)
    report = TaskBuildReport()
    build_one = lambda m: build_project(m, s, backend, include_weak, progress=not as_json)  # noqa: E731
    try:
        for _m, p in build_each(manifests, build_one, "task builds", failed=failed if total > 1 else None):
            report.projects.append(p)
            if not as_json:
                print_project(p)
    finally:
        if as_json and (report.projects or total > 1):  # a lone failure is just its error
            print_json(report.model_dump(mode="json"))
    if not as_json and report.projects:
        _print_levels(report)
    if failed:
        raise EnvironmentBuildError(f"{len(failed)} of {total} task builds failed: {', '.join(failed)}")


def print_project(p: ProjectTaskReport, out: Console = console) -> None:
    """What one project's task build found (also printed by `eval` after it builds a project's tasks)."""
    st = p.statuses
    counts = ", ".join(f"{st.get(k, 0)} {k}" for k in ("verified", "weak", "flaky", "broken", "uncovered"))
    out.print(f"[bold]{p.project}[/]: {p.candidates} candidates ({p.explicit} from the manifest, "
                  f"{p.discovered} discovered), {p.covered} covered ({p.mapping}): {counts}; "
                  f"{len(p.flaky_tests)} flaky tests dropped")
    if p.unresolved:
        out.print(f"[yellow]  manifest targets not found: {', '.join(p.unresolved)}[/]")
    if p.mapping_note:
        out.print(f"[yellow]  coverage failed, tests mapped by file name: {p.mapping_note}[/]")


def _print_levels(report: TaskBuildReport) -> None:
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
