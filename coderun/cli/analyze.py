"""`coderun analyze PROJECT`: runnable level and contexts of every function of a project."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from coderun.cli._common import JsonOption, ProjectsDirOption, console, err_console, print_json, settings
from coderun.envs.local import find_local_env
from coderun.envs.sources import checkout
from coderun.errors import UsageError
from coderun.manifests.schema import find_manifest
from coderun.report.terminal import table_or_stacked

if TYPE_CHECKING:
    from coderun.analyzers import FunctionInfo, ProjectAnalysis


def analyze(project: str = typer.Argument(..., help="Project name or manifest path."),
            function: str | None = typer.Option(None, "--function", "-f", help="Only this function: its "
                                                "qualname (Class.method) or path/to/file.py::qualname."),
            no_jedi: bool = typer.Option(False, "--no-jedi", help="Syntax only (faster, fewer names placed)."),
            projects_dir: list[Path] = ProjectsDirOption, as_json: bool = JsonOption) -> None:
    """Compute each function's runnable level and oracle/all context (cached per source commit)."""
    s = settings(projects_dir)
    manifest = find_manifest(project, s)
    co = checkout(manifest, s)
    env = find_local_env(manifest, s)
    python = env.python if env is not None and Path(env.python).exists() else None
    result = _run(co, s, python, not no_jedi, manifest.import_root)
    functions = _select(result, function)
    if as_json:
        for f in functions:
            print_json(f.model_dump(mode="json"))
        return
    _table(manifest.name, result, functions, python)


def _run(co, s, python: Path | None, use_jedi: bool, import_root: str) -> ProjectAnalysis:
    with Progress(TextColumn("analyzing [bold]{task.fields[file]}"), BarColumn(), MofNCompleteColumn(),
                  console=err_console, transient=True) as bar:
        task = bar.add_task("analyze", total=None, file="")

        def progress(file: str, done: int, total: int) -> None:
            bar.update(task, completed=done, total=total, file=file)

        from coderun.analyzers import analyze_cached  # tree-sitter and jedi: only for this command

        return analyze_cached(co, s, python=python, use_jedi=use_jedi, import_root=import_root,
                              progress=progress)


def _select(result: ProjectAnalysis, function: str | None) -> list[FunctionInfo]:
    if function is None:
        return result.functions
    file, sep, qual = function.rpartition("::")
    found = [f for f in result.functions if f.qualname == (qual if sep else function) and (not sep or f.file == file)]
    if not found:
        near = sorted({f.key for f in result.functions if f.name == (qual or function).rsplit(".", 1)[-1]})[:5]
        raise UsageError(f"no function {function!r} in the project",
                         hint=f"did you mean: {', '.join(near)}" if near else
                         "give Class.method or path/to/file.py::Class.method")
    return found


def _table(name: str, result: ProjectAnalysis, functions: list[FunctionInfo], python: Path | None) -> None:
    rows: list[tuple[list[str], str]] = []
    for f in functions:
        deps = ", ".join(f"{r.name} [dim]({r.kind.value})[/]" for r in f.references if r.kind.value != "builtin")
        rows.append(([escape(f.key), str(f.lineno), f.level.value], deps or "[dim]-[/]"))
    console.print(table_or_stacked(["function", "line", "level"], [r for r, _ in rows],
                                   "depends on (beyond builtins)", [d for _, d in rows],
                                   title=f"{name}: {len(functions)} functions", left=(0, 2),
                                   label="depends on"))
    counts: dict[str, int] = {}
    for f in functions:
        counts[f.level.value] = counts.get(f.level.value, 0) + 1
    console.print("  ".join(f"{k}: {v}" for k, v in counts.items()))
    console.print(f"[dim]python: {result.python} ({'project environment' if python else 'no environment built'})"
                  f"; jedi: {'on' if result.jedi else 'off'}[/]")
    for sk in result.skipped:
        err_console.print(f"[yellow]skipped {sk.file}: {sk.reason}[/]")
