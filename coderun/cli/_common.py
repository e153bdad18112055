"""What every command module shares: consoles, the error hook, common options."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from coderun.choices import Backend
from coderun.config import Settings, load_settings
from coderun.errors import (
    ERROR_FILE_VARIABLE,
    CoderunError,
    EnvironmentBuildError,
    ProjectNotFound,
    error_record,
)

console = Console()
err_console = Console(stderr=True)

ProjectsDirOption = typer.Option(
    None, "--projects", help="Directory of user manifests, besides the built-in ones (repeatable; "
    "also CODERUN_PROJECTS, a path list).")
JsonOption = typer.Option(False, "--json", help="Machine-readable output.")
REGISTRY_DEFAULT = "default: CODERUN_REGISTRY, else registry in the config file's \\[images]"
RegistryOption = typer.Option(None, "--registry", help="A Docker registry, HOST\\[:PORT]\\[/PATH]: project images "
                              f"are pulled from it by their content tag before they are built ({REGISTRY_DEFAULT}).")
WideOption = typer.Option(False, "--wide", help="Every column in one table, even the empty ones, at its full "
                          "width (lines wider than the terminal wrap; `| less -S` keeps them whole).")


class CoderunGroup(TyperGroup):
    """Root group: turns a CoderunError from any command into its message and exit code."""

    def invoke(self, ctx: typer.Context) -> Any:
        try:
            return super().invoke(ctx)
        except CoderunError as e:
            print_error(e)
            if os.environ.get(ERROR_FILE_VARIABLE):  # a build side by side with others: its parent reads it
                Path(os.environ[ERROR_FILE_VARIABLE]).write_text(json.dumps(error_record(e)), encoding="utf-8")
            raise typer.Exit(e.exit_code) from None  # typer vendors click: only its Exit is caught


def warn_if_unisolated(backend: Backend) -> None:
    """Say how samples will be kept apart on this machine (before a run records it)."""
    from coderun.choices import Isolation
    from coderun.sandbox.project import isolation_of

    say_isolation(*isolation_of(backend, Isolation.AUTO))


def say_isolation(isolation: str, note: str) -> None:
    """A run's first line about its samples' isolation: `none` is a warning."""
    if isolation == "none":
        err_console.print(f"[yellow]isolation: none ({escape(note)}): samples run as your user, with your files and "
                          "network; use it for trusted code or inside a disposable machine (see docs/threat-model.md)"
                          "[/]", soft_wrap=True)
    elif isolation:
        err_console.print(f"isolation: {isolation} ({escape(note)})", soft_wrap=True, highlight=False)


def print_error(e: CoderunError, prefix: str = "") -> None:
    if e.message.startswith(prefix):  # the message names the project already
        prefix = ""
    err_console.print(f"[bold red]error:[/] {prefix}", end="", highlight=False)
    err_console.print(str(e), markup=False, highlight=False)


def print_table(to: Console, renderable: Any, wide: bool = False) -> None:
    """A report's tables: fitted to the terminal, or with `--wide` at their natural width."""
    from coderun.report.terminal import print_wide

    if wide:
        print_wide(to, renderable)
    else:
        to.print(renderable)


def settings(project_dirs: list[Path] | None = None) -> Settings:
    return load_settings(project_dirs)


def with_registry(s: Settings, registry: str | None) -> Settings:
    """`s` with --registry's value (checked) in place of the configured one."""
    value = registry or s.registry
    if not value:
        return replace(s, registry=None)
    from coderun.envs.registry import check_registry  # imports the docker SDK: only with a registry

    return replace(s, registry=check_registry(value))


def project_selection(values: list[str] | None, project_dirs: list[Path] | None) -> tuple[Settings, list[str]]:
    """Settings and project names for `--project` values, names or manifest paths. A path's folder joins
    the user manifest folders, so that every later stage (and a resume) finds the manifest by its name."""
    from coderun.manifests.schema import manifest_path

    paths = {v: p for v in values or [] if (p := manifest_path(v)) is not None}
    s = load_settings([*(project_dirs or []), *dict.fromkeys(p.resolve().parent for p in paths.values())])
    return s, [_manifest_name(v, s) for v in values or []]


def _manifest_name(value: str, s: Settings) -> str:
    """The `name` of the manifest `value` finds (`cerberus` finds `name: Cerberus` by its file name); a name
    no manifest has is kept, for the tasks stored under it."""
    from coderun.manifests.schema import find_manifest

    try:
        return find_manifest(value, s).name
    except ProjectNotFound:
        return value


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=None, default=str) + "\n")


def build_each(manifests: list, build: Callable[[Any], Any], what: str,
               failed: dict[str, str] | None = None) -> Iterator[tuple[Any, Any]]:
    """(manifest, result) for each manifest built by `build`. With several, a failure is printed and the
    others go on; what did build is kept, and the failures are raised together at the end. With `failed`,
    every failure (also a lone one) is printed and recorded there (name -> message), and nothing is
    raised: the caller decides what a failure means."""
    def outcomes() -> Iterator[tuple[Any, Any]]:
        for m in manifests:
            try:
                yield m, build(m)
            except CoderunError as e:
                yield m, e

    yield from each_built(outcomes(), len(manifests), what, failed)


def each_built(outcomes: Iterable[tuple[Any, Any]], total: int, what: str,
               failed: dict[str, str] | None = None) -> Iterator[tuple[Any, Any]]:
    """build_each over (manifest, result or CoderunError) pairs already made, in the order they come (e.g. as
    builds on a cluster finish), out of `total` manifests."""
    keep_going = failed is not None
    failed = {} if failed is None else failed
    for m, result in outcomes:
        if isinstance(result, CoderunError):
            if total == 1 and not keep_going:
                raise result
            print_error(result, prefix=f"{m.name}: ")
            failed[m.name] = result.message
            continue
        yield m, result
    if failed and not keep_going:
        raise EnvironmentBuildError(f"{len(failed)} of {total} {what} failed: {', '.join(failed)}")
