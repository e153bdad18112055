"""What a sandbox gives an executor beyond `exec`: a long-lived process with a byte stream in and out
(`SandboxProcess`, started by `Sandbox.start_process`), and where such a process may work and what it
must enforce itself (`WorkerLayout`, from `Sandbox.worker_layout`)."""

from __future__ import annotations

import queue
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from coderun.harness.coderun_capped import CappedBuffer


@dataclass(frozen=True)
class WorkerLayout:
    """The backend's part of a long-lived worker's configuration."""

    scratch: str                       # the worker's private folder
    home: str                          # HOME and TMPDIR of the worker process itself
    clean: tuple[str, ...] = ()        # shared folders to empty after each sample ...
    keep: tuple[str, ...] = ()         # ... except these entries
    kill_uid: bool = False             # after a sample, kill every other process of the sample's user
    limits: dict[str, int | None] = field(default_factory=dict)  # rlimits the worker sets on each child
    cgroup_root: str | None = None     # where the worker makes a pids cgroup per child (None: it does not)
    pids: int | None = None            # pids.max of those cgroups

    def config(self) -> dict:
        """The entries of the worker's JSON configuration (coderun_worker.py reads them)."""
        cfg: dict = {"scratch": self.scratch, "limits": dict(self.limits)}
        if self.kill_uid or self.clean or self.keep:
            cfg.update(kill_uid=self.kill_uid, clean=list(self.clean), keep=list(self.keep))
        if self.cgroup_root is not None or self.pids is not None:
            cfg.update(cgroup_root=self.cgroup_root, pids=self.pids)
        return cfg


class SandboxProcess(ABC):
    """A process started in a sandbox: bytes to its stdin, its stdout as lines, a tail of its stderr.

    Backends start a thread that calls `_feed` with stdout chunks and `_ended` at EOF. `close` kills the
    process and everything it started; the sandbox stays up."""

    def __init__(self) -> None:
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._stderr = CappedBuffer(16 << 10)
        self._partial = bytearray()

    def _feed(self, chunk: bytes) -> None:
        self._partial += chunk
        while (i := self._partial.find(b"\n")) >= 0:
            self._lines.put(bytes(self._partial[:i]))
            del self._partial[: i + 1]

    def _ended(self) -> None:
        self._lines.put(None)

    def read_line(self, deadline: float) -> bytes | None:
        """The next line of stdout (without its newline), None at EOF; TimeoutError at `deadline`
        (a time.monotonic() value)."""
        try:
            return self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise TimeoutError("no line before the deadline") from None

    def stderr_tail(self) -> str:
        return self._stderr.text()[-500:].strip()

    @abstractmethod
    def send(self, data: bytes) -> None:
        """Write to the process's stdin; OSError when it is gone."""

    @abstractmethod
    def close(self) -> None:
        """Kill the process and every process it started; safe to call twice."""
