"""`coderun ablate`: generate and evaluate several context variants, print one comparison."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import typer
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from coderun.choices import Backend
from coderun.cli._common import (
    JsonOption,
    ProjectsDirOption,
    console,
    err_console,
    print_json,
    settings,
    warn_if_unisolated,
)
from coderun.cli.render import Renderer
from coderun.errors import UsageError
from coderun.generate import Endpoint, GenerationConfig, RetryPolicy, get_provider
from coderun.records import Level
from coderun.report.metrics import UnderK, parse_ks
from coderun.report.terminal import make_table
from coderun.sandbox.project import default_backend
from coderun.studies.ablation import (
    NOTE,
    AblationComparison,
    AblationRequest,
    ArmOutcome,
    arms_from_samples,
    arms_from_variants,
    check_plan,
    default_out_dir,
    delta_rows,
    headers,
    run_ablation,
    value_rows,
)


def _split(text: str | None) -> list[str]:
    return [p.strip() for p in (text or "").split(",") if p.strip()]


def ablate(
    variants: str = typer.Option(None, "--variants", help="Comma-separated context variants (none, oracle, "
                                 "class, file, all; compose with +); the first is the baseline."),
    docstring: str = typer.Option("original", "--docstring", help="original, human, or both (original,human)."),
    samples: list[str] = typer.Option(None, "--samples", help="VARIANT=FILE: evaluate samples produced "
                                      "elsewhere instead of generating (repeatable; the first is the baseline)."),
    model: str = typer.Option(None, "--model", help="Model name as the server knows it."),
    base_url: str = typer.Option(None, "--base-url", help="OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1."),
    n: int = typer.Option(10, "-n", help="Samples per prompt."),
    temperature: float = typer.Option(0.6, "--temperature"),
    top_p: float = typer.Option(0.95, "--top-p"),
    max_tokens: int = typer.Option(512, "--max-tokens", help="Tokens to generate per sample."),
    concurrency: int = typer.Option(4, "--concurrency", help="Requests in flight at once."),
    endpoint: Endpoint = typer.Option(Endpoint.CHAT, "--endpoint", help="chat or completion."),
    api_key_env: str = typer.Option("OPENAI_API_KEY", "--api-key-env", help="Variable holding the API key."),
    timeout: float = typer.Option(120.0, "--timeout", help="Seconds per request before it is retried."),
    project: list[str] = typer.Option(None, "--project", "-p", help="Only these projects (repeatable)."),
    level: str = typer.Option(None, "--level", "-l", help="Only tasks of this runnable level."),
    backend: str = typer.Option(None, "--backend", "-b", help="docker or local (default: docker when an "
                                "engine answers, else local)."),
    jobs: int = typer.Option(os.cpu_count() or 1, "--jobs", "-j", help="Parallel evaluation workers."),
    k: str = typer.Option("1,5,10", "-k", help="Comma-separated k for pass@k and Acc@k."),
    under_k: UnderK = typer.Option(UnderK.EXCLUDE, "--under-k", help="Tasks with fewer than k samples."),
    out_dir: Path = typer.Option(None, "--out-dir", help="Folder for prompts, samples, runs and the comparison "
                                 "(default: a new one under $CODERUN_HOME/ablations); re-use it to resume."),
    projects_dir: list[Path] = ProjectsDirOption,
    as_json: bool = JsonOption,
) -> None:
    """Run every variant through generation and evaluation and compare them with the first."""
    if bool(variants) == bool(samples):
        raise UsageError("give either --variants (generate with --model/--base-url) or --samples VARIANT=FILE")
    arms = arms_from_samples(samples) if samples else arms_from_variants(_split(variants), _split(docstring))
    if variants and (not model or not base_url):
        raise UsageError("--variants generates samples: give --model and --base-url (or use --samples)")
    chosen = Backend.parse(backend) if backend else None
    s = settings(projects_dir)
    gen = GenerationConfig(model=model, n=n, temperature=temperature, top_p=top_p, max_tokens=max_tokens,
                           endpoint=endpoint, concurrency=concurrency) if variants else None
    retry = RetryPolicy(timeout=timeout)
    req = AblationRequest(
        arms=tuple(arms), out_dir=(out_dir or default_out_dir(s)).resolve(), generation=gen,
        provider=(lambda: get_provider("openai", base_url=base_url, api_key=os.environ.get(api_key_env),
                                       retry=retry)) if variants else None,
        projects=tuple(project or ()), level=Level.parse(level) if level else None,
        backend=chosen or default_backend(), jobs=max(1, jobs), ks=tuple(parse_ks(k)), under_k=under_k)
    resuming = check_plan(req.out_dir, req.plan())
    err_console.print(f"ablation folder: {req.out_dir}" + (" (resuming)" if resuming else ""))
    warn_if_unisolated(req.backend)
    with Renderer(err_console) as show:
        outcome = run_ablation(req, s, on_event=show)
    _print_outcomes(*outcome, req.out_dir, as_json)


def _print_outcomes(comparison: AblationComparison, outcomes: list[ArmOutcome], out_dir: Path,
                    as_json: bool) -> None:
    for o in outcomes:
        for task_id, why in o.skipped:
            err_console.print(f"[yellow]{o.arm.label}: skipped {task_id}: {why}[/]", highlight=False)
    if as_json:
        print_json(comparison.model_dump(mode="json", by_alias=True))
        return
    # Not a terminal (a pipe, a file): rich would wrap at 80 columns; tables read better unwrapped.
    out = console if console.is_terminal else Console(file=sys.stdout, width=160)
    out.print(comparison_tables(comparison))
    console.print(f"comparison: {out_dir / 'comparison.md'} (and comparison.json); "
                  f"any two runs: coderun report {outcomes[0].run_dir} {outcomes[-1].run_dir}")


def comparison_tables(c: AblationComparison) -> Group:
    """Two tables, groups as bold heading rows so they fit an 80-column terminal."""
    vh, _ = headers(c)
    values = _grouped_table("pass@k and Acc@k per variant (%)", vh[1:], value_rows(c))
    dh = ["variant", "k", "tasks", "Δ", "95% CI", "p", "Δ acc"]
    rows = [[r[0], *r[1:4], *r[6:]] for r in delta_rows(c, digits=1)]  # the arms' values are above
    deltas = _grouped_table(f"pass@k of each variant minus {c.baseline} (points)", dh, rows)
    return Group(values, Text(""), deltas, Text(NOTE, style="dim"))


def _grouped_table(title: str, header: list[str], rows: list[list[str]]) -> Table:
    out: list[list[Any]] = []
    group = None
    for row in rows:
        if row[0] != group:
            group = row[0]
            out.append([Text(group, style="bold"), *([""] * (len(header) - 1))])
        out.append(["  " + row[1], *row[2:]])
    return make_table(header, out, title=title, fold=(0,))
