"""Out-of-process corroboration: a pass the reporter's records claim is checked against the exit status,
the order of the records in the channel and pytest's summary line. Unit cases on records and output, then
samples that forge the channel itself (lines written with the reporter's token, the real ones silenced),
which the in-process integrity check cannot see, caught with both executors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sandbox_fixtures import NODEIDS, quiet, spec_for

from coderun.records import FindingKind, VerdictKind
from coderun.runner.corroborate import corroborate, summary_counts, summary_lines
from coderun.runner.evidence import SampleRun
from coderun.runner.execute import run_sample
from coderun.runner.executors import WorkerPool
from coderun.runner.grade import grade
from coderun.sandbox import create_sandbox

pytestmark = pytest.mark.integration  # a venv, a sandbox or a project's tests in every test

IDS = ["t.py::a", "t.py::b"]


def records(*extra: dict, finish: int | None = 0) -> list[dict]:
    out = [{"kind": "start"}, {"kind": "collected", "nodeids": IDS}]
    for n in IDS:
        out += [{"kind": "begin", "nodeid": n}, {"kind": "test", "nodeid": n, "outcome": "passed"}]
    out += list(extra)
    return out + ([{"kind": "finish", "exitstatus": finish}] if finish is not None else [])


def problems(recs: list[dict], stdout: str = "2 passed in 0.01s\n", code: int | None = 0) -> list[str]:
    found = corroborate(IDS, recs, code, stdout)
    assert all(f.kind is FindingKind.UNCORROBORATED for f in found)
    return [f.detail for f in found]


def test_a_consistent_pass_is_corroborated():
    assert problems(records()) == []
    assert problems(records(), "====== 2 passed, 3 deselected in 1.05 seconds ======\n") == []
    assert problems(records(), "1 xpassed, 1 passed, 2 warnings in 65.2s (0:01:05)\n") == []


@pytest.mark.parametrize("recs, stdout, words", [
    (records(finish=None), "2 passed in 0.01s", "never finished"),
    (records(finish=1), "2 passed in 0.01s", "exit status 1"),
    (records()[:2] + [{"kind": "test", "nodeid": n, "outcome": "passed"} for n in IDS]
     + [{"kind": "finish", "exitstatus": 0}], "2 passed in 0.01s", "without the begin record"),
    (records({"kind": "finish", "exitstatus": 0}, {"kind": "note"}, finish=None), "2 passed in 0.01s",
     "after the session's finish"),
    (records(), "2 failed in 0.01s", "'2 failed in 0.01s'"),
    (records(), "1 passed, 1 error in 0.01s", "1 error"),
    (records(), "1 passed in 0.01s", "'1 passed in 0.01s'"),
    (records(), "", "no summary line"),
    (records(), "2 failed in 0.01s\n2 passed in 0.01s", "2 times"),
], ids=["no-finish", "finish-status", "no-begin", "after-finish", "summary-failed", "summary-error",
        "summary-fewer", "no-summary", "two-summaries"])
def test_a_pass_the_process_did_not_write_elsewhere_is_uncorroborated(recs, stdout, words):
    found = problems(recs, stdout)
    assert found and all(words in p for p in found), found


def test_only_a_run_that_would_pass_is_checked():
    failing = records()
    failing[-2] = {"kind": "test", "nodeid": IDS[1], "outcome": "failed"}
    assert problems(failing, "") == []
    assert problems(records(finish=None), "", code=1) == []
    assert corroborate([], records(), 0, "") == []


def test_summary_lines_are_found_in_any_format():
    out = "x\n===== 1 failed, 8 passed in 0.12s =====\nlater\n3 passed in 1.00 seconds\n"
    assert summary_lines(out) == ["1 failed, 8 passed in 0.12s", "3 passed in 1.00 seconds"]
    assert summary_lines("collected 3 items\nno tests ran in 0.01s\n") == ["no tests ran in 0.01s"]
    assert summary_lines("\x1b[32m\x1b[1m2 passed\x1b[0m\x1b[32m in 0.01s\x1b[0m\n") == ["2 passed in 0.01s"]
    assert summary_lines("FAILED t.py::a - assert 2 in 3s\nassert 1 passed in 0.1s, 2\n") == []


def test_summary_with_subtests_of_pytest_9_is_corroborated():
    """pytest 9 prints "N subtests passed": the pattern of one-word categories rejected the line, and a
    project with subtests (more-itertools, pyparsing) was refused as tampering at build."""
    line = "410 passed, 23 deselected, 232 subtests passed in 8.10s"
    assert summary_counts(line) == {"passed": 410, "deselected": 23, "subtests passed": 232}
    assert corroborate(_ids(410), _passing(410), 0, line + "\n") == []
    assert problems(records(), "2 passed, 1 subtests failed in 0.01s\n")
    assert problems(records(), "2 passed, 1 rerun, 1 day in 90000.00s (1 day, 1:00:00)\n") == []


def test_summary_counts_name_categories_as_pytest_keeps_them():
    assert summary_counts("1 warning, 2 errors in 0.1s") == {"warnings": 1, "error": 2}
    assert summary_counts("2 warnings, 1 error in 0.1s") == {"warnings": 2, "error": 1}
    assert summary_counts("no tests ran in 0.01s") == {}
    assert summary_counts("collected 3 items") == {}


def _ids(n: int) -> list[str]:
    return [f"t.py::t{i}" for i in range(n)]


def _passing(n: int) -> list[dict]:
    out = [{"kind": "start"}, {"kind": "collected", "nodeids": _ids(n)}]
    for i in _ids(n):
        out += [{"kind": "begin", "nodeid": i}, {"kind": "test", "nodeid": i, "outcome": "passed"}]
    return out + [{"kind": "finish", "exitstatus": 0}]


RECORDED = sorted(Path(__file__).parent.joinpath("pytest_outputs").glob("pytest-*.json"))


@pytest.mark.parametrize("path", RECORDED, ids=[p.stem for p in RECORDED])
def test_summary_of_every_pytest_minor_reads_as_its_own_counts(path):
    """What pytest 4.6 to 9.x really print (tests/pytest_outputs/record.py), every summary item among them,
    reads as the counts its terminal reporter kept: one summary line per run, the same numbers."""
    data = json.loads(path.read_text())
    assert {r["name"] for r in data["runs"]} >= {"everything", "passes", "verbose", "collection_error"}
    for run in data["runs"]:
        lines = summary_lines(run["stdout"])
        assert len(lines) == 1, (data["pytest"], run["name"], run["stdout"][-400:])
        expected = {key: n for key, n in run["stats"].items() if n}
        assert summary_counts(lines[0]) == expected, (data["pytest"], run["name"], lines[0])
        if run["name"] == "passes":
            n = expected["passed"]
            assert corroborate(_ids(n), _passing(n), 0, run["stdout"]) == []


def test_recorded_outputs_cover_every_pytest_minor_from_4_6():
    assert len(RECORDED) == 22, [p.stem for p in RECORDED]


# Samples that forge the channel: lines with the reporter's token for every test, then the real channel
# silenced (its descriptor pointed at /dev/null), and an exit hook that leaves with status 0. Nothing in the
# harness is replaced, so only what the process wrote elsewhere can tell.
FORGE = '''import atexit, json, os, sys
_rep = sys.modules["coderun_reporter"]
def _line(**rec):
    os.write(_rep._FD, (json.dumps(dict(token=_rep._TOKEN, **rec)) + "\\n").encode())
for _n in {ids!r}:
    _line(kind="begin", nodeid=_n)
    _line(kind="test", nodeid=_n, outcome="passed", duration=0.0, message="")
_line(kind="finish", exitstatus=0)
os.dup2(os.open(os.devnull, os.O_WRONLY), _rep._FD)
atexit.register(os._exit, 0)
def add(a, b):
    {extra}raise AssertionError("wrong on purpose")
'''
FAKE_SUMMARY = "os.write(1, b'2 passed in 0.01s\\\\n'); "
SAMPLES = {"forged channel": FORGE.format(ids=NODEIDS, extra=""),
           "forged channel and summary": FORGE.format(ids=NODEIDS, extra=FAKE_SUMMARY)}


def _naive(request):
    with quiet(), create_sandbox("local", spec_for("local", request)) as sb:
        return {name: run_sample(sb, SampleRun(relfile="pkg/mod.py", new_source=code, nodeids=NODEIDS, timeout=60,
                                 per_test_timeout=10, env={})) for name, code in SAMPLES.items()}


def _workers(request):
    with WorkerPool("local", {"tiny": spec_for("local", request)}, 1) as pool:
        return {name: pool.run("tiny", SampleRun(relfile="pkg/mod.py", new_source=code, nodeids=NODEIDS,
                                                 timeout=60, per_test_timeout=10, env={}))
                for name, code in SAMPLES.items()}


@pytest.mark.parametrize("executor", [_naive, _workers], ids=["naive", "workers"])
def test_a_forged_channel_fails(request, executor):
    for name, ev in executor(request).items():
        verdict = grade(ev.expected, ev)
        # The forgery worked as far as it could: the records say pass and the process exited 0.
        assert ev.exit_code == 0 and {o.outcome for o in ev.outcomes} == {"passed"}, (name, ev)
        assert (verdict.verdict, verdict.failure) == (VerdictKind.FAIL, "other/tampering"), (name, ev)
        assert [f.kind for f in ev.tampering] == [FindingKind.UNCORROBORATED], (name, ev)
