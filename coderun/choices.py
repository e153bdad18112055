"""The named choices a run is made of, shared by every stage: where a sample's tests run (the backend)
and how samples are dispatched to it (the executor). A name is checked once, where it is read
(`parse`: a UsageError naming the choices); every later stage takes the enum."""

from __future__ import annotations

from enum import Enum

from coderun.errors import UsageError


class _Choice(str, Enum):
    def __str__(self) -> str:  # the name as written on the command line, also inside f-strings
        return self.value

    @classmethod
    def parse(cls, value: str) -> _Choice:
        try:
            return cls(value)
        except ValueError:
            what = cls.__name__.lower()
            raise UsageError(f"unknown {what} {value!r}; use {' or '.join(c.value for c in cls)}") from None


class Backend(_Choice):
    """Where tests run: the project's venv on this machine, or its Docker image (coderun.sandbox.project
    holds what differs per backend)."""

    LOCAL = "local"
    DOCKER = "docker"


class Executor(_Choice):
    """workers: a long-lived worker per project and slot forks a child per unique sample; naive: a fresh
    sandbox for every sample (the reference)."""

    WORKERS = "workers"
    NAIVE = "naive"


class Isolation(_Choice):
    """How a local sandbox is kept apart from the host (docs/threat-model.md); docker's is its container.
    auto: namespaces where this machine can make them, else none, said at the start and recorded in the run;
    namespaces: required, a run stops when they cannot be made; none: turned off (samples share the host)."""

    AUTO = "auto"
    NAMESPACES = "namespaces"
    NONE = "none"
