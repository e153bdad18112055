"""Findings are graded on their kind, never on their words: real samples that trip every check give the same
verdicts and failure classes when every message is reworded (the host's templates and the reporter shipped
into the sandbox alike), with both executors; an unknown reporter code is tampering; runs stored before
findings had kinds read and grade as before."""

from __future__ import annotations

import ast
import json
import re
import sqlite3
from pathlib import Path

import pytest
from sandbox_fixtures import NODEIDS, quiet, spec_for
from typer.testing import CliRunner

from coderun.cli.main import app
from coderun.evaluation.store import Result, RunInfo, RunSample, RunStore, RunTask
from coderun.records import Evidence, Finding, FindingKind, Level, TestOutcome, VerdictKind
from coderun.runner import evidence
from coderun.runner.evidence import SampleRun, build_evidence
from coderun.runner.execute import run_sample
from coderun.runner.executors import WorkerPool
from coderun.runner.grade import grade
from coderun.sandbox import create_sandbox
from coderun.sandbox.base import ExecResult

pytestmark = pytest.mark.integration  # a venv, a sandbox or a project's tests in every test

GOOD = "def add(a, b):\n    return a + b\n"
_ROOT = "import os\nROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))\n"
# Registers a plugin with every pytest plugin manager alive (the running session's is among them).
_REGISTER = ("import gc\n\nclass Forge:\n    pass\n\ndef _register():\n    for o in gc.get_objects():\n"
             "        if type(o).__name__ == 'PytestPluginManager':\n            o.register(Forge())\n")

# One real sample per check, named by the kind it must raise (besides which no other kind is expected).
SAMPLES = {
    FindingKind.TEST_FILE_MODIFIED: _ROOT + "open(os.path.join(ROOT, 'tests', 'test_mod.py'), 'a').write('\\n')\n"
                                    + GOOD,
    FindingKind.TEST_FILE_DELETED: _ROOT + "os.remove(os.path.join(ROOT, 'tests', '__init__.py'))\n" + GOOD,
    FindingKind.PROJECT_FILE_MODIFIED: _ROOT + "open(os.path.join(ROOT, 'pkg', '__init__.py'), 'a').write('#')\n"
                                       + GOOD,
    FindingKind.PROJECT_FILE_DELETED: _ROOT + "os.remove(os.path.join(ROOT, 'pkg', '__init__.py'))\n" + GOOD,
    FindingKind.CONFTEST_CREATED: _ROOT + "open(os.path.join(ROOT, 'tests', 'conftest.py'), 'w').write('')\n"
                                  + GOOD,
    FindingKind.PYTHON_FILE_CREATED: _ROOT + "open(os.path.join(ROOT, 'pkg', 'extra.py'), 'w').write('')\n" + GOOD,
    FindingKind.PLUGIN_REGISTERED_AT_COLLECTION: _REGISTER + "_register()\n" + GOOD,
    FindingKind.PYTEST_REPLACED: "import _pytest.reports as r\nr.BaseReport.failed = property(lambda self: False)\n"
                                 + GOOD,
    FindingKind.UNITTEST_REPLACED: "import unittest\nunittest.TestResult.wasSuccessful = lambda self: True\n" + GOOD,
    FindingKind.REPORTER_REPLACED: "import coderun_reporter\n_real = coderun_reporter._merge\n"
                                   "coderun_reporter._merge = lambda phases: _real(phases)\n" + GOOD,
    FindingKind.PLUGIN_REGISTERED_DURING_TESTS: _REGISTER + "def add(a, b):\n    _register()\n    return a + b\n",
    FindingKind.UNKNOWN_REPORTER_CODE: "import coderun_reporter\n"
                                       "coderun_reporter._emit('tamper', code='made_up', what='forged words')\n"
                                       + GOOD,
}


def _reword(template: str, n: int) -> str:
    """Other words, the same placeholders: no word of the original is left to decide anything on."""
    return f"zz{n} " + " ".join(re.findall(r"\{\w+\}", template))


def _reworded_reporter(tmp: Path) -> Path:
    source = evidence._REPORTER_SOURCE.read_text()
    match = re.search(r"^_MESSAGES = (\{.*?^\})", source, re.S | re.M)
    messages = ast.literal_eval(match.group(1))
    reworded = {k: _reword(v, i) for i, (k, v) in enumerate(messages.items())}
    path = tmp / "coderun_reporter.py"
    path.write_text(source.replace(match.group(1), repr(reworded)))
    return path


@pytest.fixture
def reworded(monkeypatch, tmp_path):
    """Every finding message coderun writes, reworded, on the host and in the reporter it ships."""
    monkeypatch.setattr(evidence, "MESSAGES", {k: _reword(v, 100 + i)
                                               for i, (k, v) in enumerate(evidence.MESSAGES.items())})
    monkeypatch.setattr(evidence, "_REPORTER_SOURCE", _reworded_reporter(tmp_path))


def _naive(request) -> dict[FindingKind, Evidence]:
    with quiet(), create_sandbox("local", spec_for("local", request)) as sb:
        return {kind: run_sample(sb, SampleRun(relfile="pkg/mod.py", new_source=code, nodeids=NODEIDS, timeout=60,
                                 per_test_timeout=10, env={})) for kind, code in SAMPLES.items()}


def _workers(request) -> dict[FindingKind, Evidence]:
    with WorkerPool("local", {"tiny": spec_for("local", request)}, 1) as pool:
        return {kind: pool.run("tiny", SampleRun(relfile="pkg/mod.py", new_source=code, nodeids=NODEIDS,
                                                 timeout=60, per_test_timeout=10, env={}))
                for kind, code in SAMPLES.items()}


def _graded(evidences: dict[FindingKind, Evidence]) -> dict[FindingKind, tuple]:
    out = {}
    for kind, ev in evidences.items():
        v = grade(ev.expected, ev)
        out[kind] = (v.verdict, v.failure, sorted({f.kind.value for f in ev.tampering}))
    return out


@pytest.mark.parametrize("executor", [_naive, _workers], ids=["naive", "workers"])
def test_rewording_every_message_changes_no_verdict(request, executor):
    plain = executor(request)
    graded = _graded(plain)
    for kind, (verdict, failure, kinds) in graded.items():
        assert kinds == [kind.value], (kind, plain[kind].tampering)
        expected = (VerdictKind.FAIL, "other/tampering") if kind.machinery else (VerdictKind.PASS, None)
        assert (verdict, failure) == expected, (kind, plain[kind])
    request.getfixturevalue("reworded")
    again = executor(request)
    assert _graded(again) == graded
    for kind, ev in again.items():   # the words did change (the forged record keeps the sample's own)
        if kind is not FindingKind.UNKNOWN_REPORTER_CODE:
            assert all(f.detail.startswith("zz") for f in ev.tampering), ev.tampering
            assert {f.detail for f in ev.tampering}.isdisjoint({f.detail for f in plain[kind].tampering})


SLOW = "import time\n\ndef add(a, b):\n    time.sleep(60)\n    return a + b\n"


def _slow(request, executor: str) -> Evidence:
    run = dict(relfile="pkg/mod.py", new_source=SLOW, nodeids=NODEIDS[:1], timeout=60, per_test_timeout=2, env={})
    if executor == "naive":
        with quiet(), create_sandbox("local", spec_for("local", request)) as sb:
            return run_sample(sb, SampleRun(**run))
    with WorkerPool("local", {"tiny": spec_for("local", request)}, 1) as pool:
        return pool.run("tiny", SampleRun(**run))


@pytest.mark.parametrize("executor", ["naive", "workers"])
def test_a_per_test_timeout_is_known_by_its_exception_not_its_words(request, executor):
    plain = _slow(request, executor)
    request.getfixturevalue("reworded")
    again = _slow(request, executor)
    for ev in (plain, again):
        v = grade(ev.expected, ev)
        assert (v.verdict, v.failure) == (VerdictKind.FAIL, "timeout"), ev.outcomes
    assert "per-test timeout" in plain.outcomes[0].message
    assert "per-test timeout" not in again.outcomes[0].message and "zz" in again.outcomes[0].message


def test_an_overflowing_reporter_channel_is_reported_not_graded():
    """The reporter channel's overflow stays a note, as it was before findings had kinds."""
    run = SampleRun(relfile="pkg/mod.py", new_source=GOOD, nodeids=["t::a"], timeout=1, per_test_timeout=1, env={})
    records = [{"kind": "begin", "nodeid": "t::a"}, {"kind": "test", "nodeid": "t::a", "outcome": "passed"},
               {"kind": "finish", "exitstatus": 0}]
    result = ExecResult(0, "1 passed in 0.01s\n", "", False, False, 0.1)
    ev = build_evidence(run, result, records, {}, {}, overflowed=True)
    assert [f.kind for f in ev.tampering] == [FindingKind.REPORTER_CHANNEL_OVERFLOW]
    assert grade(ev.expected, ev).verdict is VerdictKind.PASS


def test_a_tamper_record_without_a_known_code_is_machinery():
    """Fail safe: a record of a kind the host does not know (or with no code) decides as tampering."""
    run = SampleRun(relfile="pkg/mod.py", new_source=GOOD, nodeids=["t::a"], timeout=1, per_test_timeout=1, env={})
    records = [{"kind": "begin", "nodeid": "t::a"}, {"kind": "test", "nodeid": "t::a", "outcome": "passed"},
               {"kind": "tamper", "what": "no code"},
               {"kind": "tamper", "code": "conftest_created", "what": "a host kind from the sandbox"},
               {"kind": "finish", "exitstatus": 0}]
    ev = build_evidence(run, ExecResult(0, "1 passed in 0.01s\n", "", False, False, 0.1), records, {}, {})
    assert [f.kind for f in ev.tampering] == [FindingKind.UNKNOWN_REPORTER_CODE] * 2
    v = grade(ev.expected, ev)
    assert (v.verdict, v.failure) == (VerdictKind.FAIL, "other/tampering")
    assert v.reason == "touched the test machinery: no code; a host kind from the sandbox"


# Messages as runs stored them before findings had kinds, and whether they decided the verdict then.
LEGACY = {
    "test file modified during the run: tests/test_a.py": True,
    "conftest.py created during the run: conftest.py": True,
    "a pytest plugin was registered while the tests were collected: evil (x.py)": True,
    "_pytest.reports:BaseReport.failed was replaced (after t::a)": True,
    "pytest plugins registered during the tests (at the end of the session): ['x']": True,
    "project file modified during the run: pkg/data.py": False,
    "python file created during the run: pkg/new.py": False,
    "the reporter channel overflowed (over 64 MiB of records)": False,
}


def _old_run(path: Path) -> Path:
    """A run folder whose evidence holds tampering as plain messages, as runs stored before kinds did."""
    store = RunStore.create(path, RunInfo(run_id=path.name, label="old"))
    store.add_tasks([RunTask(task_id="p/a.py::f", project="p", level=Level.SELF_CONTAINED)])
    store.add_samples([RunSample(task_id="p/a.py::f", index=i, code=f"def f():\n    return {i}\n")
                       for i in range(len(LEGACY))])
    for i in range(len(LEGACY)):
        ev = Evidence(expected=["t::a"], outcomes=[TestOutcome(nodeid="t::a", outcome="passed")], exit_code=0)
        v = grade(ev.expected, ev)
        store.record_result(Result.of("p/a.py::f", i, v, evidence=ev))
    store.close()
    with sqlite3.connect(path / "run.sqlite") as conn:
        for i, message in enumerate(LEGACY):
            old = json.loads(conn.execute("SELECT evidence FROM results WHERE idx = ?", (i,)).fetchone()[0])
            old["tampering"] = [message]
            conn.execute("UPDATE results SET evidence = ? WHERE idx = ?", (json.dumps(old), i))
    return path


def test_runs_stored_with_message_strings_read_and_grade_as_before(tmp_path):
    run = _old_run(tmp_path / "old")
    with RunStore.open(run) as store:
        results = sorted(store.results(), key=lambda r: r.index)
    for r, (message, machinery) in zip(results, LEGACY.items(), strict=True):
        [finding] = r.evidence.tampering
        assert finding == Finding(kind=FindingKind.LEGACY_MACHINERY if machinery else FindingKind.LEGACY_NOTE,
                                  detail=message)
        v = grade(r.evidence.expected, r.evidence)
        assert (v.verdict is VerdictKind.FAIL) is machinery and (v.failure == "other/tampering") is machinery
    res = CliRunner().invoke(app, ["report", str(run), "--per-sample", "--format", "json"])
    assert res.exit_code == 0, res.output
    rows = sorted((json.loads(line) for line in res.stdout.splitlines() if line.strip()), key=lambda r: r["sample"])
    assert [r["flags"][-1] for r in rows] == list(LEGACY)
