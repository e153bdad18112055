"""The HTTP API of `coderun serve` (FastAPI): routes, who may call, and what a bad request is told.

    GET  /v1/tasks                 the tasks judged here, each with its prompt for a context variant
    POST /v1/verdicts              one sample's verdict (?wait=false: 202 and an id to GET later)
    POST /v1/verdicts/batch        several, all accepted or none validated
    GET  /v1/verdicts/{id}         a verdict again (or `pending`)
    GET  /healthz, GET /metrics    liveness; Prometheus text

Every request passes `Guard` first: the bearer token when the server has one, the size limit on the body.
A 4xx answer is a `Problem`: what is wrong and what to send instead.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse

from coderun import __version__
from coderun.serve.engine import Busy, Engine, Rejected
from coderun.serve.models import (
    BatchOut,
    BatchRequest,
    Health,
    Judgement,
    Problem,
    RigorVerdict,
    TaskOut,
    TasksOut,
    VerdictOut,
    VerdictRequest,
)
from coderun.serve.store import Row

log = logging.getLogger("coderun.serve")

# The ASGI interface, spelled out (as starlette.types has it) so the module needs only FastAPI's names.
Scope = Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass(frozen=True)
class Limits:
    max_body: int = 4 * 1024 * 1024     # bytes of a request body
    per_client: int = 64                 # samples one token (or, without tokens, one address) has in flight


def create_app(engine: Engine, *, token: str | None = None, limits: Limits = Limits()) -> FastAPI:
    app = FastAPI(title="coderun serve", version=__version__,
                  description="Verdicts of model-generated functions inside real projects, as `coderun eval` "
                              "gives them, from a process that stays up.",
                  responses={400: {"model": Problem}, 401: {"model": Problem}, 413: {"model": Problem},
                             422: {"model": Problem}, 429: {"model": Problem}})
    app.add_middleware(Guard, token=token, max_body=limits.max_body,
                       on_refuse=lambda status: engine.metrics.refused(status))
    _errors(app, engine)
    _state_routes(app, engine)
    _verdict_routes(app, engine, InFlight(limits.per_client))
    return app


def _state_routes(app: FastAPI, engine: Engine) -> None:
    """What the server is and holds: /healthz, /metrics, /v1/tasks."""
    listed: dict[tuple, list[TaskOut]] = {}   # the prompts of a selection, made once

    @app.get("/healthz", response_model=Health)
    def healthz() -> Health:
        return Health(projects=sorted({t.project for t in engine.tasks.values()}), tasks=len(engine.tasks),
                      queue=engine.queue_depth(), slots=engine.config.slots)

    @app.get("/metrics", response_class=PlainTextResponse)
    def metrics() -> str:
        return engine.metrics.render(queue=engine.queue_depth(), busy=engine.busy_slots(),
                                     slots=engine.config.slots, warm=len(engine.warm_projects()))

    @app.get("/v1/tasks", response_model=TasksOut)
    def tasks(project: str | None = None, level: str | None = None,
              verified_only: bool = Query(True, description="Only verified tasks (those judged here)."),
              context: str = Query("none", description="The prompt's context variant (coderun prompts "
                                   "--context): none, oracle, class, file, all, or several joined by +."),
              docstring: str = Query("original", description="original or human.")) -> TasksOut:
        key = (project, level, verified_only, context, docstring)
        if key not in listed:
            if len(listed) >= 64:   # bounded: any query string makes a key
                listed.clear()
            listed[key] = task_list(engine, project, level, verified_only, context, docstring)
        return TasksOut(context=context, docstring=docstring, tasks=listed[key])


def _verdict_routes(app: FastAPI, engine: Engine, flight: InFlight) -> None:
    """Asking for verdicts, one or a batch, and asking again."""

    @app.post("/v1/verdicts", response_model=VerdictOut, responses={202: {"model": VerdictOut}})
    async def verdict(body: VerdictRequest, request: Request,
                      wait: bool = Query(True, description="Answer with the verdict; false: answer 202 "
                                         "once the request is recorded, GET /v1/verdicts/{id} later.")):
        with flight.hold(_client(request), 1):
            task = engine.task(body.task_id, body.rigor)
            code = engine.code_of(task, body.code, body.completion)
            future, cached = engine.submit(task, code, body.rigor)
            if not wait and not future.done():
                return JSONResponse(verdict_out(engine.get_accepted(task, code, body.rigor), cached)
                                    .model_dump(mode="json"), status_code=202)
            return verdict_out(await asyncio.wrap_future(future), cached)

    @app.post("/v1/verdicts/batch", response_model=BatchOut)
    async def batch(body: BatchRequest, request: Request) -> BatchOut:
        with flight.hold(_client(request), len(body.requests)):
            todo = []
            for i, r in enumerate(body.requests):
                try:
                    task = engine.task(r.task_id, r.rigor)
                    todo.append((task, engine.code_of(task, r.code, r.completion), r.rigor))
                except Rejected as e:
                    raise Rejected(f"requests[{i}]: {e.message}", e.status) from None
            if engine.queue_depth() + len(todo) > engine.config.queue:
                raise Busy(engine.retry_after())
            submitted = [engine.submit(*t) for t in todo]
            rows = await asyncio.gather(*(asyncio.wrap_future(f) for f, _ in submitted))
            return BatchOut(verdicts=[verdict_out(row, c) for row, (_, c) in zip(rows, submitted, strict=True)])

    @app.get("/v1/verdicts/{vid}", response_model=VerdictOut)
    def get_verdict(vid: str) -> VerdictOut:
        row = engine.get(vid)
        if row is None:
            raise Rejected(f"no verdict with id {vid!r}: an id is what POST /v1/verdicts answered", 404)
        return verdict_out(row, False)


def openapi_schema() -> dict[str, Any]:
    """The API's OpenAPI schema (docs/serve-openapi.json is this, committed): the routes only, no engine."""
    return create_app(None).openapi()  # type: ignore[arg-type]  # the routes use it only when called


def verdict_out(row: Row, cached: bool) -> VerdictOut:
    out = VerdictOut(id=row.id, task_id=row.task_id, rigor=row.rigor, state=row.state, cached=cached,  # type: ignore[arg-type]
                     accepted_at=row.accepted_at, finished_at=row.finished_at)
    if row.state != "done" or row.judged is None:
        return out
    j = Judgement.model_validate_json(row.judged)
    head = j.outcome.verdict(row.rigor)
    o = j.outcome
    return out.model_copy(update={
        "verdict": head.verdict, "failure": head.failure, "reason": head.reason,
        "reward": 1.0 if head.verdict.value == "pass" else 0.0,
        "base": RigorVerdict(verdict=o.base, failure=o.base_failure, reason=o.base_reason),
        "plus": RigorVerdict(verdict=o.plus, failure=o.plus_failure, reason=o.plus_reason),
        "plus_checked": o.checked, "tests": j.tests, "timed_out": j.timed_out, "durations": j.durations})


def task_list(engine: Engine, project: str | None, level: str | None, verified_only: bool, context: str,
              docstring: str) -> list[TaskOut]:
    from coderun.errors import CoderunError
    from coderun.prompts import PromptSpec, build_prompts
    from coderun.prompts.checkouts import checkout_resolver
    from coderun.records import TaskStatus
    from coderun.tasks.resolve import default_prompt

    try:
        spec = PromptSpec(context=context, docstring=docstring)  # type: ignore[arg-type]
    except CoderunError as e:
        raise Rejected(e.message) from None
    tasks = [t for t in engine.tasks.values() if (project is None or t.project == project)
             and (level is None or t.level.value == level)
             and (not verified_only or t.status is TaskStatus.VERIFIED)]
    built = build_prompts(tasks, checkout_resolver(engine.settings), spec)
    prompts = {p.task_id: p for p in built.records}
    return [TaskOut(task_id=t.task_id, project=t.project, level=t.level.value, status=t.status.value,
                    qualname=t.qualname, aliases=list(t.aliases), weak=bool(t.trivially_passed("base")),
                    prompt=prompts[t.task_id].prompt, header=prompts[t.task_id].header,
                    completion_prompt=default_prompt(t),
                    docstring=t.human_docstring if docstring == "human" else t.docstring)
            for t in tasks if t.task_id in prompts]


# ------------------------------------------------------------------------------- errors


def _errors(app: FastAPI, engine: Engine) -> None:
    def problem(status: int, error: str, detail: list[str] | None = None,
                headers: dict[str, str] | None = None) -> JSONResponse:
        engine.metrics.refused(status)
        return JSONResponse(Problem(error=error, detail=detail or []).model_dump(), status, headers=headers)

    @app.exception_handler(Rejected)
    async def rejected(_r: Request, e: Rejected) -> JSONResponse:
        return problem(e.status, e.message)

    @app.exception_handler(Busy)
    async def busy(_r: Request, e: Busy) -> JSONResponse:
        return problem(429, f"{e}: the server is judging as many samples as it queues (--queue)",
                       headers={"Retry-After": str(e.retry_after)})

    @app.exception_handler(RequestValidationError)
    async def invalid(_r: Request, e: RequestValidationError) -> JSONResponse:
        errors = e.errors()
        if any(err.get("type") == "json_invalid" for err in errors):
            err = next(err for err in errors if err.get("type") == "json_invalid")
            where = err["loc"][-1] if err.get("loc") else "?"
            why = (err.get("ctx") or {}).get("error", "")
            return problem(400, f"the body is not valid JSON ({why} at character {where}): send a JSON object "
                           "such as {\"task_id\": \"...\", \"code\": \"def f(): ...\"}")
        if any(tuple(err.get("loc", ())) == ("body",) and err.get("type") == "missing" for err in errors):
            return problem(400, "the body is empty: send a JSON object such as "
                           "{\"task_id\": \"...\", \"code\": \"def f(): ...\"} (Content-Type: application/json)")
        if any(tuple(err.get("loc", ())) == ("body",) for err in errors):
            return problem(422, "the body must be a JSON object (Content-Type: application/json) such as "
                           "{\"task_id\": \"...\", \"code\": \"def f(): ...\"}; "
                           + "; ".join(str(err.get("msg")) for err in errors))
        detail = [f"{'.'.join(str(p) for p in err.get('loc', ()) if p != 'body') or 'body'}: {err.get('msg')}"
                  for err in errors]
        return problem(422, "the request does not have the expected fields and types: " + "; ".join(detail),
                       detail)

    @app.exception_handler(400)  # FastAPI's: the body could not be parsed at all
    async def unreadable(_r: Request, e: Exception) -> JSONResponse:
        c = e.__cause__
        if isinstance(c, UnicodeDecodeError):
            return problem(400, f"the body is not UTF-8 (byte 0x{c.object[c.start]:02x} at {c.start}): send JSON "
                           "encoded as UTF-8; code with other bytes goes in as \\u escapes")
        return problem(400, f"the body could not be read as JSON ({c or e}): send a JSON object encoded as UTF-8")


# ------------------------------------------------------------------------------- who may call, how much


def _client(request: Request) -> str:
    auth = request.headers.get("authorization", "")
    return auth or (request.client.host if request.client else "?")


class InFlight:
    """Samples in flight per client (its token, or its address): past `limit`, 429."""

    def __init__(self, limit: int):
        self.limit, self.now = limit, Counter[str]()

    @contextmanager
    def hold(self, who: str, n: int) -> Iterator[None]:
        if self.now[who] + n > self.limit:
            raise Busy(1) if n <= self.limit else Rejected(
                f"a batch of {n} is more than one client may have in flight ({self.limit}): split it", 413)
        self.now[who] += n
        try:
            yield
        finally:
            self.now[who] -= n


class Guard:
    """ASGI middleware: the bearer token on every request (when the server has one), and the body limit."""

    def __init__(self, app: ASGIApp, *, token: str | None, max_body: int, on_refuse=lambda _s: None):
        self.app, self.token, self.max_body, self.on_refuse = app, token, max_body, on_refuse

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        if self.token is not None:
            given = headers.get("authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {self.token}".encode()):
                what = "a wrong token" if given else "no token"
                return await self._refuse(send, 401, f"{what}: this server needs `Authorization: Bearer TOKEN` "
                                          "(the --token it was started with, or CODERUN_SERVE_TOKEN)",
                                          {"www-authenticate": "Bearer"})
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > self.max_body:
            return await self._refuse(send, 413, f"the body is {length} bytes; this server takes at most "
                                      f"{self.max_body} (--max-body): send fewer samples per batch")
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            msg = await receive()
            seen += len(msg.get("body", b""))
            if seen > self.max_body:
                raise _TooLarge()
            return msg

        try:
            await self.app(scope, counted, send)
        except _TooLarge:
            await self._refuse(send, 413, f"the body is over {self.max_body} bytes (--max-body)")

    async def _refuse(self, send: Send, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        self.on_refuse(status)
        body = Problem(error=message).model_dump_json().encode()
        raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        raw += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
        await send({"type": "http.response.start", "status": status, "headers": raw})
        await send({"type": "http.response.body", "body": body})


class _TooLarge(Exception):
    pass
