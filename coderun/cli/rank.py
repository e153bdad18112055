"""`coderun rank RUN`: rank each task's samples of a finished run without the oracle (coderun/rank)."""

from __future__ import annotations

import os
from pathlib import Path

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from coderun.cli._common import console, err_console, settings
from coderun.errors import UsageError
from coderun.evaluation.store import resolve_run_dir
from coderun.rank.pipeline import ModelSpec, RankOutcome, RankRequest, rank
from coderun.rank.records import RankTests
from coderun.rank.summary import caption, counts_line, lift_rows
from coderun.report.terminal import make_table


def rank_command(
    run: str = typer.Argument(..., help="A finished run: its folder, or its id under $CODERUN_HOME/runs."),
    tests: RankTests = typer.Option(RankTests.INPUTS, "--tests", help="What the samples are run on: the task's "
                                    "recorded inputs, tests the model writes, or both."),
    output: Path | None = typer.Option(None, "-o", "--output", help="Also write the ranked samples here "
                                       "(coderun's samples format, with score and cluster)."),
    jobs: int = typer.Option(2, "-j", "--jobs", help="Samples run at once."),
    base_url: str | None = typer.Option(None, "--base-url", help="--tests model|both: the OpenAI-compatible "
                                        "server asked for tests, e.g. http://127.0.0.1:8000/v1 (vLLM)."),
    model: str | None = typer.Option(None, "--model", help="--tests model|both: the model name as the server "
                                     "knows it."),
    api_key_env: str = typer.Option("OPENAI_API_KEY", "--api-key-env", help="Environment variable holding the "
                                    "API key (unset is fine for local servers)."),
    test_requests: int = typer.Option(1, "--test-requests", help="Answers asked of the model per task."),
) -> None:
    """Rank each task's samples by execution agreement (CodeT in project context); print ranked pass@1."""
    s = settings()
    spec = None
    if base_url or model:
        if not (base_url and model):
            raise UsageError("--base-url and --model go together")
        spec = ModelSpec(base_url=base_url, model=model, api_key=os.environ.get(api_key_env),
                         requests=test_requests)
    req = RankRequest(run_dir=resolve_run_dir(run, s), tests=tests, output=output, jobs=jobs, model=spec)
    bar = Progress(TextColumn("[bold]rank[/]"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("{task.fields[note]}"), TimeElapsedColumn(), console=err_console)
    with bar:
        tid = bar.add_task("rank", total=0, note="")
        out = rank(req, s, on_start=lambda n: bar.update(tid, total=n),
                   progress=lambda e: bar.update(tid, advance=1, note=f"{e.task_id} {e.status.value}"))
    _print(out)


def _print(out: RankOutcome) -> None:
    console.print(make_table(*lift_rows(out.summary), title="ranked pass@1 (%)"))
    console.print(caption(out.summary), style="dim")
    if out.summary.counts:
        console.print(counts_line(out.summary), soft_wrap=True)
    console.print(f"executions: {out.executed} run now, {out.cached} from the run store", soft_wrap=True)
    console.print(f"ranking: {out.folder}", soft_wrap=True)
