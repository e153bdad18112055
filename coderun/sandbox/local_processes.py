"""The processes of the `local` backend: limits, pids cgroups, sweeps of what a command left, the
long-lived process of `start_process`, and the guardian that ends a sandbox with its owner."""

from __future__ import annotations

import contextlib
import math
import os
import selectors
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from coderun.harness.coderun_capped import CappedBuffer
from coderun.sandbox.guardian import rmtree as guardian_rmtree
from coderun.sandbox.process import SandboxProcess

_CGROUP_ROOTS = ("/sys/fs/cgroup/pids", "/sys/fs/cgroup/unified", "/sys/fs/cgroup")
_GUARDIAN = Path(__file__).with_name("guardian.py")
# Long-lived processes are started from this one thread, which lives as long as coderun: bubblewrap's
# --die-with-parent (PR_SET_PDEATHSIG) fires when the *thread* that forked it ends, and a worker started by
# a thread of a short-lived pool (one phase of a task build) was killed with it and found dead by the next.
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="coderun-spawner")


def with_outer_timeout(cmd: list[str], timeout: float) -> list[str]:
    """Put coreutils `timeout` between coderun and the command: a sample that signals its parent hits
    that process, not coderun (coderun's own deadline still applies when it is missing)."""
    tool = shutil.which("timeout")
    if not tool:
        return cmd
    return [tool, "-s", "KILL", str(math.ceil(timeout) + 2), *cmd]


def nproc_limit(pids: int) -> int | None:
    """RLIMIT_NPROC counts every process of the user and is ignored for root, so: none for root, and
    the user's current count plus `pids` otherwise (a smaller value would break their other programs)."""
    uid = os.geteuid()
    if uid == 0:
        return None
    mine = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if entry.stat().st_uid == uid:
                    mine += 1
    return mine + pids


def collect(proc: subprocess.Popen, stdin: bytes | None, limit: int, deadline: float,
             on_exit) -> tuple[CappedBuffer, CappedBuffer, bool]:
    """Read stdout and stderr with a cap until EOF; kill everything at the deadline. Once the main
    process has exited, `on_exit` kills what it left running, so inherited pipes reach EOF."""
    if stdin is not None:
        threading.Thread(target=_feed, args=(proc.stdin, stdin), daemon=True).start()
    bufs = {proc.stdout: CappedBuffer(limit), proc.stderr: CappedBuffer(limit)}
    sel = selectors.DefaultSelector()
    for stream in bufs:
        sel.register(stream, selectors.EVENT_READ)
    timed_out = False
    swept = False
    try:
        while sel.get_map():
            now = time.monotonic()
            if not swept and (proc.poll() is not None or now >= deadline):
                timed_out = proc.returncode is None
                on_exit()
                swept = True
            for key, _ in sel.select(timeout=0.1 if swept else max(0.0, min(deadline - now, 0.2))):
                chunk = os.read(key.fd, 65536)
                if chunk:
                    bufs[key.fileobj].feed(chunk)
                else:
                    sel.unregister(key.fileobj)
    finally:
        sel.close()
        for stream in bufs:
            stream.close()
    proc.wait()
    return bufs[proc.stdout], bufs[proc.stderr], timed_out


def _feed(pipe, data: bytes) -> None:
    with contextlib.suppress(OSError):
        pipe.write(data)
    with contextlib.suppress(OSError):
        pipe.close()


def sweep(pgid: int | None, needles: tuple[bytes, ...], cgroup: PidsCgroup | None = None) -> None:
    """SIGKILL the process group, the cgroup, and any process carrying a needle ("NAME=VALUE" in its
    initial environment) or in the session `pgid`."""
    if pgid is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    pause = 0.001  # a killed process is gone in about a millisecond: look again soon, then less often
    for _ in range(26):  # at most about 1.1 s
        victims = set(cgroup.pids()) if cgroup else set()
        victims |= marked_processes(needles, pgid)
        victims.discard(os.getpid())
        if not victims:
            return
        for pid in victims:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(pause)
        pause = min(2 * pause, 0.05)


def marked_processes(needles: tuple[bytes, ...], sid: int | None) -> set[int]:
    found = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            if fields[0] == b"Z":
                continue
            if int(fields[3]) == sid:  # fields after the name: state ppid pgrp session ...
                found.add(pid)
                continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                if any(n in needles for n in f.read().split(b"\0")):
                    found.add(pid)
        except (OSError, IndexError, ValueError):
            continue
    return found


class PidsCgroup:
    """A pids cgroup (v1 or v2) for one exec: a hard process-count limit and a complete kill list."""

    def __init__(self, path: Path):
        self.path = path

    @classmethod
    def create(cls, name: str, max_pids: int) -> PidsCgroup | None:
        for root in _CGROUP_ROOTS:
            base = Path(root)
            if not (base / "cgroup.procs").exists():
                continue
            if base.name != "pids" and "pids" not in _read(base / "cgroup.controllers"):
                continue
            path = base / name
            try:
                path.mkdir()
                (path / "pids.max").write_text(str(max_pids))
                return cls(path)
            except OSError:
                with contextlib.suppress(OSError):
                    path.rmdir()
        return None

    @classmethod
    def probe_root(cls) -> str | None:
        """Where a pids cgroup can be made here (None: nowhere), found by making and removing one."""
        probe = cls.create(f"coderun-probe-{uuid.uuid4().hex[:12]}", 16)
        if probe is None:
            return None
        probe.remove()
        return str(probe.path.parent)

    def pids(self) -> list[int]:
        return [int(p) for p in _read(self.path / "cgroup.procs").split()]

    def remove(self) -> None:
        for _ in range(50):
            for pid in self.pids():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.05)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def rmtree(path: Path) -> None:
    """Remove a tree a sample may have made unreadable (chmod 000 directories)."""
    guardian_rmtree(str(path))


class LocalProcess(SandboxProcess):
    """A process in its own session, stdin and stdout on pipes, stderr to a file whose tail is kept; in
    `cgroup` (a process limit for it and all it starts) when one is given."""

    def __init__(self, argv: list[str], env: dict[str, str], stderr_path: Path, marker: str,
                 cgroup: PidsCgroup | None = None):
        super().__init__()
        self.stderr_path, self.marker, self.cgroup = stderr_path, marker.encode(), cgroup
        procs = str(cgroup.path / "cgroup.procs") if cgroup else None
        with open(stderr_path, "wb") as err:
            self.proc = _SPAWNER.submit(
                subprocess.Popen, argv, env=env, cwd="/", stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=err, start_new_session=True, close_fds=True,
                preexec_fn=(lambda: _join(procs)) if procs else None).result()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for chunk in iter(lambda: self.proc.stdout.read1(65536), b""):
            self._feed(chunk)
        with contextlib.suppress(OSError):
            self._stderr.feed(self.stderr_path.read_bytes()[-16384:])
        with contextlib.suppress(subprocess.TimeoutExpired):  # how it ended: a silent death names its cause
            self._stderr.feed(f"\n({exit_status(self.proc.wait(1))})".encode())
        self._ended()

    def send(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            self.proc.wait(10)
        sweep(None, (self.marker,), self.cgroup)  # a child it was running lives in a session of its own
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                stream.close()


def exit_status(code: int) -> str:
    """A process's end as a person reads it (bubblewrap reports its child killed by signal N as 128 + N)."""
    signo = -code if code < 0 else code - 128 if 128 < code < 128 + 65 else 0
    with contextlib.suppress(ValueError):
        return f"killed by {signal.Signals(signo).name}" if signo else f"exit code {code}"
    return f"exit code {code}"


def _join(procs_file: str) -> None:
    """In the child between fork and exec: move into the cgroup (system calls only)."""
    fd = os.open(procs_file, os.O_WRONLY)
    os.write(fd, b"0")
    os.close(fd)


class Guardian:
    """guardian.py in a session of its own, holding a pipe from coderun: when coderun dies (even by
    SIGKILL) the pipe reaches EOF and the guardian kills the sandbox's processes and removes its folder.
    `watch` names one more environment entry that marks the sandbox's processes."""

    def __init__(self, root: Path):
        self._lock = threading.Lock()
        self.proc = subprocess.Popen([sys.executable, "-I", "-S", str(_GUARDIAN), str(root)], env={}, cwd="/",
                                     stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True, close_fds=True)

    def watch(self, entry: str) -> None:
        with self._lock, contextlib.suppress(OSError, ValueError):  # a dead guardian guards nothing more
            self.proc.stdin.write(entry.encode() + b"\n")
            self.proc.stdin.flush()

    def stop(self) -> None:
        """The owner cleaned up itself: the guardian is not needed any more."""
        with contextlib.suppress(OSError):
            self.proc.kill()
        self.proc.wait()
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
