"""Executors: how a sample's tests get run. `workers` (the default) and `naive` (the reference).

naive     for every sample a fresh sandbox (a fresh container with docker, a fresh folder and process
          tree with local), a fresh copy of the project, `python -m pytest` on the task's mapped node ids,
          then the sandbox is torn down. No sharing of anything between samples; what CoderEval's
          platform did, kept as the reference for correctness and speed.
workers   one long-lived worker per (project, slot), inside a sandbox started once
          (coderun/runner/harness/coderun_worker.py). It has imported pytest already and forks a child per sample;
          the child runs the same node ids through `pytest.main` on a private, pristine copy of the
          project (written fresh, or put back after the previous sample: coderun_folders.Folder),
          with the limits, scrubbed environment, reporter channel, timeout and leftover-process killing
          of the naive path. The evidence (exit code seen by the worker, reporter records read from a pipe,
          hashes of the copy after the run) goes through the same `grade`.

Why real copies and not hardlinks: a hardlinked copy is only safe when the sample cannot write through
the links, i.e. the pristine files belong to another user than the sample's. In docker every
capability is dropped, so the worker cannot switch the child to another user, and the kernel's
protected_hardlinks keeps a user from linking files it does not own; with local the sample runs as
coderun's user. Copying a project tree into tmpfs / the page cache takes a few milliseconds, so each
sample gets a real copy (from the read-only image tree with docker); checking and putting back the one a
sample used takes less, off the path of the next answer.

Fallback, visibly: when a worker cannot start, dies or stops answering during a sample (a sample may
kill it: it runs as the same user in docker), that sample is run again on the naive path, the sample's
log says so, and the pool lists it in `notes`. A worker that could not start is not retried for its
project.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import threading
import time
import uuid
import warnings
from dataclasses import replace
from pathlib import Path

from coderun.errors import SandboxError
from coderun.records import Evidence
from coderun.runner.execute import (
    SampleRun,
    _command,
    _evidence,
    _file_tampering,
    _install_reporter,
    _write_log,
    run_sample,
)
from coderun.runner.harness import HARNESS_DIR, WORKER_FILES
from coderun.runner.harness import coderun_protocol as protocol
from coderun.sandbox import Sandbox, SandboxSpec, create_sandbox
from coderun.sandbox.base import CappedBuffer, ExecResult

EXECUTORS = ("workers", "naive")
WORKER_MODULE = "coderun_worker"
_HELLO_TIMEOUT = 180.0      # importing pytest in a cold container
_GRACE = 30.0               # past a sample's own limit before the host kills the worker
_BASE_ENV = {"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"}


class WorkerLost(Exception):
    """The worker could not start, died, or did not answer in time: the sample goes to the naive path."""


# -------------------------------------------------------------------------------------- naive


def run_naive(backend: str, spec: SandboxSpec, run: SampleRun, note: str = "") -> Evidence:
    """One sample in a sandbox of its own, started for it and torn down after it."""
    sb = create_sandbox(backend, replace(spec, slot=1000 + int(uuid.uuid4().int % 1000)))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the CLI says once that local does not isolate
            sb.start()
        evidence = run_sample(sb, relfile=run.relfile, new_source=run.new_source, nodeids=run.nodeids,
                              timeout=run.timeout, per_test_timeout=run.per_test_timeout, env=run.env,
                              pytest_args=run.pytest_args, log_path=run.log_path)
    except SandboxError as e:
        evidence = Evidence(expected=run.nodeids, infra_error=str(e))
    finally:
        with contextlib.suppress(Exception):  # closing is best effort; the evidence is what matters
            sb.close()
    _note_in_log(run, f"executor: naive{f' ({note})' if note else ''}")
    return evidence


def _note_in_log(run: SampleRun, note: str) -> None:
    if run.log_path is None:
        return
    with contextlib.suppress(OSError):
        old = run.log_path.read_text(encoding="utf-8", errors="replace") if run.log_path.exists() else ""
        run.log_path.write_text(f"# {note}\n{old}", encoding="utf-8")


class NaivePool:
    """The naive executor: nothing is kept between samples."""

    name = "naive"

    def __init__(self, backend: str, specs: dict[str, SandboxSpec], jobs: int):
        self.backend, self.specs = backend, specs
        self.notes: list[str] = []

    def __enter__(self) -> NaivePool:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def run(self, project: str, run: SampleRun) -> Evidence:
        return run_naive(self.backend, self.specs[project], run)


# ------------------------------------------------------------------------------------ workers


class WorkerPool:
    """Up to `jobs` workers per project, each lent to one sample at a time."""

    name = "workers"

    def __init__(self, backend: str, specs: dict[str, SandboxSpec], jobs: int):
        self.backend, self.specs, self.jobs = backend, specs, jobs
        self.notes: list[str] = []
        self._free: dict[str, list[Worker]] = {p: [] for p in specs}
        self._all: list[Worker] = []
        self._broken: dict[str, str] = {}   # project -> why its workers cannot start
        self._lock = threading.Lock()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        for w in self._all:
            with contextlib.suppress(Exception):
                w.close()

    def run(self, project: str, run: SampleRun) -> Evidence:
        if project in self._broken:
            return self._fallback(project, run, self._broken[project])
        worker = self._lend(project)
        try:
            if not worker.started:
                worker.start(run.env)
            return worker.run(run)
        except (WorkerLost, SandboxError) as e:
            if not worker.started or worker.failed_start:
                self._broken[project] = f"the worker could not start: {e}"
            worker.close()
            worker = None
            return self._fallback(project, run, str(e))
        finally:
            if worker is not None:
                with self._lock:
                    self._free[project].append(worker)

    def _lend(self, project: str) -> Worker:
        with self._lock:
            if self._free[project]:
                return self._free[project].pop()
            slot = sum(1 for w in self._all if w.spec.project == project)
            worker = Worker(self.backend, replace(self.specs[project], slot=slot))
            self._all.append(worker)
            return worker

    def _fallback(self, project: str, run: SampleRun, why: str) -> Evidence:
        note = f"fallback from workers: {why}"
        with self._lock:
            self.notes.append(f"{project}: {run.relfile}: ran with the naive executor ({why})")
        return run_naive(self.backend, self.specs[project], run, note=note)


class Worker:
    """One worker process inside one sandbox (a local folder or a container) of one project."""

    def __init__(self, backend: str, spec: SandboxSpec):
        self.backend, self.spec = backend, spec
        self.sandbox: Sandbox | None = None
        self.channel: _Channel | None = None
        self.pristine: dict[str, str] = {}
        self.started = False
        self.failed_start = False
        self.env: dict[str, str] = {}
        self.pid = 0

    def start(self, env: dict[str, str]) -> None:
        """Start the sandbox (once) and the worker process in it; wait for its hello."""
        self.env = {k: v for k, v in env.items() if k != "PYTHONPATH"}
        try:
            if self.sandbox is None:
                self.sandbox = create_sandbox(self.backend, self.spec)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    self.sandbox.start()
            harness = _install_reporter(self.sandbox)
            for name in WORKER_FILES:
                self.sandbox.write_file(f"{harness}/{name}", (HARNESS_DIR / name).read_bytes())
            self.channel = self._launch(harness)
            hello = self.channel.receive(time.monotonic() + _HELLO_TIMEOUT)
        except (WorkerLost, SandboxError):
            self.failed_start = True
            raise
        said = protocol.parse_hello(hello)
        if said is None:
            self.failed_start = True
            raise WorkerLost(f"unexpected first message from the worker: {str(hello)[:200]}")
        self.pristine, self.pid, self.started = said.pristine, said.pid, True

    def _launch(self, harness: str) -> _Channel:
        marker = f"CODERUN_WORKER={uuid.uuid4().hex}"
        lim = self.spec.limits
        cfg = {"source": self.spec.project_dir, "harness": harness, "import_root": self.spec.import_root,
               "marker": marker, "base_env": {"PATH": self._path(), **_BASE_ENV}}
        name, value = marker.split("=")
        env = {**cfg["base_env"], **self.sandbox.with_services(self.env), name: value}
        script = [self.spec.python, f"{harness}/{WORKER_MODULE}.py"]
        if self.backend == "docker":
            from coderun.sandbox.docker import HARNESS, SCRATCH

            scratch = f"{SCRATCH}/wk-{uuid.uuid4().hex[:10]}"
            cfg.update(scratch=scratch, kill_uid=True, clean=["/tmp", "/dev/shm", SCRATCH],
                       keep=[HARNESS, scratch], limits={})
            return _DockerChannel(self.sandbox.open_stream([*script, json.dumps(cfg)],
                                                           env={**env, "HOME": "/tmp", "TMPDIR": "/tmp"}))
        root = Path(self.sandbox.harness_dir()).parent
        cfg.update(scratch=str(root / "wk"), limits={"memory_mb": lim.memory_mb, "file_size_mb": lim.file_size_mb,
                                                     "nproc": _local_nproc(lim.pids)},
                   cgroup_root=_local_cgroup_root(), pids=lim.pids)
        return _LocalChannel([*script, json.dumps(cfg)], {**env, "HOME": str(root), "TMPDIR": str(root)},
                             root / "worker.stderr", marker)

    def _path(self) -> str:
        return f"{os.path.dirname(self.spec.python)}:/usr/local/bin:/usr/bin:/bin"

    def run(self, run: SampleRun) -> Evidence:
        token = uuid.uuid4().hex
        req = protocol.run_request(
            token, run.relfile, run.new_source, run.nodeids, timeout=run.timeout,
            per_test_timeout=max(run.per_test_timeout, 0),
            env=self.sandbox.with_services({k: v for k, v in run.env.items() if k != "PYTHONPATH"}),
            args=_command(self.sandbox, run)[3:], output_limit=self.spec.limits.output_limit, template=run.template)
        self.channel.send(req)
        msg = self.channel.receive(time.monotonic() + run.timeout + _GRACE)
        answer = protocol.parse_result(msg, token)
        if answer is None:
            raise WorkerLost(f"the worker answered {str(msg)[:300]}")
        result = ExecResult(returncode=answer.returncode, stdout=answer.stdout, stderr=answer.stderr,
                            timed_out=answer.timed_out, truncated=answer.truncated, duration=answer.duration)
        records = _records(answer.report, token)
        tampering = _file_tampering(self.pristine, answer.after, run.relfile, records)
        if answer.report_truncated:
            tampering.append("the reporter channel overflowed (over 64 MiB of records)")
        evidence = _evidence(run, result, records, tampering)
        timing = " ".join(f"{k} {v:.3f}s" for k, v in answer.timing.items())
        shared = "; pytest configured once for the task" if answer.template else ""
        _write_log(run, evidence, result, records, note=f"executor: workers (worker pid {self.pid}, "
                   f"{self.backend} slot {self.spec.slot}; {timing}{shared})")
        return evidence

    def close(self) -> None:
        """Stop the worker and remove its sandbox."""
        if self.channel is not None:
            self.channel.close()
            self.channel = None
        if self.sandbox is not None:
            with contextlib.suppress(Exception):
                self.sandbox.close()
            self.sandbox = None
        self.started = False


def _records(report: str, token: str) -> list[dict]:
    """The reporter's JSON lines for this sample (lines without its token are ignored)."""
    out = []
    for line in report.splitlines():
        with contextlib.suppress(ValueError):
            rec = json.loads(line)
            if isinstance(rec, dict) and rec.get("token") == token:
                out.append(rec)
    return out


def _local_nproc(pids: int) -> int | None:
    from coderun.sandbox.local import _nproc_limit

    return _nproc_limit(pids)


def _local_cgroup_root() -> str | None:
    """Where the worker can make a pids cgroup per sample (the local backend's process limit as root)."""
    from coderun.sandbox.local import _PidsCgroup

    probe = _PidsCgroup.create(f"coderun-probe-{uuid.uuid4().hex[:12]}", 16)
    if probe is None:
        return None
    probe.remove()
    return str(probe.path.parent)


# ----------------------------------------------------------------------------------- channels


class _Channel:
    """JSON lines to and from a worker; `receive` raises WorkerLost at EOF or at the deadline."""

    def __init__(self) -> None:
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.stderr = CappedBuffer(16 << 10)
        self._partial = bytearray()

    def _feed(self, chunk: bytes) -> None:
        self._partial += chunk
        while (i := self._partial.find(b"\n")) >= 0:
            self.lines.put(bytes(self._partial[:i]))
            del self._partial[: i + 1]

    def receive(self, deadline: float) -> dict:
        try:
            line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            self.close()
            raise WorkerLost("the worker did not answer in time; it was killed") from None
        if line is None:
            raise WorkerLost(f"the worker ended: {self.stderr.text()[-500:].strip() or 'no message'}")
        try:
            return protocol.decode(line)
        except ValueError:
            raise WorkerLost(f"the worker wrote something that is not JSON: {line[:200]!r}") from None

    def send(self, msg: dict) -> None:
        try:
            self._write(protocol.encode(msg))
        except OSError as e:
            raise WorkerLost(f"cannot write to the worker: {e}") from None

    def _write(self, data: bytes) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class _LocalChannel(_Channel):
    def __init__(self, argv: list[str], env: dict[str, str], stderr_path: Path, marker: str):
        super().__init__()
        self.stderr_path, self.marker = stderr_path, marker.encode()
        with open(stderr_path, "wb") as err:
            self.proc = subprocess.Popen(argv, env=env, cwd="/", stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=err, start_new_session=True, close_fds=True)
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for chunk in iter(lambda: self.proc.stdout.read1(65536), b""):
            self._feed(chunk)
        with contextlib.suppress(OSError):
            self.stderr.feed(self.stderr_path.read_bytes()[-16384:])
        self.lines.put(None)

    def _write(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, 9)
        with contextlib.suppress(Exception):
            self.proc.wait(10)
        _kill_marked(self.marker)  # a child it was running lives in a session of its own
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                stream.close()


def _kill_marked(marker: bytes) -> None:
    """SIGKILL every process whose initial environment carries the worker's marker (forked children too)."""
    for _ in range(20):
        found = []
        for entry in os.scandir("/proc"):
            if entry.name.isdigit() and int(entry.name) != os.getpid():
                with contextlib.suppress(OSError), open(f"/proc/{entry.name}/environ", "rb") as f:
                    if marker in f.read().split(b"\0"):
                        found.append(int(entry.name))
        if not found:
            return
        for pid in found:
            with contextlib.suppress(OSError):
                os.kill(pid, 9)
        time.sleep(0.05)


class _DockerChannel(_Channel):
    """The attach socket of `docker exec`: our writes are the worker's stdin; its output comes in frames
    of an 8-byte header (stream 1 or 2, big-endian length) and a payload."""

    def __init__(self, sock):
        super().__init__()
        self.sock = sock
        self.raw = getattr(sock, "_sock", sock)
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        from docker.utils.socket import frames_iter

        with contextlib.suppress(Exception):  # any end of the stream is the worker's end
            for stream, data in frames_iter(self.sock, tty=False):
                if stream == 1:
                    self._feed(data)
                else:
                    self.stderr.feed(data)
        self.lines.put(None)

    def _write(self, data: bytes) -> None:
        self.raw.sendall(data)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.raw.close()
        with contextlib.suppress(Exception):
            self.sock.close()


def executor_names() -> tuple[str, ...]:
    return EXECUTORS


def make_pool(executor: str, backend: str, specs: dict[str, SandboxSpec], jobs: int) -> WorkerPool | NaivePool:
    if executor == "workers":
        return WorkerPool(backend, specs, jobs)
    if executor == "naive":
        return NaivePool(backend, specs, jobs)
    from coderun.errors import UsageError

    raise UsageError(f"unknown executor {executor!r}; use {' or '.join(EXECUTORS)}")


__all__ = ["EXECUTORS", "NaivePool", "Worker", "WorkerLost", "WorkerPool", "make_pool", "run_naive"]
