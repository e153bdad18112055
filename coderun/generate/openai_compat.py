"""Any OpenAI-compatible server over plain HTTP (httpx): `/chat/completions` and `/completions`.

Retried: 408, 409, 429, 5xx, timeouts, dropped connections and 200 responses whose body is not the JSON
the API promises (proxies and overloaded servers produce those). Not retried: other 4xx (a wrong model
name or key fails every request the same way), reported at once as a GenerationError.
"""

from __future__ import annotations

import email.utils
import json
import time
from typing import Any

import httpx

from coderun.errors import GenerationError
from coderun.generate.base import Endpoint, Generation, GenerationRequest, Provider, RetryPolicy

_RETRY_STATUS = {408, 409, 429}


class _Retryable(Exception):
    def __init__(self, reason: str, retry_after: float | None = None):
        super().__init__(reason)
        self.retry_after = retry_after


class OpenAICompatProvider(Provider):
    name = "openai"

    def __init__(self, base_url: str, api_key: str | None = None, retry: RetryPolicy | None = None,
                 extra_headers: dict[str, str] | None = None):
        self.base_url = base_url.rstrip("/")
        self.retry = retry or RetryPolicy()
        headers = {"Content-Type": "application/json", **(extra_headers or {})}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._client = httpx.Client(headers=headers, timeout=self.retry.timeout)
        self._sleep = self.retry.sleep or time.sleep

    def close(self) -> None:
        self._client.close()

    def generate(self, request: GenerationRequest) -> Generation:
        url, body = self._url_and_body(request)
        last = "no attempt made"
        for attempt in range(1, self.retry.max_attempts + 1):
            try:
                raw = self._post(url, body)
                return Generation(text=_text(raw, request.endpoint), finish_reason=_finish(raw),
                                  raw=raw, attempts=attempt)
            except _Retryable as e:
                last = str(e)
                if attempt < self.retry.max_attempts:
                    self._sleep(self.retry.delay(attempt, e.retry_after))
        raise GenerationError(f"{url}: gave up after {self.retry.max_attempts} attempts; last error: {last}",
                              hint="the server is overloaded or failing; re-run the same command to resume")

    def _url_and_body(self, r: GenerationRequest) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {"model": r.model, "temperature": r.temperature, "top_p": r.top_p,
                                "max_tokens": r.max_tokens, "n": 1}
        if r.stop:
            body["stop"] = list(r.stop)
        if r.endpoint is Endpoint.CHAT:
            body["messages"] = [{"role": role, "content": content} for role, content in r.messages]
            return f"{self.base_url}/chat/completions", body
        body["prompt"] = r.prompt
        return f"{self.base_url}/completions", body

    def _post(self, url: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            resp = self._client.post(url, json=body)
        except httpx.TimeoutException as e:
            raise _Retryable(f"timed out after {self.retry.timeout}s ({type(e).__name__})") from None
        except httpx.TransportError as e:
            raise _Retryable(f"connection failed: {e}") from None
        if resp.status_code in _RETRY_STATUS or resp.status_code >= 500:
            raise _Retryable(f"HTTP {resp.status_code}: {resp.text[:200]}", _retry_after(resp))
        if resp.status_code >= 400:
            hint = ("set the key in OPENAI_API_KEY or name its variable with --api-key-env"
                    if resp.status_code in (401, 403) else "check --model, --base-url and --endpoint")
            raise GenerationError(f"{url}: HTTP {resp.status_code}: {resp.text[:500]}", hint=hint)
        try:
            raw = resp.json()
        except json.JSONDecodeError:
            raise _Retryable(f"malformed JSON in the response: {resp.text[:200]!r}") from None
        if not isinstance(raw, dict) or not raw.get("choices"):
            raise _Retryable(f"response without choices: {resp.text[:200]!r}")
        return raw


def _choice(raw: dict[str, Any]) -> dict[str, Any]:
    choice = raw["choices"][0]
    if not isinstance(choice, dict):
        raise _Retryable(f"malformed choice: {choice!r}")
    return choice


def _text(raw: dict[str, Any], endpoint: Endpoint) -> str:
    choice = _choice(raw)
    if endpoint is Endpoint.CHAT:
        message = choice.get("message") or {}
        text = message.get("content") if isinstance(message, dict) else None
    else:
        text = choice.get("text")
    if not isinstance(text, str):
        raise _Retryable(f"no {'message content' if endpoint is Endpoint.CHAT else 'text'} in {choice!r}")
    return text


def _finish(raw: dict[str, Any]) -> str | None:
    reason = _choice(raw).get("finish_reason")
    return reason if isinstance(reason, str) else None


def _retry_after(resp: httpx.Response) -> float | None:
    """Retry-After in seconds, from either of its two forms (delta-seconds or an HTTP date)."""
    value = resp.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
