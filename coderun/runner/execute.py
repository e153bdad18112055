"""Execute one sample: copy the project, write the spliced file, run the mapped tests, collect Evidence.

Evidence comes from places the sample does not write by accident or with generic tricks:
- the exit code and timeout of the test process, seen from outside by the sandbox;
- the reporter plugin's records (coderun/runner/harness/coderun_reporter.py), written to a file outside the
  project copy whose path is removed from the environment before any project code is imported;
  stdout ("PASSED" lines) and junit files are never read for grading;
- a comparison of every project file after the run with the pristine tree (test files, conftest files
  and other modules changed, deleted or created), done by a fresh, isolated interpreter (`python -I`)
  after every process of the sample has been killed.
The verdict itself is decided elsewhere (one pure function of task and Evidence).
"""

from __future__ import annotations

import json
import posixpath
import time
import uuid
import weakref
from dataclasses import dataclass
from pathlib import Path

from coderun.errors import SandboxError
from coderun.records import Evidence, TestOutcome
from coderun.sandbox.base import ExecResult, Sandbox

REPORTER_MODULE = "coderun_reporter"
_REPORTER_SOURCE = Path(__file__).parent / "harness" / "coderun_reporter.py"
_LOG_TAIL_LINES = 60
_RANK = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}

# Per sandbox: whether the reporter is installed, and the pristine tree's file hashes.
_installed: weakref.WeakKeyDictionary[Sandbox, str] = weakref.WeakKeyDictionary()
_pristine: weakref.WeakKeyDictionary[Sandbox, dict[str, str]] = weakref.WeakKeyDictionary()

# Run by `python -I -c` inside the sandbox after the sample's processes are dead: sha256 of every file
# (the worker's hasher too).
_HASH_SCRIPT = (Path(__file__).parent / "harness" / "coderun_hashes.py").read_text(encoding="utf-8")


@dataclass(frozen=True)
class SampleRun:
    """What `run_sample` needs besides the sandbox (kept together so callers build it once per task)."""

    relfile: str                      # the file the sample replaces, relative to the project root
    new_source: str                   # its spliced content
    nodeids: list[str]                # the mapped tests that must run and pass
    timeout: float                    # hard wall-clock limit for the whole test process
    per_test_timeout: float           # enforced inside pytest by the reporter (SIGALRM, faulthandler)
    env: dict[str, str]               # the manifest's test environment (PYTHONPATH is set here)
    pytest_args: tuple[str, ...] = () # the manifest's tests.args
    log_path: Path | None = None      # host path for the full log
    template: bool = True             # workers: configure pytest once for runs alike (pays off from the 2nd)


def run_sample(sandbox: Sandbox, *, relfile: str, new_source: str, nodeids: list[str], timeout: float,
               per_test_timeout: float, env: dict[str, str], pytest_args: list[str] | tuple[str, ...] = (),
               log_path: str | Path | None = None) -> Evidence:
    """Run `nodeids` against the project with `relfile` replaced by `new_source`; never raises for
    anything the sample does. A broken sandbox is returned as Evidence with `infra_error` set."""
    run = SampleRun(relfile, new_source, list(nodeids), timeout, per_test_timeout, dict(env),
                    tuple(pytest_args), Path(log_path) if log_path else None)
    try:
        return _run(sandbox, run)
    except SandboxError as e:
        evidence = Evidence(expected=run.nodeids, infra_error=str(e))
        _write_log(run, evidence, None, [], note=f"sandbox error: {e}")
        return evidence


def _run(sandbox: Sandbox, run: SampleRun) -> Evidence:
    harness = _install_reporter(sandbox)
    work = sandbox.new_workdir()
    removed = False
    try:
        pristine = _pristine_hashes(sandbox, work)
        sandbox.write_file(posixpath.join(work, run.relfile), run.new_source.encode("utf-8"))
        token = uuid.uuid4().hex
        report = posixpath.join(posixpath.dirname(work), f"report-{token}.jsonl")
        result = sandbox.exec(_command(sandbox, run), cwd=work, timeout=run.timeout,
                              env=_env(sandbox, run, harness, work, report, token))
        records = _read_records(sandbox, report, token)
        after = _hashes(sandbox, work)
        evidence = _evidence(run, result, records, _file_tampering(pristine, after, run.relfile, records))
        _write_log(run, evidence, result, records)
        sandbox.remove_workdir(work)
        removed = True
        return evidence
    finally:
        if not removed:
            sandbox.remove_workdir(work)


def _command(sandbox: Sandbox, run: SampleRun) -> list[str]:
    # addopts are cleared so a project's ini cannot load plugins or change reporting; whatever a
    # project really needs comes from its manifest's tests.args. xdist would move tests out of reach
    # of the reporter's process, so it is disabled.
    # The test files are collected and the reporter keeps the wanted node ids: an id that does not collect
    # is then a missing test (a failure of that test), not an argument error that runs nothing.
    # The rootdir is the tree (the cwd), as in the baseline: an ini file below it (a monorepo's
    # pkg/pytest.ini) would otherwise root the node ids there and none of the wanted ones would match.
    files = list(dict.fromkeys(n.split("::", 1)[0] for n in run.nodeids))
    keep = [arg for n in run.nodeids for arg in ("--coderun-keep", n)]
    return [sandbox.python, "-m", "pytest", "-p", REPORTER_MODULE, "-o", "addopts=", "-q", "--tb=short",
            "-p", "no:cacheprovider", "-p", "no:xdist", "--rootdir=.", *run.pytest_args, *keep, *files]


def _env(sandbox: Sandbox, run: SampleRun, harness: str, work: str, report: str, token: str) -> dict[str, str]:
    env = {k: v for k, v in run.env.items() if k != "PYTHONPATH"}
    import_root = posixpath.join(work, sandbox.spec.import_root) if sandbox.spec.import_root else work
    env.update({
        # the harness first: a module the sample drops in its tree cannot shadow the reporter
        "PYTHONPATH": f"{harness}:{import_root}",
        "CODERUN_REPORT": report,
        "CODERUN_REPORT_TOKEN": token,
        "CODERUN_TEST_TIMEOUT": f"{max(run.per_test_timeout, 0):g}",
    })
    return env


def _install_reporter(sandbox: Sandbox) -> str:
    harness = _installed.get(sandbox)
    if harness is None:
        harness = sandbox.harness_dir()
        sandbox.write_file(posixpath.join(harness, f"{REPORTER_MODULE}.py"), _REPORTER_SOURCE.read_bytes())
        _installed[sandbox] = harness
    return harness


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


def _read_records(sandbox: Sandbox, report: str, token: str) -> list[dict]:
    try:
        raw = sandbox.read_file(report)
    except FileNotFoundError:
        return []
    records = []
    for line in raw.decode("utf-8", "replace").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and rec.get("token") == token:
            records.append(rec)
    return records


def _outcomes(records: list[dict], result: ExecResult) -> tuple[list[TestOutcome], bool]:
    """Per-test outcomes from `test` records; a test that began and never finished is an error
    (a timeout when the process was killed for time). Returns (outcomes, any test timed out)."""
    merged: dict[str, TestOutcome] = {}
    begun: list[str] = []
    timed_out = False
    for rec in records:
        if rec.get("kind") == "begin":
            begun.append(str(rec.get("nodeid")))
        elif rec.get("kind") == "test" and rec.get("outcome") in _RANK:
            t = TestOutcome(nodeid=str(rec["nodeid"]), outcome=rec["outcome"],
                            duration=float(rec.get("duration") or 0), message=str(rec.get("message") or ""))
            timed_out |= bool(rec.get("timeout"))
            prev = merged.get(t.nodeid)
            if prev is None or _RANK[t.outcome] > _RANK[prev.outcome]:
                merged[t.nodeid] = t
    unfinished = [n for n in begun if n not in merged]
    for nodeid in unfinished[-1:]:
        if result.timed_out or "Timeout (0:" in result.stderr:
            message, timed_out = "Timeout: the test was still running when its time ran out", True
        else:
            message = f"the test process ended during this test (exit code {result.returncode})"
        merged[nodeid] = TestOutcome(nodeid=nodeid, outcome="error", message=message)
    return list(merged.values()), timed_out


def _evidence(run: SampleRun, result: ExecResult, records: list[dict], tampering: list[str]) -> Evidence:
    outcomes, test_timed_out = _outcomes(records, result)
    tampering = tampering + [str(r.get("what")) for r in records if r.get("kind") == "tamper"]
    return Evidence(expected=run.nodeids, outcomes=outcomes, exit_code=result.returncode,
                    timed_out=result.timed_out or test_timed_out, duration=result.duration,
                    log_tail=_tail(result), log_path=str(run.log_path) if run.log_path else None,
                    tampering=list(dict.fromkeys(tampering)))


def _file_tampering(pristine: dict[str, str], after: dict[str, str], relfile: str,
                    records: list[dict]) -> list[str]:
    """Project files the run changed, deleted or created (other than the spliced file itself)."""
    relfile = posixpath.normpath(relfile)
    notes = []
    changed = sorted(p for p in pristine if p != relfile and after.get(p) != pristine[p])
    for path in changed:
        what = "deleted" if path not in after else "modified"
        kind = "test file" if _is_test_machinery(path) else "project file"
        notes.append(f"{kind} {what} during the run: {path}")
    for path in sorted(set(after) - set(pristine)):
        if posixpath.basename(path) == "conftest.py":
            notes.append(f"conftest.py created during the run: {path}")
        elif path.endswith(".py"):
            notes.append(f"python file created during the run: {path}")
    for rec in records:
        if rec.get("kind") == "collected":
            for plugin in rec.get("plugins") or []:
                file = str(plugin.get("file") or "")
                rel = _in_tree(file, pristine)
                if posixpath.basename(file) != "conftest.py" or rel is None:
                    notes.append(f"a pytest plugin was registered while the tests were collected: "
                                 f"{plugin.get('name')} ({file or 'no file'})")
    return notes


def _in_tree(path: str, pristine: dict[str, str]) -> str | None:
    """`path` relative to the copy when it names a file of the pristine tree."""
    parts = path.replace("\\", "/").split("/")
    for i in range(1, len(parts)):
        rel = "/".join(parts[i:])
        if rel in pristine:
            return rel
    return None


def _is_test_machinery(path: str) -> bool:
    name = posixpath.basename(path)
    return (name == "conftest.py" or name.startswith("test_") or name.endswith("_test.py")
            or "tests/" in f"/{path}" or "/test/" in f"/{path}"
            or name in ("pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml"))


def _tail(result: ExecResult) -> str:
    text = result.stdout.rstrip() + ("\n--- stderr ---\n" + result.stderr.rstrip() if result.stderr.strip() else "")
    return "\n".join(text.splitlines()[-_LOG_TAIL_LINES:])


def _write_log(run: SampleRun, evidence: Evidence, result: ExecResult | None, records: list[dict],
               note: str = "") -> None:
    if run.log_path is None:
        return
    lines = [f"# coderun test log, {time.strftime('%Y-%m-%d %H:%M:%S')}",
             f"# file: {run.relfile}", f"# tests: {' '.join(run.nodeids)}"]
    if note:
        lines.append(f"# {note}")
    if result is not None:
        lines += [f"# exit code: {result.returncode}  timed out: {result.timed_out}  "
                  f"truncated: {result.truncated}  duration: {result.duration:.2f}s",
                  "", "## stdout", result.stdout, "", "## stderr", result.stderr]
    lines += ["", "## reporter records"] + [json.dumps(r) for r in records]
    if evidence.tampering:
        lines += ["", "## tampering"] + evidence.tampering
    run.log_path.parent.mkdir(parents=True, exist_ok=True)
    run.log_path.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="replace")
