"""The sandbox interface every backend implements, and the registry that picks one by name.

A `Sandbox` serves one project in one worker slot. It is started once and reused for many samples;
each sample gets a fresh copy of the pristine project tree (`new_workdir`), its processes are killed
when `exec` returns, and its copy is removed (`remove_workdir`), so nothing one sample writes is seen by
the next. `exec` returns a typed `ExecResult` whatever the command did (non-zero exit, timeout, huge
output) and raises `SandboxError` only when the sandbox itself is broken: an infrastructure error,
never a sample's fault.

A sandbox lives no longer than its owner (the coderun process that started it): when the owner dies,
even by SIGKILL, its processes, folders and containers go too, without waiting for another run.
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from coderun.envs.services import expand
from coderun.errors import SandboxError, UsageError

if TYPE_CHECKING:
    from coderun.sandbox.process import SandboxProcess, WorkerLayout


@dataclass(frozen=True)
class Limits:
    """Resource limits for everything a sample starts (enforced per backend, see each module)."""

    memory_mb: int = 4096          # address space (local) / cgroup memory (docker)
    pids: int = 256                # processes + threads
    cpus: float = 1.0              # docker only: CPU share of the container
    file_size_mb: int = 1024       # largest file a sample may write (local: RLIMIT_FSIZE)
    scratch_mb: int = 2048         # size of the tmpfs holding a worker's copies (docker; local in namespaces)
    output_limit: int = 1 << 20    # default cap on captured stdout / stderr bytes, each


@dataclass(frozen=True)
class SandboxSpec:
    """What a backend needs to run one project's tests.

    `project_dir` and `python` are paths as seen by the backend: host paths for `local`, paths inside
    the image for `docker` (where `image` names the project image).
    """

    project: str
    project_dir: str
    python: str
    import_root: str = ""
    image: str | None = None
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    slot: int = 0
    limits: Limits = field(default_factory=Limits)
    services: tuple[str, ...] = ()     # servers the tests need (tests.services), started with the sandbox
    isolation: str = "auto"            # local only: auto | namespaces | none (coderun.choices.Isolation)


@dataclass(frozen=True)
class ExecResult:
    returncode: int              # negative: killed by that signal (local); 128+N style from docker
    stdout: str
    stderr: str
    timed_out: bool = False      # the hard wall-clock limit killed the command
    truncated: bool = False      # stdout or stderr went over the output cap (head and tail kept)
    duration: float = 0.0

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


class Sandbox(ABC):
    """One project, one slot. Use as a context manager, or call `start()` and `close()`."""

    name: str = ""

    def __init__(self, spec: SandboxSpec):
        self.spec = spec
        self.service_env: dict[str, str] = {}  # the variables of the services started with the sandbox

    @property
    def python(self) -> str:
        return self.spec.python

    def with_services(self, env: dict[str, str]) -> dict[str, str]:
        """`env` for a test run: the services' variables added, and `${NAME}` references to them expanded."""
        return expand(env, self.service_env)

    @abstractmethod
    def start(self) -> None:
        """Prepare the sandbox and start its services (idempotent); raises SandboxUnavailable when the
        backend cannot run, ServiceError when a service cannot."""

    @abstractmethod
    def exec(self, cmd: list[str], *, cwd: str, env: dict[str, str] | None = None, timeout: float,
             stdin: bytes | None = None, output_limit: int | None = None) -> ExecResult:
        """Run `cmd` (argv, never a shell string) with a scrubbed environment plus `env`; every process
        it started is killed before this returns."""

    @abstractmethod
    def read_file(self, path: str) -> bytes:
        """Bytes of a file inside the sandbox; FileNotFoundError when it does not exist."""

    @abstractmethod
    def write_file(self, path: str, data: bytes) -> None:
        """Create or replace a file inside the sandbox (parent directories are created)."""

    def write_files(self, files: dict[str, bytes]) -> None:
        """`write_file` for several files; a backend where each write is a round trip does them in few."""
        for path, data in files.items():
            self.write_file(path, data)

    @abstractmethod
    def new_workdir(self) -> str:
        """A fresh, private copy of the pristine project tree; returns its path in the sandbox."""

    @abstractmethod
    def remove_workdir(self, path: str) -> None:
        """Delete a copy made by `new_workdir` and anything the sample left in shared scratch space."""

    @abstractmethod
    def pristine_tree(self) -> bytes:
        """The pristine project tree as an uncompressed tar (paths relative to its root; no `.git`, no
        bytecode), read from where no sample's process can: a worker takes its copies from it."""

    @abstractmethod
    def harness_dir(self) -> str:
        """A directory outside every workdir, readable (not writable) by samples, holding coderun's
        own helper files (the pytest reporter)."""

    @abstractmethod
    def start_process(self, argv: list[str], *, env: dict[str, str], marker: str) -> SandboxProcess:
        """Start a long-lived process as the sample user with exactly `env`, stdin and stdout open to
        coderun (coderun's worker). `marker` ("NAME=VALUE", in `env`) is carried by the process and by
        what it forks: the process's `close` kills whatever carries it. The caller bounds it in time."""

    @abstractmethod
    def worker_layout(self) -> WorkerLayout:
        """Where a worker started by `start_process` works, what it cleans and which limits it applies
        itself (those the sandbox does not enforce on a long-lived process)."""

    @abstractmethod
    def close(self) -> None:
        """Remove every workdir and container or process, and stop the services; safe to call twice."""

    def __enter__(self) -> Sandbox:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- registry ----------------------------------------------------------------------------------

_REGISTRY: dict[str, Callable[[], type[Sandbox]]] = {}


def register(name: str, loader: Callable[[], type[Sandbox]]) -> None:
    """Register a backend lazily (the loader imports its module, so the docker SDK loads only when used)."""
    _REGISTRY[name] = loader


def backend_names() -> list[str]:
    return sorted(_REGISTRY)


def sandbox_class(name: str) -> type[Sandbox]:
    try:
        loader = _REGISTRY[name]
    except KeyError:
        raise UsageError(f"unknown sandbox backend {name!r}; one of: {', '.join(backend_names())}") from None
    return loader()


def create_sandbox(name: str, spec: SandboxSpec) -> Sandbox:
    return sandbox_class(name)(spec)


def check_exec_args(cmd: list[str], timeout: float) -> None:
    if not cmd or not all(isinstance(c, str) for c in cmd):
        raise SandboxError(f"exec needs a non-empty argv list of strings, got {cmd!r}")
    if timeout <= 0:
        raise SandboxError(f"exec needs a positive timeout, got {timeout}")

