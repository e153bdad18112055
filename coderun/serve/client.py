"""Clients of `coderun serve`: sync and async (httpx), and reward functions for RL trainers.

    with VerdictClient("http://127.0.0.1:8431") as c:
        v = c.verdict(task_id, code=...)             # a VerdictOut; v.reward is 1.0 or 0.0
        vs = c.verdicts([VerdictRequest(...), ...])  # one batch request

    async with AsyncVerdictClient(url) as c: ...     # the same, awaited

    reward_func = trl_reward(url)                    # TRL: reward_func(prompts, completions, task_id=[...])
    compute_score(data_source, solution_str, ground_truth, extra_info)   # verl (CODERUN_SERVE_URL)

A 429 (queue full, too many in flight) is waited out as its Retry-After says, a few times; any other 4xx is
a ServeError with the service's message.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx

from coderun.errors import ServeError
from coderun.serve.models import BatchOut, TaskOut, TasksOut, VerdictOut, VerdictRequest

DEFAULT_URL = "http://127.0.0.1:8431"
RETRIES = 8             # answers of 429 waited out before giving up


def _headers(token: str | None) -> dict[str, str]:
    token = token if token is not None else os.environ.get("CODERUN_SERVE_TOKEN")
    return {"Authorization": f"Bearer {token}"} if token else {}


def _request(task_id: str, code: str | None, completion: str | None, rigor: str) -> dict[str, Any]:
    body: dict[str, Any] = {"task_id": task_id, "rigor": rigor}
    body["code" if code is not None else "completion"] = code if code is not None else completion
    return body


def _answer(r: httpx.Response) -> Any:
    if r.status_code >= 400:
        try:
            message = r.json().get("error") or r.text
        except ValueError:
            message = r.text
        raise ServeError(f"the verdict service answered {r.status_code}: {message}", status=r.status_code)
    return r.json()


def _wait(r: httpx.Response) -> float | None:
    """Seconds to wait before sending again, for a 429; None for any other answer."""
    if r.status_code != 429:
        return None
    value = r.headers.get("retry-after", "1")
    return float(value) if value.replace(".", "", 1).isdigit() else 1.0


class VerdictClient:
    def __init__(self, url: str = DEFAULT_URL, *, token: str | None = None, timeout: float = 900.0):
        self.http = httpx.Client(base_url=url, headers=_headers(token), timeout=timeout)

    def __enter__(self) -> VerdictClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    def _send(self, method: str, path: str, **kw: Any) -> Any:
        for _ in range(RETRIES):
            try:
                r = self.http.request(method, path, **kw)
            except httpx.HTTPError as e:
                raise ServeError(f"cannot reach the verdict service at {self.http.base_url}: {e}",
                                 hint="is `coderun serve` running there?") from None
            if (pause := _wait(r)) is None:
                return _answer(r)
            time.sleep(pause)
        return _answer(r)

    def tasks(self, *, project: str | None = None, level: str | None = None, context: str = "none",
              docstring: str = "original") -> list[TaskOut]:
        params = {k: v for k, v in (("project", project), ("level", level)) if v}
        got = self._send("GET", "/v1/tasks", params={**params, "context": context, "docstring": docstring})
        return TasksOut.model_validate(got).tasks

    def verdict(self, task_id: str, *, code: str | None = None, completion: str | None = None,
                rigor: str = "base") -> VerdictOut:
        return VerdictOut.model_validate(self._send("POST", "/v1/verdicts",
                                                    json=_request(task_id, code, completion, rigor)))

    def verdicts(self, requests: Sequence[VerdictRequest]) -> list[VerdictOut]:
        body = {"requests": [r.model_dump(exclude_none=True) for r in requests]}
        return BatchOut.model_validate(self._send("POST", "/v1/verdicts/batch", json=body)).verdicts

    def get(self, vid: str) -> VerdictOut:
        return VerdictOut.model_validate(self._send("GET", f"/v1/verdicts/{vid}"))


class AsyncVerdictClient:
    def __init__(self, url: str = DEFAULT_URL, *, token: str | None = None, timeout: float = 900.0):
        self.http = httpx.AsyncClient(base_url=url, headers=_headers(token), timeout=timeout)

    async def __aenter__(self) -> AsyncVerdictClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.http.aclose()

    async def _send(self, method: str, path: str, **kw: Any) -> Any:
        for _ in range(RETRIES):
            try:
                r = await self.http.request(method, path, **kw)
            except httpx.HTTPError as e:
                raise ServeError(f"cannot reach the verdict service at {self.http.base_url}: {e}",
                                 hint="is `coderun serve` running there?") from None
            if (pause := _wait(r)) is None:
                return _answer(r)
            await asyncio.sleep(pause)
        return _answer(r)

    async def tasks(self, *, project: str | None = None, context: str = "none") -> list[TaskOut]:
        params = {"context": context, **({"project": project} if project else {})}
        return TasksOut.model_validate(await self._send("GET", "/v1/tasks", params=params)).tasks

    async def verdict(self, task_id: str, *, code: str | None = None, completion: str | None = None,
                      rigor: str = "base") -> VerdictOut:
        return VerdictOut.model_validate(await self._send("POST", "/v1/verdicts",
                                                          json=_request(task_id, code, completion, rigor)))

    async def verdicts(self, requests: Sequence[VerdictRequest]) -> list[VerdictOut]:
        body = {"requests": [r.model_dump(exclude_none=True) for r in requests]}
        return BatchOut.model_validate(await self._send("POST", "/v1/verdicts/batch", json=body)).verdicts

    async def get(self, vid: str) -> VerdictOut:
        return VerdictOut.model_validate(await self._send("GET", f"/v1/verdicts/{vid}"))


# ------------------------------------------------------------------------------- reward adapters


def answer_text(completion: Any) -> str:
    """A completion as trainers hand it over: a string, or a conversation (the last message's content)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    raise ServeError(f"a completion is a string or a list of messages, not {type(completion).__name__}")


def trl_reward(url: str = DEFAULT_URL, *, token: str | None = None, rigor: str = "base",
               task_column: str = "task_id") -> Callable[..., list[float]]:
    """A TRL reward function (GRPOTrainer's `reward_funcs`): each completion sent as a `completion` of the
    task named in the dataset's `task_column`; 1.0 for a pass, 0.0 otherwise, in order."""
    client = VerdictClient(url, token=token)

    def coderun_reward(prompts: list[Any], completions: list[Any], **columns: Any) -> list[float]:
        ids = columns.get(task_column)
        if ids is None or len(ids) != len(completions):
            raise ServeError(f"the dataset needs a {task_column!r} column naming each row's task",
                             hint="GET /v1/tasks lists them; put task_id beside each prompt")
        requests = [VerdictRequest(task_id=t, completion=answer_text(c), rigor=rigor)  # type: ignore[arg-type]
                    for t, c in zip(ids, completions, strict=True)]
        return [v.reward or 0.0 for v in client.verdicts(requests)]

    return coderun_reward


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None = None) -> float:
    """verl's custom reward function (custom_reward_function.path = this module, name = compute_score): the
    task id is `ground_truth` (or extra_info["task_id"]); the service is CODERUN_SERVE_URL (default
    loopback), its token CODERUN_SERVE_TOKEN, the rigor CODERUN_SERVE_RIGOR (base)."""
    task_id = (extra_info or {}).get("task_id") or ground_truth
    if not isinstance(task_id, str):
        raise ServeError("verl's ground_truth (or extra_info['task_id']) must be the coderun task id")
    with VerdictClient(os.environ.get("CODERUN_SERVE_URL", DEFAULT_URL)) as client:
        v = client.verdict(task_id, completion=solution_str, rigor=os.environ.get("CODERUN_SERVE_RIGOR", "base"))
    return v.reward or 0.0
