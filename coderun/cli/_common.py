"""What every command module shares: consoles, the error hook, common options."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
import typer
from rich.console import Console
from typer.core import TyperGroup

from coderun.config import Settings, load_settings
from coderun.errors import CoderunError

console = Console()
err_console = Console(stderr=True)

ProjectsDirOption = typer.Option(
    None, "--projects", help="Directory of user manifests, besides the built-in ones (repeatable; "
    "also CODERUN_PROJECTS, a path list).")
JsonOption = typer.Option(False, "--json", help="Machine-readable output.")


class CoderunGroup(TyperGroup):
    """Root group: turns a CoderunError from any command into its message and exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except CoderunError as e:
            _print_error(e)
            raise typer.Exit(e.exit_code) from None  # typer vendors click: only its Exit is caught


def _print_error(e: CoderunError) -> None:
    err_console.print("[bold red]error:[/] ", end="")
    err_console.print(str(e), markup=False, highlight=False)


def settings(project_dirs: list[Path] | None = None) -> Settings:
    return load_settings(project_dirs)


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=None, default=str) + "\n")
