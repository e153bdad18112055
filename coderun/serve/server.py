"""Running the verdict service: the engine started, the app bound, until SIGINT or SIGTERM.

    serve(settings, ServeConfig(...), host="127.0.0.1", port=8431, token=None)

Loopback by default; any other address needs a token (checked on every request).
"""

from __future__ import annotations

import ipaddress
import logging

from coderun.config import Settings
from coderun.errors import UsageError
from coderun.serve import DEFAULT_PORT
from coderun.serve.app import Limits, create_app
from coderun.serve.engine import Engine, ServeConfig

log = logging.getLogger("coderun.serve")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_binding(host: str, token: str | None) -> None:
    if not is_loopback(host) and not token:
        raise UsageError(f"binding {host} lets other machines call the server: it needs a token",
                         hint="give --token TOKEN (or set CODERUN_SERVE_TOKEN); clients send "
                              "`Authorization: Bearer TOKEN`")


def serve(settings: Settings, config: ServeConfig, *, host: str = "127.0.0.1", port: int = DEFAULT_PORT,
          token: str | None = None, limits: Limits = Limits()) -> None:
    import uvicorn

    token = token or None   # an empty CODERUN_SERVE_TOKEN is no token
    check_binding(host, token)
    engine = Engine(settings, config)
    try:
        engine.start()
        app = create_app(engine, token=token, limits=limits)
        log.info("serving %d tasks of %s on http://%s:%d (state in %s)", len(engine.tasks),
                 ", ".join(sorted({t.project for t in engine.tasks.values()})), host, port, engine.state)
        uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="info", access_log=False,
                                      timeout_graceful_shutdown=5)).run()
    finally:
        engine.close()
