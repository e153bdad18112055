"""Run one sample in a sandbox with `sandbox.exec` (the naive path): copy the project, write the spliced
file, run the mapped tests, and build its Evidence (runner/evidence, shared with the workers executor).

The files of the copy are hashed before and after the run by a fresh, isolated interpreter (`python -I`)
inside the sandbox, after every process of the sample has been killed.
The verdict itself is decided elsewhere (one pure function of task and Evidence).
"""

from __future__ import annotations

import json
import posixpath
import uuid
import weakref

from coderun.errors import SandboxError
from coderun.harness import HARNESS_DIR
from coderun.records import Evidence
from coderun.runner import evidence
from coderun.runner.evidence import SampleRun
from coderun.sandbox.base import Sandbox

__all__ = ["SampleRun", "run_sample"]

# Per sandbox: the pristine tree's file hashes.
_pristine: weakref.WeakKeyDictionary[Sandbox, dict[str, str]] = weakref.WeakKeyDictionary()

# Run by `python -I -c` inside the sandbox after the sample's processes are dead: sha256 of every file
# (the worker's hasher too).
_HASH_SCRIPT = (HARNESS_DIR / "coderun_hashes.py").read_text(encoding="utf-8")


def run_sample(sandbox: Sandbox, run: SampleRun) -> Evidence:
    """Run `run.nodeids` against the project with `run.relfile` replaced by `run.new_source` (and
    `run.files` written beside it); never raises for anything the sample does. A broken sandbox is
    returned as Evidence with `infra_error` set."""
    try:
        return _run(sandbox, run)
    except SandboxError as e:
        ev = Evidence(expected=run.nodeids, infra_error=str(e))
        evidence.write_log(run, ev, None, [], note=f"sandbox error: {e}")
        return ev


def _run(sandbox: Sandbox, run: SampleRun) -> Evidence:
    harness = evidence.install_reporter(sandbox)
    work = sandbox.new_workdir()
    removed = False
    try:
        pristine = _pristine_hashes(sandbox, work)
        sandbox.write_file(posixpath.join(work, run.relfile), run.new_source.encode("utf-8"))
        for rel, text in run.files:
            sandbox.write_file(posixpath.join(work, rel), text.encode("utf-8"))
        token = uuid.uuid4().hex
        report = posixpath.join(posixpath.dirname(work), f"report-{token}.jsonl")
        result = sandbox.exec(evidence.sample_command(sandbox.python, run), cwd=work, timeout=run.timeout,
                              env=_env(sandbox, run, harness, work, report, token))
        records = evidence.read_records(_read_report(sandbox, report), token)
        ev = evidence.build_evidence(run, result, records, pristine, _hashes(sandbox, work))
        evidence.write_log(run, ev, result, records)
        sandbox.remove_workdir(work)
        removed = True
        return ev
    finally:
        if not removed:
            sandbox.remove_workdir(work)


def _env(sandbox: Sandbox, run: SampleRun, harness: str, work: str, report: str, token: str) -> dict[str, str]:
    env = {k: v for k, v in run.env.items() if k != "PYTHONPATH"}
    import_root = posixpath.join(work, sandbox.spec.import_root) if sandbox.spec.import_root else work
    env.update({
        # the harness first: a module the sample drops in its tree cannot shadow the reporter
        "PYTHONPATH": f"{harness}:{import_root}",
        "CODERUN_REPORT": report,
        "CODERUN_REPORT_TOKEN": token,
        "CODERUN_TEST_TIMEOUT": f"{max(run.per_test_timeout, 0):g}",
        **evidence.reporter_env(sandbox, run),
    })
    return env


def _hashes(sandbox: Sandbox, work: str) -> dict[str, str]:
    result = sandbox.exec([sandbox.python, "-I", "-c", _HASH_SCRIPT, work], cwd=posixpath.dirname(work),
                          timeout=300, output_limit=256 << 20)
    try:
        if result.returncode != 0 or result.truncated:
            raise ValueError(result.stderr[-500:])
        return json.loads(result.stdout)
    except ValueError as e:
        raise SandboxError(f"cannot list the files of the sample's copy: {e}") from None


def _pristine_hashes(sandbox: Sandbox, work: str) -> dict[str, str]:
    """The fresh copy's hashes, computed once per sandbox (every copy of the pristine tree is equal)."""
    if sandbox not in _pristine:
        _pristine[sandbox] = _hashes(sandbox, work)
    return _pristine[sandbox]


def _read_report(sandbox: Sandbox, report: str) -> str:
    try:
        return sandbox.read_file(report).decode("utf-8", "replace")
    except FileNotFoundError:
        return ""
