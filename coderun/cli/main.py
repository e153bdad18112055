"""Entry point: registers the command groups and nothing else."""

from __future__ import annotations

import functools
import importlib
import signal
import sys

import typer

from coderun import __version__
from coderun.cli._common import CoderunGroup

# Each command's module, in the order help lists them. A run imports only the module of the command it names
# (the help and a mistyped name import all): every command's dependencies (jedi, git, the task build) cost
# each invocation about 0.2 s.
_COMMANDS: dict[str, tuple[str, str]] = {
    "projects": ("coderun.cli.projects", "app"),
    "env": ("coderun.cli.env", "app"),
    "tasks": ("coderun.cli.tasks", "app"),
    "images": ("coderun.cli.images", "app"),
    "eval": ("coderun.cli.eval", "eval_command"),
    "generate": ("coderun.cli.generate", "generate"),
    "prompts": ("coderun.cli.prompts", "prompts"),
    "report": ("coderun.cli.report", "report"),
    "analyze": ("coderun.cli.analyze", "analyze"),
    "ablate": ("coderun.cli.ablate", "ablate"),
    "rank": ("coderun.cli.rank", "rank_command"),
    "serve": ("coderun.cli.serve", "serve_command"),
    "import": ("coderun.cli.importer", "app"),
}


def _version(value: bool) -> None:
    if value:
        typer.echo(f"coderun {__version__}")
        raise typer.Exit()


def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")) -> None:
    """coderun: benchmark code generation inside real projects."""


@functools.cache
def make_app(only: str | None = None) -> typer.Typer:
    """The command line with every command, or with only the one named."""
    app = typer.Typer(
        cls=CoderunGroup, no_args_is_help=True, add_completion=False, pretty_exceptions_show_locals=False,
        help="coderun: benchmark code generation inside real projects.")
    app.callback()(_root)
    for name, (module, attr) in _COMMANDS.items():
        if only in (None, name):
            command = getattr(importlib.import_module(module), attr)
            if isinstance(command, typer.Typer):
                app.add_typer(command, name=name)
            else:
                app.command(name)(command)
    return app


def __getattr__(name: str) -> typer.Typer:
    if name == "app":   # every command: what tests and `python -m coderun --help` see
        return make_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _named(argv: list[str]) -> str | None:
    """The command the arguments name (the first one that is not an option), if it is one."""
    first = next((a for a in argv if not a.startswith("-")), None)
    return first if first in _COMMANDS else None


def _terminate(signum: int, _frame: object) -> None:
    # A SIGTERM (kill, a cluster scheduler) becomes SystemExit, so atexit removes containers and temp dirs.
    raise SystemExit(128 + signum)


def main() -> None:
    signal.signal(signal.SIGTERM, _terminate)
    make_app(_named(sys.argv[1:]))()
