"""The verdict function: pass only when every expected test ran and passed."""

from __future__ import annotations

from coderun.records import Evidence, Finding, FindingKind, TestOutcome, VerdictKind
from coderun.runner.grade import grade, grade_unspliceable

EXPECTED = ["tests/test_a.py::test_one", "tests/test_a.py::test_two"]


def _ev(*outcomes: tuple[str, str], **kw) -> Evidence:
    return Evidence(expected=EXPECTED, outcomes=[TestOutcome(nodeid=n, outcome=o) for n, o in outcomes], **kw)


def test_all_expected_passed_is_a_pass():
    v = grade(EXPECTED, _ev((EXPECTED[0], "passed"), (EXPECTED[1], "passed"), exit_code=0))
    assert v.verdict is VerdictKind.PASS and v.failure is None


def test_missing_expected_test_is_a_fail():
    """A test that never reported (the sample exited early, or removed it) must not count as passed."""
    v = grade(EXPECTED, _ev((EXPECTED[0], "passed")))
    assert v.verdict is VerdictKind.FAIL and "did not run" in v.reason


def test_skipped_expected_test_is_a_fail():
    v = grade(EXPECTED, _ev((EXPECTED[0], "passed"), (EXPECTED[1], "skipped")))
    assert v.verdict is VerdictKind.FAIL


def test_errored_test_is_a_fail():
    v = grade(EXPECTED, _ev((EXPECTED[0], "passed"), (EXPECTED[1], "error")))
    assert v.verdict is VerdictKind.FAIL and "error" in v.reason


def test_extra_passing_tests_do_not_stand_in_for_expected_ones():
    v = grade(EXPECTED, _ev((EXPECTED[0], "passed"), ("tests/test_fake.py::test_two", "passed")))
    assert v.verdict is VerdictKind.FAIL


def test_a_later_failing_record_of_the_same_test_wins():
    """A call that passed and a teardown that errored is not a pass."""
    v = grade(EXPECTED, _ev((EXPECTED[0], "passed"), (EXPECTED[1], "passed"), (EXPECTED[1], "error")))
    assert v.verdict is VerdictKind.FAIL
    v = grade(EXPECTED, _ev((EXPECTED[0], "passed"), (EXPECTED[1], "error"), (EXPECTED[1], "passed")))
    assert v.verdict is VerdictKind.FAIL


def test_timeout_is_a_fail_with_failure_timeout():
    v = grade(EXPECTED, _ev((EXPECTED[0], "passed"), timed_out=True, duration=30.0))
    assert v.verdict is VerdictKind.FAIL and v.failure == "timeout"


def test_timeout_after_all_tests_passed_is_still_a_fail():
    v = grade(EXPECTED, _ev((EXPECTED[0], "passed"), (EXPECTED[1], "passed"), timed_out=True))
    assert v.verdict is VerdictKind.FAIL and v.failure == "timeout"


def test_infrastructure_error_is_neither_pass_nor_fail():
    v = grade(EXPECTED, _ev((EXPECTED[0], "passed"), (EXPECTED[1], "passed"), infra_error="engine gone"))
    assert v.verdict is VerdictKind.INFRA and "engine gone" in v.reason


def test_no_expected_tests_cannot_be_graded():
    assert grade([], _ev()).verdict is VerdictKind.INFRA


def test_nonzero_exit_after_all_passed_is_a_fail():
    """The process seen from outside disagrees with the report: the sample broke something at exit."""
    v = grade(EXPECTED, _ev((EXPECTED[0], "passed"), (EXPECTED[1], "passed"), exit_code=3))
    assert v.verdict is VerdictKind.FAIL and "exited with 3" in v.reason


def test_failure_class_is_attached_to_a_fail():
    ev = Evidence(expected=EXPECTED, outcomes=[
        TestOutcome(nodeid=EXPECTED[0], outcome="failed",
                    message="assert 2 == 3\ntests/test_a.py:4: in test_one\n    assert f() == 3\nE   assert 2 == 3"),
        TestOutcome(nodeid=EXPECTED[1], outcome="passed")])
    v = grade(EXPECTED, ev)
    assert v.failure == "functional/assertion_mismatch"


def test_unspliceable_sample_is_a_syntax_failure():
    v = grade_unspliceable("syntax", "'(' was never closed (line 3)")
    assert v.verdict is VerdictKind.FAIL and v.failure == "syntax/incomplete_syntax"
    v = grade_unspliceable("missing_definition", "the sample defines no function named 'f'")
    assert v.failure == "syntax" and "missing_definition" in v.reason


def test_grade_is_pure():
    ev = _ev((EXPECTED[0], "passed"), (EXPECTED[1], "failed"))
    before = ev.model_dump()
    assert grade(EXPECTED, ev) == grade(EXPECTED, ev)
    assert ev.model_dump() == before


def test_forged_outcomes_with_tampered_machinery_are_not_a_pass():
    """A sample that registers a plugin (or edits a test) could forge every record: never a pass."""
    ev = Evidence(expected=["t.py::a"], outcomes=[TestOutcome(nodeid="t.py::a", outcome="passed")], exit_code=0,
                  tampering=[Finding(kind=FindingKind.PLUGIN_REGISTERED_AT_COLLECTION,
                                     detail="a pytest plugin was registered while the tests were collected: evil (x.py)")])
    v = grade(["t.py::a"], ev)
    assert v.verdict is VerdictKind.FAIL and v.failure == "other/tampering"


def test_other_project_file_changes_are_reported_not_failed():
    ev = Evidence(expected=["t.py::a"], outcomes=[TestOutcome(nodeid="t.py::a", outcome="passed")], exit_code=0,
                  tampering=[Finding(kind=FindingKind.PROJECT_FILE_MODIFIED,
                                     detail="project file modified during the run: pkg/data.py")])
    assert grade(["t.py::a"], ev).verdict is VerdictKind.PASS
