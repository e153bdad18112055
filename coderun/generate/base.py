"""The provider interface: one request in, one generation out; retries are the provider's business.

A provider is a small class in its own module, registered by name in `_PROVIDERS`; its SDK (if any) is
imported only when the provider is constructed. `get_provider` fails loudly on an unknown name.
"""

from __future__ import annotations

import importlib
import random
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from coderun.errors import UsageError


class Endpoint(str, Enum):
    CHAT = "chat"              # messages in, an answer (prose + code) out: the code is extracted
    COMPLETION = "completion"  # a prompt ending in the function header in, the body's continuation out


@dataclass(frozen=True)
class GenerationRequest:
    endpoint: Endpoint
    model: str
    prompt: str = ""                                   # completion endpoint
    messages: tuple[tuple[str, str], ...] = ()         # chat endpoint: (role, content) pairs
    temperature: float = 0.6
    top_p: float = 0.95
    max_tokens: int = 512
    stop: tuple[str, ...] = ()


@dataclass(frozen=True)
class Generation:
    text: str                      # the model's output text (chat: the message content)
    finish_reason: str | None
    raw: dict[str, Any]            # the server's full JSON response, kept next to the extracted code
    attempts: int = 1              # requests it took, retries included


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter; a server's Retry-After wins when it asks for longer."""

    max_attempts: int = 8
    base_delay: float = 1.0
    max_delay: float = 60.0
    max_retry_after: float = 300.0   # never trust a Retry-After beyond this
    timeout: float = 120.0           # per request, seconds
    sleep: Callable[[float], None] = field(default=None, repr=False)  # type: ignore[assignment]
    rng: random.Random = field(default_factory=random.Random, repr=False, compare=False)

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait before attempt `attempt + 1` (attempt counts from 1)."""
        backoff = self.rng.uniform(0, min(self.max_delay, self.base_delay * 2 ** (attempt - 1)))
        if retry_after is not None:
            return max(min(retry_after, self.max_retry_after), backoff)
        return backoff


class Provider(ABC):
    """Turns a GenerationRequest into a Generation, or raises GenerationError."""

    name: str = ""

    @abstractmethod
    def generate(self, request: GenerationRequest) -> Generation: ...

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections; the default holds none."""

    def __enter__(self) -> Provider:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# name -> "module:Class"; imported on first use so an unused provider's SDK is never needed.
_PROVIDERS: dict[str, str] = {
    "openai": "coderun.generate.openai_compat:OpenAICompatProvider",
}


def provider_names() -> list[str]:
    return sorted(_PROVIDERS)


def get_provider(name: str, **kwargs: Any) -> Provider:
    try:
        target = _PROVIDERS[name]
    except KeyError:
        raise UsageError(f"unknown provider {name!r}; one of: {', '.join(provider_names())}") from None
    module, cls = target.split(":")
    return getattr(importlib.import_module(module), cls)(**kwargs)
