"""A sample's Evidence, built the same way for every executor (naive: runner/execute, workers: runner/executors/workers).

Evidence comes from places the sample does not write by accident or with generic tricks:
- the exit code and timeout of the test process, seen from outside (by the sandbox or the worker);
- the reporter plugin's records (harness/coderun_reporter.py), written to a channel outside the
  project copy whose path is removed from the environment before any project code is imported;
  stdout ("PASSED" lines) and junit files are never read for grading;
- a comparison of every project file after the run with the pristine tree (test files, conftest files
  and other modules changed, deleted or created), hashed after every process of the sample is dead.

What the run touched becomes typed `Finding`s: a kind (graded on) and its words (read by people, never
graded on). The words of the host's findings are the templates in `MESSAGES`; the reporter's come with
its records, next to a stable code. The verdict itself is decided elsewhere (runner/grade).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import posixpath
import time
import weakref
from dataclasses import dataclass
from pathlib import Path

from coderun.envs.testrun import files_of
from coderun.harness import HARNESS_DIR, REPORTER_FILES
from coderun.records import OUTCOME_RANK, Evidence, Finding, FindingKind, TestOutcome
from coderun.runner.corroborate import corroborate
from coderun.sandbox.base import ExecResult, Sandbox

REPORTER_MODULE = "coderun_reporter"
_REPORTER_SOURCE = HARNESS_DIR / "coderun_reporter.py"
_LOG_TAIL_LINES = 60

# Per sandbox: the folder the reporter is installed in; the differential payloads written there.
_installed: weakref.WeakKeyDictionary[Sandbox, str] = weakref.WeakKeyDictionary()
_payloads: weakref.WeakKeyDictionary[Sandbox, set[str]] = weakref.WeakKeyDictionary()

# The words of the findings the host makes. Grading never reads them (see tests/test_findings.py).
MESSAGES: dict[FindingKind, str] = {
    FindingKind.TEST_FILE_MODIFIED: "test file modified during the run: {path}",
    FindingKind.TEST_FILE_DELETED: "test file deleted during the run: {path}",
    FindingKind.PROJECT_FILE_MODIFIED: "project file modified during the run: {path}",
    FindingKind.PROJECT_FILE_DELETED: "project file deleted during the run: {path}",
    FindingKind.CONFTEST_CREATED: "conftest.py created during the run: {path}",
    FindingKind.PYTHON_FILE_CREATED: "python file created during the run: {path}",
    FindingKind.PLUGIN_REGISTERED_AT_COLLECTION: "a pytest plugin was registered while the tests were "
                                                 "collected: {name} ({file})",
    FindingKind.REPORTER_CHANNEL_OVERFLOW: "the reporter channel overflowed (over 64 MiB of records)",
}

# The codes the reporter writes in its `tamper` records; any other code is itself machinery tampering.
REPORTER_KINDS = frozenset({FindingKind.PYTEST_REPLACED, FindingKind.UNITTEST_REPLACED,
                            FindingKind.REPORTER_REPLACED, FindingKind.PLUGIN_REGISTERED_DURING_TESTS,
                            FindingKind.RUNTIME_REPLACED, FindingKind.OUTCOME_FORGED, FindingKind.TESTS_CHANGED})


@dataclass(frozen=True)
class SampleRun:
    """What one run of a sample needs besides the sandbox (kept together so callers build it once per task)."""

    relfile: str                      # the file the sample replaces, relative to the project root
    new_source: str                   # its spliced content
    nodeids: list[str]                # the mapped tests that must run and pass
    timeout: float                    # hard wall-clock limit for the whole test process
    per_test_timeout: float           # enforced inside pytest by the reporter (SIGALRM, faulthandler)
    env: dict[str, str]               # the manifest's test environment (PYTHONPATH is set here)
    pytest_args: tuple[str, ...] = () # the manifest's tests.args
    log_path: Path | None = None      # host path for the full log
    template: bool = True             # workers: configure pytest once for runs alike (pays off from the 2nd)
    differential: str | None = None   # the differential step's payload (JSON: target, inputs), run after
                                      # the tests when they all pass (harness/coderun_differential)
    files: tuple[tuple[str, str], ...] = ()  # other files written into the copy (path, text): the tests
                                             # `coderun rank --tests model` generated
    sample: bool = True               # False: `new_source` is the project's own text (a run of the original):
                                      # the file is project code to the test-code checks, not a sample's
    trusted: bool = False             # the body is coderun's own (a task build's stub or trivial body, a pass+
                                      # run): the reporter skips its test-code snapshot. Never for a sample
    collect_timeout: float = 0.0      # seconds to the end of collection (0: none); coderun's own bodies only
    cpu_per_test: float = 0.0         # CPU seconds per test (0: none); coderun's own bodies only
    prime_files: tuple[str, ...] = () # workers: the test files of the run's other samples, primed with this
                                      # one's at a worker's first sample (one collection, not one per file)


def sample_command(python: str, run: SampleRun) -> list[str]:
    """The pytest command line of a run (the workers executor passes what follows `-m pytest`)."""
    # addopts are cleared so a project's ini cannot load plugins or change reporting; whatever a
    # project really needs comes from its manifest's tests.args. xdist would move tests out of reach
    # of the reporter's process, so it is disabled.
    # The test files are collected and the reporter keeps the wanted node ids: an id that does not collect
    # is then a missing test (a failure of that test), not an argument error that runs nothing.
    # The rootdir is the tree (the cwd), as in the baseline: an ini file below it (a monorepo's
    # pkg/pytest.ini) would otherwise root the node ids there and none of the wanted ones would match.
    files = files_of(run.nodeids)
    keep = [arg for n in run.nodeids for arg in ("--coderun-keep", n)]
    return [python, "-m", "pytest", "-p", REPORTER_MODULE, "-o", "addopts=", "-q", "--tb=short",
            "-p", "no:cacheprovider", "-p", "no:xdist", "--rootdir=.", *run.pytest_args, *keep,
            *(["--coderun-sample", run.relfile] if run.sample else []), *files]


def install_reporter(sandbox: Sandbox) -> str:
    """Write the reporter into the sandbox's harness folder (once per sandbox); returns that folder."""
    harness = _installed.get(sandbox)
    if harness is None:
        harness = sandbox.harness_dir()
        files = {posixpath.join(harness, name): (HARNESS_DIR / name).read_bytes() for name in REPORTER_FILES}
        files[posixpath.join(harness, f"{REPORTER_MODULE}.py")] = _REPORTER_SOURCE.read_bytes()
        sandbox.write_files(files)
        _installed[sandbox] = harness
    return harness


def reporter_env(sandbox: Sandbox, run: SampleRun) -> dict[str, str]:
    """The reporter's variables a run adds: CODERUN_TRUSTED, a collection and a CPU limit for coderun's own bodies,
    and the one that arms the differential step, its payload written into the harness folder (once per
    sandbox and payload). The payload holds the inputs and where the function is, never what the original
    did on them: that stays on the host, so nothing a sample reads in the sandbox tells it what to answer."""
    own = {"CODERUN_TRUSTED": "1"} if run.trusted else {}
    if run.collect_timeout > 0:
        own["CODERUN_COLLECT_TIMEOUT"] = f"{run.collect_timeout:.3f}"
    if run.trusted and run.cpu_per_test > 0:
        own["CODERUN_TEST_CPU_TIMEOUT"] = f"{run.cpu_per_test:.3f}"
    if not run.differential:
        return own
    harness = install_reporter(sandbox)
    data = run.differential.encode("utf-8")
    path = posixpath.join(harness, f"coderun_diff_{hashlib.sha256(data).hexdigest()[:16]}.json")
    written = _payloads.setdefault(sandbox, set())
    if path not in written:
        sandbox.write_files({path: data})
        written.add(path)
    return {**own, "CODERUN_DIFF": path}


def read_records(report: str, token: str) -> list[dict]:
    """The reporter's JSON lines for this sample (lines without its token are ignored)."""
    out = []
    for line in report.splitlines():
        with contextlib.suppress(ValueError):
            rec = json.loads(line)
            if isinstance(rec, dict) and rec.get("token") == token:
                out.append(rec)
    return out


def build_evidence(run: SampleRun, result: ExecResult, records: list[dict], pristine: dict[str, str],
                   after: dict[str, str], *, overflowed: bool = False) -> Evidence:
    """The Evidence of a finished run: outcomes from the records, findings from the files and records."""
    outcomes, test_timed_out = _outcomes(records, result)
    findings = file_findings(pristine, after, run.relfile) + plugin_findings(records, pristine)
    if overflowed:
        findings.append(_finding(FindingKind.REPORTER_CHANNEL_OVERFLOW))
    findings += reporter_findings(records)
    if not result.timed_out and not test_timed_out:
        findings += corroborate(run.nodeids, records, result.returncode, result.stdout)
    return Evidence(expected=run.nodeids, outcomes=outcomes, exit_code=result.returncode,
                    timed_out=result.timed_out or test_timed_out, duration=result.duration,
                    log_tail=_tail(result), log_path=str(run.log_path) if run.log_path else None,
                    tampering=list(dict.fromkeys(findings)), integrity_ms=_integrity_ms(records),
                    differential=_differential(records), collect_seconds=_collect_seconds(records))


def _collect_seconds(records: list[dict]) -> float | None:
    """From the reporter's start to the end of collection (its `collected` record), None without one."""
    for rec in records:
        if rec.get("kind") == "collected":
            with contextlib.suppress(TypeError, ValueError):
                return float(rec["seconds"])
    return None


def _differential(records: list[dict]) -> dict | None:
    """The differential step's record without the channel's fields. The step writes one: more is a record
    written by someone else, and then none of them is taken (an error grade_plus fails)."""
    found = [{k: v for k, v in rec.items() if k not in ("token", "kind")} for rec in records
             if rec.get("kind") == "differential"]
    if len(found) > 1:
        return {"error": f"{len(found)} differential records on the channel (the step writes one)"}
    return found[0] if found else None


def _integrity_ms(records: list[dict]) -> float | None:
    """What the reporter's integrity check cost this run, from its finish record (None: no such record)."""
    for rec in records:
        cost = rec.get("integrity") if rec.get("kind") == "finish" else None
        if isinstance(cost, dict):
            with contextlib.suppress(TypeError, ValueError):
                return sum(float(cost.get(k, 0)) for k in ("snapshot_ms", "verify_ms", "tests_snapshot_ms",
                                                           "tests_verify_ms"))
    return None


def _finding(kind: FindingKind, **words: str) -> Finding:
    return Finding(kind=kind, detail=MESSAGES[kind].format(**words))


def _outcomes(records: list[dict], result: ExecResult) -> tuple[list[TestOutcome], bool]:
    """Per-test outcomes from `test` records; a test that began and never finished is an error
    (a timeout when the process was killed for time). Returns (outcomes, any test timed out)."""
    merged: dict[str, TestOutcome] = {}
    begun: list[str] = []
    timed_out = False
    for rec in records:
        if rec.get("kind") == "begin":
            begun.append(str(rec.get("nodeid")))
        elif rec.get("kind") == "test" and rec.get("outcome") in OUTCOME_RANK:
            t = TestOutcome(nodeid=str(rec["nodeid"]), outcome=rec["outcome"],
                            duration=float(rec.get("duration") or 0), message=str(rec.get("message") or ""))
            timed_out |= bool(rec.get("timeout"))
            prev = merged.get(t.nodeid)
            if prev is None or OUTCOME_RANK[t.outcome] > OUTCOME_RANK[prev.outcome]:
                merged[t.nodeid] = t
    unfinished = [n for n in begun if n not in merged]
    for nodeid in unfinished[-1:]:
        if result.timed_out or "Timeout (0:" in result.stderr:
            message, timed_out = "Timeout: the test was still running when its time ran out", True
        else:
            message = f"the test process ended during this test (exit code {result.returncode})"
        merged[nodeid] = TestOutcome(nodeid=nodeid, outcome="error", message=message)
    return list(merged.values()), timed_out


def file_findings(pristine: dict[str, str], after: dict[str, str], relfile: str) -> list[Finding]:
    """Project files the run changed, deleted or created (other than the spliced file itself)."""
    relfile = posixpath.normpath(relfile)
    out = []
    for path in sorted(p for p in pristine if p != relfile and after.get(p) != pristine[p]):
        deleted, test = path not in after, _is_test_machinery(path)
        kind = {(True, True): FindingKind.TEST_FILE_DELETED, (False, True): FindingKind.TEST_FILE_MODIFIED,
                (True, False): FindingKind.PROJECT_FILE_DELETED,
                (False, False): FindingKind.PROJECT_FILE_MODIFIED}[deleted, test]
        out.append(_finding(kind, path=path))
    for path in sorted(set(after) - set(pristine)):
        if posixpath.basename(path) == "conftest.py":
            out.append(_finding(FindingKind.CONFTEST_CREATED, path=path))
        elif path.endswith(".py"):
            out.append(_finding(FindingKind.PYTHON_FILE_CREATED, path=path))
    return out


def plugin_findings(records: list[dict], pristine: dict[str, str]) -> list[Finding]:
    """Plugins registered while the tests were collected, other than the pristine tree's conftest files."""
    out = []
    for rec in records:
        if rec.get("kind") == "collected":
            for plugin in rec.get("plugins") or []:
                file = str(plugin.get("file") or "")
                if posixpath.basename(file) != "conftest.py" or _in_tree(file, pristine) is None:
                    out.append(_finding(FindingKind.PLUGIN_REGISTERED_AT_COLLECTION,
                                        name=str(plugin.get("name")), file=file or "no file"))
    return out


def reporter_findings(records: list[dict]) -> list[Finding]:
    """The reporter's `tamper` records, by their code; an unknown (or missing) code is machinery tampering."""
    out = []
    for rec in records:
        if rec.get("kind") == "tamper":
            code = rec.get("code")
            known = next((k for k in REPORTER_KINDS if k.value == code), None)
            out.append(Finding(kind=known or FindingKind.UNKNOWN_REPORTER_CODE, detail=str(rec.get("what"))))
    return out


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


def write_log(run: SampleRun, evidence: Evidence, result: ExecResult | None, records: list[dict],
              note: str = "") -> None:
    """The sample's test log: what ran, the output, the reporter's records and the findings."""
    if run.log_path is None:
        return
    lines = [f"# coderun test log, {time.strftime('%Y-%m-%d %H:%M:%S')}",
             f"# file: {run.relfile}", f"# tests: {' '.join(run.nodeids)}"]
    if not run.sample:  # trusted when pass+'s calls end the run
        lines.append("# body: the project's own text" + (" (no test-code snapshot)" if run.trusted else ""))
    elif run.trusted:
        lines.append("# body: coderun's own (no test-code snapshot)")
    if note:
        lines.append(f"# {note}")
    if result is not None:
        lines += [f"# exit code: {result.returncode}  timed out: {result.timed_out}  "
                  f"truncated: {result.truncated}  duration: {result.duration:.2f}s",
                  "", "## stdout", result.stdout, "", "## stderr", result.stderr]
    lines += ["", "## reporter records"] + [json.dumps(r) for r in records]
    if evidence.tampering:
        lines += ["", "## tampering"] + [f"{f.detail}  [{f.kind.value}]" for f in evidence.tampering]
    run.log_path.parent.mkdir(parents=True, exist_ok=True)
    run.log_path.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="replace")
