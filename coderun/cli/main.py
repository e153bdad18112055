"""Entry point: registers the command groups and nothing else."""

from __future__ import annotations

import signal

import typer

from coderun import __version__
from coderun.cli import analyze, env, images, projects
from coderun.cli._common import CoderunGroup
from coderun.cli.ablate import ablate
from coderun.cli.eval import eval_command
from coderun.cli.generate import generate
from coderun.cli.importer import app as import_app
from coderun.cli.prompts import prompts
from coderun.cli.rank import rank_command
from coderun.cli.report import report
from coderun.cli.serve import serve_command
from coderun.cli.tasks import app as tasks_app

app = typer.Typer(
    cls=CoderunGroup, no_args_is_help=True, add_completion=False, pretty_exceptions_show_locals=False,
    help="coderun: benchmark code generation inside real projects.")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"coderun {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")) -> None:
    """coderun: benchmark code generation inside real projects."""


app.add_typer(projects.app, name="projects")
app.add_typer(env.app, name="env")
app.add_typer(tasks_app, name="tasks")
app.add_typer(images.app, name="images")
app.command("eval")(eval_command)
app.command("generate")(generate)
app.command("prompts")(prompts)
app.command("report")(report)
app.command("analyze")(analyze.analyze)
app.command("ablate")(ablate)
app.command("rank")(rank_command)
app.command("serve")(serve_command)
app.add_typer(import_app, name="import")


def _terminate(signum: int, _frame: object) -> None:
    # A SIGTERM (kill, a cluster scheduler) becomes SystemExit, so atexit removes containers and temp dirs.
    raise SystemExit(128 + signum)


def main() -> None:
    signal.signal(signal.SIGTERM, _terminate)
    app()
