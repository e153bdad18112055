"""The workers executor (the default): one long-lived worker per (project, slot), inside a sandbox
started once (coderun/harness/coderun_worker.py), through `Sandbox.start_process` and the
sandbox's `worker_layout`. It has imported pytest already and forks a child per sample; the child runs
the same node ids through `pytest.main` on a private, pristine copy of the project (written fresh, or put
back after the previous sample: coderun_folders.Folder), with the limits, scrubbed environment, reporter
channel, timeout and leftover-process killing of the naive path. The evidence (exit code seen by the
worker, reporter records read from a pipe, hashes of the copy after the run) goes through the same `grade`.

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
import threading
import time
import uuid
import warnings
from dataclasses import replace

from coderun.errors import SandboxError
from coderun.harness import HARNESS_DIR, WORKER_FILES
from coderun.harness import coderun_protocol as protocol
from coderun.records import Evidence
from coderun.runner.evidence import (
    SampleRun,
    build_evidence,
    install_reporter,
    read_records,
    reporter_env,
    sample_command,
    write_log,
)
from coderun.runner.executors.naive import run_naive
from coderun.sandbox import Sandbox, SandboxSpec, create_sandbox
from coderun.sandbox.base import ExecResult
from coderun.sandbox.process import SandboxProcess

WORKER_MODULE = "coderun_worker"
_HELLO_TIMEOUT = 180.0      # importing pytest in a cold container
_GRACE = 30.0               # past a sample's own limit before the host kills the worker
_BASE_ENV = {"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"}


class WorkerLost(Exception):
    """The worker could not start, died, or did not answer in time: the sample goes to the naive path."""


def _template_key(run: SampleRun) -> tuple | None:
    """What the worker's template is made for (coderun_template keys it by the same: the arguments, which name
    the tests, the environment and the file replaced); None for a run without one: the worker then keeps none."""
    return (run.relfile, run.pytest_args, tuple(run.nodeids), tuple(sorted(run.env.items()))) if run.template else None


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
        worker = self._lend(project, _template_key(run))
        try:
            worker.ensure_started(run.env)
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

    def prestart(self, project: str, env: dict[str, str], count: int) -> None:
        """Start up to `count` workers of `project` in the background, ahead of its first runs (a task build
        starts them while its recording runs on one core); a run lent one waits for its start to end."""
        with self._lock:
            if project in self._broken:
                return
            for _ in range(count - sum(1 for w in self._all if w.spec.project == project)):
                worker = self._new(project)
                self._free[project].append(worker)
                worker.start_in_background(env)

    def _new(self, project: str) -> Worker:
        """A worker for the project's next slot (the pool's lock held)."""
        slot = sum(1 for w in self._all if w.spec.project == project)
        worker = Worker(self.backend, replace(self.specs[project], slot=slot))
        self._all.append(worker)
        return worker

    def _lend(self, project: str, key: tuple | None) -> Worker:
        """A free worker, the one whose template fits the run if one does (its runs fork from it), else the
        last returned; a new one when none is free."""
        with self._lock:
            free = self._free[project]
            if free:
                fits = [i for i, w in enumerate(free) if w.template_key == key] if key is not None else []
                return free.pop(fits[-1] if fits else -1)
            return self._new(project)

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
        self.template_key: tuple | None = None   # the template the worker keeps, if any (_template_key)
        self._starting: threading.Thread | None = None   # start_in_background's
        self._start_error: Exception | None = None

    def start_in_background(self, env: dict[str, str]) -> None:
        self._starting = threading.Thread(target=self._start_kept, args=(env,), daemon=True,
                                          name=f"coderun-worker-start-{self.spec.project}-{self.spec.slot}")
        self._starting.start()

    def _start_kept(self, env: dict[str, str]) -> None:
        try:
            self.start(env)
        except (WorkerLost, SandboxError) as e:  # raised again to the run that is lent this worker
            self._start_error = e

    def ensure_started(self, env: dict[str, str]) -> None:
        """Started: by the background start under way (its failure raised here, once), else now."""
        self._join_start()
        if self._start_error is not None:
            error, self._start_error = self._start_error, None
            raise error
        if not self.started:
            self.start(env)

    def _join_start(self) -> None:
        if self._starting is not None:
            self._starting.join()
            self._starting = None

    def start(self, env: dict[str, str]) -> None:
        """Start the sandbox (once) and the worker process in it; wait for its hello."""
        self.env = {k: v for k, v in env.items() if k != "PYTHONPATH"}
        try:
            if self.sandbox is None:
                self.sandbox = create_sandbox(self.backend, self.spec)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    self.sandbox.start()
            harness = install_reporter(self.sandbox)
            self.sandbox.write_files({f"{harness}/{name}": (HARNESS_DIR / name).read_bytes() for name in WORKER_FILES})
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
        cfg = {"harness": harness, "import_root": self.spec.import_root, "marker": marker,
               "base_env": {"PATH": self._path(), **_BASE_ENV}}
        layout = self.sandbox.worker_layout()
        cfg.update(layout.config())
        name, value = marker.split("=")
        env = {**cfg["base_env"], **self.sandbox.with_services(self.env), name: value,
               "HOME": layout.home, "TMPDIR": layout.home}
        argv = [self.spec.python, f"{harness}/{WORKER_MODULE}.py", json.dumps(cfg)]
        channel = _Channel(self.sandbox.start_process(argv, env=env, marker=marker))
        channel.send_tree(_pristine_tree(self.sandbox))
        return channel

    def _path(self) -> str:
        return f"{os.path.dirname(self.spec.python)}:/usr/local/bin:/usr/bin:/bin"

    def run(self, run: SampleRun) -> Evidence:
        token = uuid.uuid4().hex
        req = protocol.run_request(
            token, run.relfile, run.new_source, run.nodeids, timeout=run.timeout,
            per_test_timeout=max(run.per_test_timeout, 0),
            env={**self.sandbox.with_services({k: v for k, v in run.env.items() if k != "PYTHONPATH"}),
                 **reporter_env(self.sandbox, run)},
            args=sample_command(self.sandbox.python, run)[3:], output_limit=self.spec.limits.output_limit,
            template=run.template, files=dict(run.files), prime=list(run.prime_files))
        self.channel.send(req)
        self.template_key = _template_key(run)
        msg = self.channel.receive(time.monotonic() + run.timeout + _GRACE)
        answer = protocol.parse_result(msg, token)
        if answer is None:
            raise WorkerLost(f"the worker answered {str(msg)[:300]}")
        result = ExecResult(returncode=answer.returncode, stdout=answer.stdout, stderr=answer.stderr,
                            timed_out=answer.timed_out, truncated=answer.truncated, duration=answer.duration)
        records = read_records(answer.report, token)
        evidence = build_evidence(run, result, records, self.pristine, answer.after,
                                  overflowed=answer.report_truncated)
        timing = " ".join(f"{k} {v:.3f}s" for k, v in answer.timing.items())
        shared = "; pytest configured once for the task" if answer.template else ""
        write_log(run, evidence, result, records, note=f"executor: workers (worker pid {self.pid}, "
                  f"{self.backend} slot {self.spec.slot}; {timing}{shared})")
        return evidence

    def close(self) -> None:
        """Stop the worker and remove its sandbox."""
        self._join_start()
        if self.channel is not None:
            self.channel.close()
            self.channel = None
        if self.sandbox is not None:
            with contextlib.suppress(Exception):
                self.sandbox.close()
            self.sandbox = None
        self.started = False


_trees: dict[tuple[str, str, str | None], bytes] = {}   # the trees of the projects under way, read once
_trees_lock = threading.Lock()
_TREES_KEPT = 4


def _pristine_tree(sandbox: Sandbox) -> bytes:
    key = (sandbox.spec.project, sandbox.spec.project_dir, sandbox.spec.image)
    with _trees_lock:
        if key not in _trees:
            while len(_trees) >= _TREES_KEPT:  # units of a project run together: the oldest is done
                del _trees[next(iter(_trees))]
            _trees[key] = sandbox.pristine_tree()
        return _trees[key]


class _Channel:
    """JSON lines to and from a worker over its SandboxProcess; WorkerLost at EOF or at the deadline."""

    def __init__(self, process: SandboxProcess):
        self.process = process

    def receive(self, deadline: float) -> dict:
        try:
            line = self.process.read_line(deadline)
        except TimeoutError:
            self.close()
            raise WorkerLost("the worker did not answer in time; it was killed") from None
        if line is None:
            raise WorkerLost(f"the worker ended: {self.process.stderr_tail() or 'no message'}")
        try:
            return protocol.decode(line)
        except ValueError:
            raise WorkerLost(f"the worker wrote something that is not JSON: {line[:200]!r}") from None

    def send(self, msg: dict) -> None:
        try:
            self.process.send(protocol.encode(msg))
        except OSError as e:
            raise WorkerLost(f"cannot write to the worker: {e}") from None

    def send_tree(self, tree: bytes) -> None:
        """The pristine tree, the worker's first message (see coderun_protocol.tree_header)."""
        try:
            self.process.send(protocol.encode(protocol.tree_header(len(tree))) + tree)
        except OSError as e:
            raise WorkerLost(f"cannot write the project tree to the worker: {e}") from None

    def close(self) -> None:
        self.process.close()


__all__ = ["Worker", "WorkerLost", "WorkerPool"]
