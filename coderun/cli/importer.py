"""`coderun import ...`: other harnesses' released results as coderun runs."""

from __future__ import annotations

from pathlib import Path

import typer

from coderun.cli._common import err_console, settings
from coderun.cli.render import Renderer
from coderun.evaluation.store import new_run_id
from coderun.events import silent
from coderun.importers.codereval import import_results

app = typer.Typer(no_args_is_help=True, help="Import other harnesses' results as runs `coderun report` reads.")


@app.command("codereval")
def codereval(
    results: Path = typer.Option(..., "--results", help="CoderEval results JSON lines "
                                 "(e.g. results-CodeGen-raw.jsonl)."),
    dataset: Path | None = typer.Option(None, "--dataset", help="CoderEval4Python.json, for the oracle "
                                        "context behind Acc@k (without it Acc@k is unavailable)."),
    run_dir: Path | None = typer.Option(None, "--run-dir", help="Run folder to create (default: "
                                        "$CODERUN_HOME/runs/<run id>)."),
) -> None:
    """Turn CoderEval's released results into a run, keeping CoderEval's own verdicts (marked imported)."""
    target = run_dir or settings().runs / new_run_id(f"codereval-{results.stem}")
    # A bar on a terminal; in a log, no lines (the import takes a moment).
    with Renderer(err_console) as show, \
            import_results(results, target, dataset, on_event=show if show.terminal else silent) as store:
        counts = store.counts()
    err_console.print(f"imported {counts['samples']} samples of {counts['tasks']} tasks (CoderEval's verdicts)")
    typer.echo(str(target))
