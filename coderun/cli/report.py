"""`coderun report RUN...`: pass@k, Acc@k and failure taxonomy of one or more runs."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer

from coderun.cli._common import WideOption, console, err_console, print_table, settings
from coderun.errors import UsageError
from coderun.evaluation.store import RunStore, resolve_run_dir
from coderun.report import build_report, compare
from coderun.report.metrics import UnderK, parse_ks
from coderun.report.render import per_sample_json, to_json, to_markdown, to_rich


class Format(str, Enum):
    TABLE = "table"
    MD = "md"
    JSON = "json"
    HTML = "html"


def report(
    runs: list[str] = typer.Argument(..., help="Run folders, or run ids under $CODERUN_HOME/runs. With "
                                     "several, the first is the baseline the others are compared with."),
    fmt: Format = typer.Option(Format.TABLE, "--format", "-f", help="table (terminal), md, json or html."),
    k: str = typer.Option("1,5,10", "-k", help="Comma-separated k for pass@k and Acc@k."),
    under_k: UnderK = typer.Option(UnderK.EXCLUDE, "--under-k", help="Tasks with fewer than k samples: "
                                   "exclude them (default), count them CoderEval's way (solved when any "
                                   "sample passed), or pad missing samples as failures up to the largest k."),
    per_sample: bool = typer.Option(False, "--per-sample", help="One JSON object per sample (with --format json)."),
    output: Path | None = typer.Option(None, "-o", "--output", help="Write to this file instead of stdout."),
    wide: bool = WideOption,
) -> None:
    """Report pass@k per level, standalone vs non-standalone, Acc@k and failure classes."""
    ks = parse_ks(k)
    if per_sample and fmt is not Format.JSON:
        raise UsageError("--per-sample needs --format json")
    s = settings()
    reports = []
    for run in runs:
        with RunStore.open(resolve_run_dir(run, s)) as store:
            reports.append(build_report(store, ks, under_k))
    comparisons = [compare(reports[0], other) for other in reports[1:]]
    if per_sample:
        text = per_sample_json(reports)
    elif fmt is Format.JSON:
        text = to_json(reports, comparisons) + "\n"
    elif fmt is Format.MD:
        text = to_markdown(reports, comparisons)
    elif fmt is Format.HTML:
        from coderun.report.html import to_html  # matplotlib: imported only when drawing

        text = to_html(reports, comparisons, output)
    else:
        if output is None:
            print_table(console, to_rich(reports, comparisons, wide=wide), wide)
            return
        with output.open("w", encoding="utf-8") as fh:
            from rich.console import Console

            print_table(Console(file=fh, width=160), to_rich(reports, comparisons, wide=wide), wide)
        err_console.print(f"wrote {output}")
        return
    if output is None:
        typer.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
        err_console.print(f"wrote {output}")
