"""`coderun serve`: the verdict service (coderun/serve), until Ctrl-C."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import typer

from coderun.cli._common import ProjectsDirOption, project_selection
from coderun.errors import UsageError
from coderun.sandbox.project import default_backend
from coderun.serve import DEFAULT_PORT
from coderun.serve.engine import ServeConfig


def serve_command(
    projects: list[str] = typer.Argument(None, help="Projects to serve, made ready before the server answers "
                                         "(default: every project with built tasks, each ready on first use)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind; any but loopback needs --token."),
    port: int = typer.Option(DEFAULT_PORT, "--port", help="Port to bind."),
    token: str = typer.Option(None, "--token", envvar="CODERUN_SERVE_TOKEN", show_envvar=True,
                              help="Bearer token every request must carry (required off loopback)."),
    backend: str = typer.Option(None, "--backend", "-b", help="docker or local (default: docker when an engine "
                                "answers, else local)."),
    slots: int = typer.Option(os.cpu_count() or 1, "--slots", "-j", help="Samples judged at once."),
    isolation: str = typer.Option("auto", "--isolation", help="local backend: auto, namespaces or none "
                                  "(as `coderun eval --isolation`)."),
    queue: int = typer.Option(256, "--queue", help="Samples accepted and not yet judged; past it, 429."),
    warm: int = typer.Option(4, "--warm", help="Projects whose workers are kept running (least recently used "
                             "closed past it)."),
    per_client: int = typer.Option(64, "--per-client", help="Samples one token (or address) may have in flight."),
    max_code: int = typer.Option(64 * 1024, "--max-code", help="Characters of a sample's code or completion."),
    max_body: int = typer.Option(4 * 1024 * 1024, "--max-body", help="Bytes of a request body."),
    include_weak: bool = typer.Option(False, "--include-weak", help="Also judge tasks a trivial body passes."),
    state: Path = typer.Option(None, "--state", help="Folder of the verdict store and logs (default: "
                               "$CODERUN_HOME/serve); a restart on the same folder finishes what was accepted."),
    projects_dir: list[Path] = ProjectsDirOption,
    openapi: bool = typer.Option(False, "--openapi", help="Print the API's OpenAPI schema (JSON) and exit."),
) -> None:
    """Serve verdicts over HTTP (docs/serve.md): GET /v1/tasks, POST /v1/verdicts, GET /metrics."""
    app, server = _service()
    if openapi:
        typer.echo(json.dumps(app.openapi_schema(), indent=2))
        return
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    s, names = project_selection(projects, projects_dir)
    config = ServeConfig(projects=tuple(names), backend=backend or default_backend(), slots=slots,
                         isolation=isolation, queue=queue, warm=warm, include_weak=include_weak,
                         max_code=max_code, state=state)
    server.serve(s, config, host=host, port=port, token=token,
                 limits=app.Limits(max_body=max_body, per_client=per_client))


def _service():
    """The service's web modules (coderun.serve.app, .server); a UsageError saying how to install their extra
    when fastapi or uvicorn is missing (the rest of coderun runs without them)."""
    try:
        from coderun.serve import app, server
    except ImportError as e:
        raise UsageError(f"coderun serve needs {e.name or 'its web framework'}, which is not installed",
                         hint="install the extra: pip install 'coderun[serve]'") from None
    return app, server
