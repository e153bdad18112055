"""A fake OpenAI-compatible server on 127.0.0.1 (ephemeral port), run in a thread by tests.

It answers `/v1/chat/completions` and `/v1/completions` with whatever `answer(endpoint, body)` returns,
and injects faults from a queue, one per request in arrival order:

    "429"        rate limited, with `Retry-After: <retry_after>`
    "500"/"503"  server errors
    "401"        bad key (not retryable)
    "malformed"  200 with a body that is not JSON
    "empty"      200 with JSON but no choices
    "hang"       answers only after `hang_seconds` (a client timeout)

Every request body (and its Authorization header) is recorded in `requests`.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = Callable[[str, dict[str, Any]], str]


def last_user_message(body: dict[str, Any]) -> str:
    return next((m["content"] for m in reversed(body.get("messages", [])) if m["role"] == "user"), "")


class FakeOpenAI:
    def __init__(self, answer: Answer | None = None, *, retry_after: str = "1", hang_seconds: float = 2.0):
        self.answer: Answer = answer or (lambda endpoint, body: "```python\ndef f():\n    return 1\n```")
        self.faults: deque[str] = deque()
        self.requests: list[dict[str, Any]] = []
        self.retry_after = retry_after
        self.hang_seconds = hang_seconds
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def fault(self, *kinds: str) -> None:
        self.faults.extend(kinds)

    def _next(self, record: dict[str, Any]) -> str | None:
        with self._lock:
            self.requests.append(record)
            return self.faults.popleft() if self.faults else None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                endpoint = "chat" if self.path.endswith("/chat/completions") else "completion"
                if not self.path.endswith(("/chat/completions", "/completions")):
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                fault = fake._next({"path": self.path, "endpoint": endpoint, "body": body,
                                    "authorization": self.headers.get("Authorization")})
                if fault == "hang":
                    time.sleep(fake.hang_seconds)
                elif fault == "429":
                    return self._send(429, {"error": {"message": "rate limited"}},
                                      {"Retry-After": fake.retry_after})
                elif fault in ("500", "503", "401"):
                    return self._send(int(fault), {"error": {"message": f"fault {fault}"}})
                elif fault == "malformed":
                    return self._send_raw(200, b'{"choices": [{"text": "unterminated')
                elif fault == "empty":
                    return self._send(200, {"id": "x", "choices": []})
                text = fake.answer(endpoint, body)
                choice: dict[str, Any] = {"index": 0, "finish_reason": "stop"}
                if endpoint == "chat":
                    choice["message"] = {"role": "assistant", "content": text}
                else:
                    choice["text"] = text
                self._send(200, {"id": "cmpl-fake", "object": endpoint, "model": body.get("model"),
                                 "choices": [choice], "usage": {"completion_tokens": len(text.split())}})

            def _send(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
                self._send_raw(status, json.dumps(obj).encode(), headers)

            def _send_raw(self, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # client timed out
                    self.wfile.write(data)

        return Handler
