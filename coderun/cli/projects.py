"""`coderun projects`: list, show, validate and draft project manifests."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import typer
from rich.markup import escape

from coderun.cli._common import JsonOption, ProjectsDirOption, console, err_console, print_json, settings
from coderun.envs.sources import describe_source
from coderun.errors import ManifestError, UsageError
from coderun.manifests.schema import find_manifest, load_manifest, manifest_files
from coderun.report.terminal import table_or_stacked

app = typer.Typer(no_args_is_help=True, help="Project manifests: the repositories a benchmark runs in.")


@app.command("list")
def list_projects(projects_dir: list[Path] = ProjectsDirOption, as_json: bool = JsonOption) -> None:
    """List built-in and user manifests."""
    s = settings(projects_dir)
    rows = []
    for f in manifest_files(s):
        try:
            m = load_manifest(f)
            rows.append({"name": m.name, "python": m.python, "source": describe_source(m), "file": str(f),
                         "tasks": len(m.tasks.targets), "error": None})
        except ManifestError as e:
            rows.append({"name": f.stem, "python": "", "source": "", "file": str(f), "tasks": 0,
                         "error": e.message})
    if as_json:
        print_json(rows)
        return
    folders = list(dict.fromkeys(str(Path(r["file"]).parent) for r in rows))
    console.print(table_or_stacked(["name", "python", "source", "tasks"],
                                   [[r["name"], r["python"], r["source"] or f"[red]invalid: {escape(r['error'])}[/]",
                                     str(r["tasks"])] for r in rows],
                                   "manifest", [escape(Path(r["file"]).name if len(folders) == 1 else r["file"])
                                                for r in rows], left=(0, 1), fold=(2,)))
    if len(folders) == 1:  # the file names above, the folder once
        console.print(f"[dim]manifests in {escape(folders[0])}[/]", soft_wrap=True)


@app.command("show")
def show(project: str = typer.Argument(..., help="Name of a project, or a path to a manifest."),
         projects_dir: list[Path] = ProjectsDirOption, as_json: bool = JsonOption) -> None:
    """Show a manifest with its defaults filled in."""
    m = find_manifest(project, settings(projects_dir))
    data = m.model_dump(mode="json")
    if as_json:
        print_json({**data, "origin": str(m.origin)})
        return
    import yaml

    console.print(f"[dim]# {m.origin}[/]")
    console.print(yaml.safe_dump(data, sort_keys=False), highlight=False, markup=False)


@app.command("validate")
def validate(paths: list[Path] = typer.Argument(None, help="Manifest files (default: every known one)."),
             projects_dir: list[Path] = ProjectsDirOption) -> None:
    """Validate manifests; exit code 2 when any is invalid."""
    files = list(paths) if paths else manifest_files(settings(projects_dir))
    bad = 0
    for f in files:
        try:
            m = load_manifest(f)
            console.print(f"[green]ok[/]    {m.name:<20} {f}")
        except ManifestError as e:
            bad += 1
            err_console.print(f"[red]error[/] {e}", highlight=False)
    if bad:
        raise typer.Exit(2)


@app.command("add")
def add(source: str = typer.Argument(..., help='A git URL (https, ssh, file://), a local directory, or a '
                                    'PyPI package pinned as "pkg==version".'),
        output: Path | None = typer.Option(None, "-o", "--output", help="Write the draft to this file "
                                           "(default: print it)."),
        name: str | None = typer.Option(None, "--name", help="Project name (default: from the project's "
                                        "metadata)."),
        force: bool = typer.Option(False, "--force", help="Overwrite an existing output file."),
        rev: str | None = typer.Option(None, "--rev", help="For a git source: the tag, branch or commit to "
                                       "read (default: HEAD); a release tag is tried with and without 'v'."),
        as_of: str | None = typer.Option(None, "--as-of", help="The project's date (YYYY-MM-DD), when the "
                                         "evidence the draft finds is wrong: it chooses the Python and the "
                                         "releases of the dependencies."),
        python: str | None = typer.Option(None, "--python", help="The Python to run the tests with (3.X), "
                                          "instead of the one the draft would choose."),
        undocumented: bool = typer.Option(False, "--undocumented", help="Take functions without a docstring "
                                          "as task candidates too (their prompt has the signature and context "
                                          "only); off by default, as in CoderEval."),
        ) -> None:
    """Draft a manifest for a repository: python version, dependencies and tests read from its files."""
    from coderun.draft.make import DraftOptions, make_draft

    if output is not None and output.exists() and not force:
        raise UsageError(f"{output} already exists", hint="pass --force to overwrite it, or choose another -o")
    options = DraftOptions(as_of=_date_option(as_of), python=_python_option(python), undocumented=undocumented)
    with err_console.status(f"reading {source}"):
        draft = make_draft(source, settings(), name=name, rev=rev, options=options)
    for w in draft.warnings:
        err_console.print(f"[yellow]warning:[/] {w}", highlight=False)
    if output is None:
        typer.echo(draft.text, nl=False)
        return
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(draft.text, encoding="utf-8")
    err_console.print(f"wrote {output}; next: coderun env build {output}", highlight=False)


def _date_option(value: str | None) -> dt.date | None:
    if value is None:
        return None
    try:
        day = dt.date.fromisoformat(value)
    except ValueError:
        raise UsageError(f"--as-of {value}: not a date", hint="give it as YYYY-MM-DD, e.g. --as-of 2021-06-30") from None
    if day > dt.date.today():
        raise UsageError(f"--as-of {value} is in the future", hint="give the day the project's code is from")
    return day


def _python_option(value: str | None) -> str | None:
    if value is not None and not re.fullmatch(r"3\.\d{1,2}", value):
        raise UsageError(f"--python {value}: not a Python 3 version", hint="give it as 3.X, e.g. --python 3.9")
    return value
