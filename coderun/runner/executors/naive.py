"""The naive executor: for every sample a sandbox of its own (a fresh container with docker, a fresh
folder and process tree with local), a fresh copy of the project, `python -m pytest` on the task's mapped
node ids, then the sandbox is torn down. No sharing of anything between samples; what CoderEval's platform
did, kept as the reference for correctness and speed, and the workers executor's fallback."""

from __future__ import annotations

import contextlib
import uuid
import warnings
from dataclasses import replace

from coderun.errors import SandboxError
from coderun.records import Evidence
from coderun.runner.evidence import SampleRun
from coderun.runner.execute import run_sample
from coderun.sandbox import SandboxSpec, create_sandbox


def run_naive(backend: str, spec: SandboxSpec, run: SampleRun, note: str = "") -> Evidence:
    """One sample in a sandbox of its own, started for it and torn down after it."""
    sb = create_sandbox(backend, replace(spec, slot=1000 + int(uuid.uuid4().int % 1000)))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the CLI says once that local does not isolate
            sb.start()
        evidence = run_sample(sb, run)
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
