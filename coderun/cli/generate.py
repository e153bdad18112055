"""`coderun generate`: samples for every prompt from an OpenAI-compatible server."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from coderun.cli._common import err_console, print_json
from coderun.cli.render import Renderer
from coderun.errors import GenerationError, UsageError
from coderun.events import silent
from coderun.generate import Endpoint, GenerationConfig, RetryPolicy, get_provider, run_generation
from coderun.prompts.records import read_prompts


def generate(
    prompts: Path = typer.Option(..., "--prompts", help="prompts.jsonl from `coderun prompts`."),
    model: str = typer.Option(..., "--model", help="Model name as the server knows it."),
    base_url: str = typer.Option(..., "--base-url", help="e.g. http://127.0.0.1:8000/v1 (vLLM), "
                                 "http://127.0.0.1:11434/v1 (Ollama)."),
    out: Path = typer.Option(..., "-o", "--out", help="samples.jsonl (appended; existing samples are kept "
                             "and not requested again). Raw responses go to the sibling *.raw.jsonl."),
    n: int = typer.Option(10, "-n", help="Samples per prompt."),
    temperature: float = typer.Option(0.6, "--temperature"),
    top_p: float = typer.Option(0.95, "--top-p"),
    max_tokens: int = typer.Option(512, "--max-tokens", help="Tokens to generate per sample."),
    concurrency: int = typer.Option(4, "--concurrency", help="Requests in flight at once."),
    endpoint: Endpoint = typer.Option(Endpoint.CHAT, "--endpoint", help="chat: messages in, code extracted "
                                      "from the answer; completion: the prompt's header continued."),
    provider: str = typer.Option("openai", "--provider", help="Provider (openai = any OpenAI-compatible)."),
    api_key_env: str = typer.Option("OPENAI_API_KEY", "--api-key-env", help="Environment variable holding "
                                    "the API key (unset is fine for local servers)."),
    timeout: float = typer.Option(120.0, "--timeout", help="Seconds per request before it is retried."),
    retries: int = typer.Option(8, "--max-attempts", help="Attempts per sample on 429/5xx/timeouts."),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> None:
    """Generate -n samples per prompt; resumable, retried, with raw responses kept."""
    records = read_prompts(prompts)
    config = GenerationConfig(model=model, n=n, temperature=temperature, top_p=top_p, max_tokens=max_tokens,
                              endpoint=endpoint, concurrency=concurrency)
    if retries < 1:
        raise UsageError(f"--max-attempts must be at least 1, not {retries}")
    retry = RetryPolicy(max_attempts=retries, timeout=timeout)
    with get_provider(provider, base_url=base_url, api_key=os.environ.get(api_key_env), retry=retry) as p, \
            Renderer(err_console) as show:
        summary = run_generation(records, p, config, out, on_event=silent if quiet else show)
    if json_out:
        print_json({"out": str(summary.out), "raw": str(summary.raw), "already": summary.already,
                    "written": summary.written, "pending": summary.pending, "retries": summary.retries,
                    "no_code": summary.no_code, "errors": summary.errors})
    else:
        err_console.print(f"{summary.written} new samples ({summary.already} kept from before, "
                          f"{summary.retries} retried requests, {summary.no_code} answers without code) "
                          f"-> {summary.out}; raw responses -> {summary.raw}")
    if summary.errors:
        missing = summary.pending - summary.written
        raise GenerationError(f"{missing} samples not generated: {summary.errors[0]}",
                              hint="re-run the same command to resume")
