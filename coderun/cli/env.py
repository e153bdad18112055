"""`coderun env`: build the environment a project's tests run in, and record its baseline."""

from __future__ import annotations

from pathlib import Path

import typer

from coderun.choices import Backend
from coderun.cli._common import (
    JsonOption,
    ProjectsDirOption,
    build_each,
    console,
    err_console,
    print_json,
    settings,
)
from coderun.cli.render import Renderer
from coderun.config import Settings
from coderun.manifests.schema import Manifest, find_manifest
from coderun.sandbox.project import build_environment

app = typer.Typer(no_args_is_help=True, help="Per-project environments (venv or Docker image).")


@app.command("build")
def build(projects: list[str] = typer.Argument(..., help="Project names or manifest paths."),
          backend: str = typer.Option("local", help="local (a venv) or docker (an image)."),
          force: bool = typer.Option(False, "--force", help="Rebuild even if an environment exists."),
          projects_dir: list[Path] = ProjectsDirOption, as_json: bool = JsonOption) -> None:
    """Build each project's environment and run its test suite once to record the baseline."""
    s = settings(projects_dir)
    chosen = Backend.parse(backend)
    manifests = [find_manifest(p, s) for p in projects]
    out = []
    # Results are printed as each project finishes; JSON once at the end (also when some failed).
    try:
        for m, row in build_each(manifests, lambda m: _build_one(m, s, chosen, force), "environments"):
            out.append(row)
            if not as_json:
                console.print(f"[bold]{m.name}[/] ({backend}, python {row['python']}): "
                              f"{row['passed']} passed, {row['failed']} failed, {row['error']} errors, "
                              f"{row['skipped']} skipped, {row['ignored']} ignored"
                              + (f", {row['timed_out']} over the per-test limit" if row["timed_out"] else "")
                              + f"  → {row['location']}")
    finally:
        if as_json and (out or len(manifests) > 1):  # a lone failure is just its error
            print_json(out)


def _build_one(m: Manifest, s: Settings, backend: Backend, force: bool) -> dict:
    with Renderer(err_console) as show:
        built = build_environment(m, s, backend, force=force, on_event=show)
    baseline = built.baseline
    row = {"project": m.name, "backend": backend.value, "location": built.location, "commit": baseline.commit,
           "python": baseline.python, **baseline.counts(), "test_seconds": baseline.duration}
    if built.build_seconds is not None:
        row["build_seconds"] = built.build_seconds
    return row
