"""`coderun env`: build the environment a project's tests run in, and record its baseline."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from coderun.cli._common import (
    JsonOption,
    ProjectsDirOption,
    build_each,
    console,
    err_console,
    print_json,
    settings,
)
from coderun.config import Settings
from coderun.envs.local import build_local_env, load_baseline
from coderun.errors import UsageError
from coderun.manifests.schema import Manifest, find_manifest

app = typer.Typer(no_args_is_help=True, help="Per-project environments (venv or Docker image).")


@app.command("build")
def build(projects: list[str] = typer.Argument(..., help="Project names or manifest paths."),
          backend: str = typer.Option("local", help="local (a venv) or docker (an image)."),
          force: bool = typer.Option(False, "--force", help="Rebuild even if an environment exists."),
          projects_dir: list[Path] = ProjectsDirOption, as_json: bool = JsonOption) -> None:
    """Build each project's environment and run its test suite once to record the baseline."""
    s = settings(projects_dir)
    if backend not in ("local", "docker"):
        raise UsageError(f"unknown backend {backend!r}; use local or docker")
    manifests = [find_manifest(p, s) for p in projects]
    out = []
    # Results are printed as each project finishes; JSON once at the end (also when some failed).
    try:
        for m, row in build_each(manifests, lambda m: _build_one(m, s, backend, force), "environments"):
            out.append(row)
            if not as_json:
                console.print(f"[bold]{m.name}[/] ({backend}, python {row['python']}): "
                              f"{row['passed']} passed, {row['failed']} failed, {row['error']} errors, "
                              f"{row['skipped']} skipped, {row['ignored']} ignored  → {row['location']}")
    finally:
        if as_json and (out or len(manifests) > 1):  # a lone failure is just its error
            print_json(out)


def _build_one(m: Manifest, s: Settings, backend: str, force: bool) -> dict:
    if backend == "docker":
        from coderun.envs.docker import build_project_image

        image = build_project_image(m, s, force=force)
        baseline, where = image.baseline, image.tag
    else:
        env = build_local_env(m, s, force=force, warn=lambda msg: err_console.print(f"[yellow]{msg}[/]"))
        baseline, where = load_baseline(env), str(env.path)
        meta = json.loads((env.path / "env.json").read_text())
    row = {"project": m.name, "backend": backend, "location": where, "commit": baseline.commit,
           "python": baseline.python, **baseline.counts(), "test_seconds": baseline.duration}
    if backend == "local":
        row["build_seconds"] = meta["build_seconds"]
    return row
