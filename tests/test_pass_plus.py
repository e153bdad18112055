"""pass+ on the host: comparing observations, choosing inputs, the pass+ verdict (all pure)."""

from __future__ import annotations

import pytest

from coderun.plus.differential import disagreement, same
from coderun.plus.grade import grade_plus
from coderun.plus.inputs import check_limit, confirmed, reduce, usable
from coderun.records import Evidence, TaskInputs, Verdict, VerdictKind


def obs(value, outcome="return", args=("list", [1]), seconds=0.001):
    return {"outcome": outcome, "value": value, "args": list(args), "kwargs": ["dict", []], "seconds": seconds}


@pytest.mark.parametrize("a, b, equal", [
    (1, 1, True), (1, 2, False), (["float", "0.1"], ["float", "0.10000000001"], True),
    (["float", "0.1"], ["float", "0.11"], False), (["float", "nan"], ["float", "nan"], True),
    (["float", "inf"], ["float", "-inf"], False), (1, ["float", "1.0"], True), (True, 1, True),
    ("1", 1, False), (None, ["list", []], False), (["list", [1, 2]], ["list", [1, 2, 3]], False),
    (["set", [1, 2]], ["set", [1, 2]], True), (["obj", "m.C", [["x", 1]]], ["obj", "m.C", [["x", 2]]], False),
])
def test_forms_compare_as_equality_would(a, b, equal):
    assert same(a, b) is equal


def test_a_disagreement_names_what_differs_and_time_never_counts():
    assert disagreement(obs(1), obs(1, seconds=9.0)) is None
    assert "returned 2, the original 1" in disagreement(obs(1), obs(2))
    assert disagreement(obs(1), obs("KeyError", "raise")) == "the original returned 1, the sample raised KeyError"
    assert disagreement(obs("ValueError", "raise"),
                                                                     obs("TypeError", "raise")) == "raised TypeError, the original ValueError"
    assert "arguments" in disagreement(obs(1), obs(1, args=("list", [2])))
    assert "ran out of time" in disagreement(obs(1), obs(None, "timeout"))
    assert disagreement(obs(1), None) == "no observation of the sample's call"


def cand(origin, value, arcs=(), kills=(), again=None):
    o = obs(value)
    return {"input": f"{origin}-{value}-{len(arcs)}", "origin": origin, "obs": o,
            "again": o if again is None else again, "arcs": [list(a) for a in arcs], "kills": list(kills)}


def test_reduce_keeps_what_adds_coverage_kills_or_results_and_a_recorded_call():
    c = [cand("mutated", 1, arcs=[(1, 2), (2, 3)], kills=[0, 1]),
         cand("mutated", 1, arcs=[(1, 2)]),                     # adds nothing
         cand("mutated", 2, arcs=[(1, 2), (2, 4)], kills=[2]),
         cand("recorded", 1, arcs=[(1, 2), (2, 3)])]            # all covered, but the only recorded call
    kept = reduce(c)
    assert 1 not in kept and {0, 2, 3} == set(kept)
    assert reduce(c, limit=1) == [3]


def test_only_candidates_the_original_repeats_are_usable():
    assert usable(cand("recorded", 1))
    assert not usable(cand("recorded", 1, again=obs(2)))
    assert not usable({"obs": obs(None, "timeout"), "again": obs(None, "timeout")})
    assert confirmed([obs(1), obs(2)], [obs(1), obs(3)]) == [True, False]
    assert confirmed([obs(1)], None) == [False]


def test_an_input_holding_a_clock_reading_is_not_usable():
    """A TTL cache's expiry times make the original itself behave by when it is called."""
    clocks = (1_800_000_000.0, 50_000.0)
    expiring = cand("recorded", 1)
    expiring["obs"] = expiring["again"] = obs(1, args=("list", [["obj", "C", [["expires", ["float", "50060.5"]]]]]))
    stamped = cand("recorded", ["float", "1799999000.0"])
    plain = cand("recorded", 1)
    plain["obs"] = plain["again"] = obs(1, args=("list", [["float", "2.5"], ["float", "900.0"]]))
    assert [usable(c, clocks) for c in (expiring, stamped, plain)] == [False, False, True]


def test_the_per_call_limit_follows_the_slowest_original_call():
    assert check_limit([obs(1, seconds=0.001)]) == 0.5
    assert check_limit([obs(1, seconds=0.1), obs(1, seconds=0.01)]) == 2.0
    assert check_limit([obs(1, seconds=3.0)]) == 5.0


PASS = Verdict(verdict=VerdictKind.PASS, reason="2 expected tests passed")
INPUTS = TaskInputs(task_id="p/m.py::f", target={}, inputs=["a", "b"], expected=[obs(1), obs(2)],
                    origins=["recorded", "mutated"])


def ev(record):
    return Evidence(expected=["t"], differential=record)


def test_pass_plus_needs_agreement_on_every_input():
    agreed = grade_plus(PASS, INPUTS, ev({"mode": "check", "observations": [obs(1), obs(2)]}))
    assert agreed.verdict is VerdictKind.PASS and "agrees with the original on 2 inputs" in agreed.reason
    wrong = grade_plus(PASS, INPUTS, ev({"mode": "check", "observations": [obs(1), obs(5)]}))
    assert wrong.verdict is VerdictKind.FAIL and wrong.failure == "functional/differential"
    assert "1/2 inputs (first: input 1, mutated: returned 5, the original 2)" in wrong.reason


@pytest.mark.parametrize("record, words", [
    (None, "left no record"), ({"error": "no function f"}, "differential: no function f"),
    ({"observations": [obs(1)]}, "1 observations for 2 inputs"), ({"observations": "x"}, "no observations"),
])
def test_a_pass_whose_step_did_not_report_every_input_is_not_a_pass_plus(record, words):
    v = grade_plus(PASS, INPUTS, ev(record))
    assert v.verdict is VerdictKind.FAIL and words in v.reason


def test_pass_plus_keeps_a_failure_and_a_task_without_inputs():
    fail = Verdict(verdict=VerdictKind.FAIL, failure="runtime", reason="boom")
    assert grade_plus(fail, INPUTS, ev(None)) is fail
    assert grade_plus(PASS, None, ev(None)) is PASS
    assert grade_plus(PASS, INPUTS.model_copy(update={"inputs": [], "expected": []}), ev(None)) is PASS
