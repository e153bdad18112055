"""The differential step inside the test process (issue 23): a real `python -m pytest -p coderun_reporter` on a
tiny project, with the harness folder made of REPORTER_FILES as the host installs it, and a payload named by
CODERUN_DIFF. What the step wrote is read back from the reporter's channel, as the host reads it."""

from __future__ import annotations

import ast
import json
import os
import secrets
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from coderun.harness import HARNESS_DIR, REPORTER_FILES
from coderun.runner.evidence import read_records

pytestmark = pytest.mark.integration  # a venv, a sandbox or a project's tests in every test

MODULE = '''\
import functools


def doubled(func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return 2 * func(*args, **kwargs)
    return wrapper


class Counter:
    def __init__(self, start=0):
        self.total = start

    def add(self, x):
        self.total += x
        return self.total


def scale(values, k):
    return [v * k for v in values]


def shift(values, k):
    return [v + k for v in values]


def parse(text):
    return int(text)


def slow(n):
    while n >= 0:
        n += 1
    return n


def stubborn(n):
    try:
        while n >= 0:
            n += 1
    except BaseException:
        pass
    return n


@doubled
def half(x):
    return x / 2


def outer():
    def inner():
        return 1
    return inner


def countdown(n):
    while n > 0:
        n -= 1
    return n
'''

TESTS = '''\
from pkg import mod


def test_calls():
    assert mod.scale([], 3) == []
    assert mod.shift([], 3) == []
    assert mod.Counter(1).add(0) == 1
    assert mod.parse("0") == 0
    assert mod.slow(-1) == -1
    assert mod.stubborn(-1) == -1
    assert mod.half(2) == 2
'''

# Bodies that still pass TESTS but are wrong: (what is replaced, by what).
WRONG = {"scale": ("v * k", "v + k"), "Counter.add": ("self.total += x", "self.total -= x"),
         "parse": ("    return int(text)", "    if not text:\n        raise KeyError(text)\n    return int(text)")}


def _project(tmp_path: Path, module: str = MODULE, tests: str = TESTS) -> Path:
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "mod.py").write_text(module)
    (root / "test_x.py").write_text(tests)
    harness = tmp_path / "harness"
    harness.mkdir()
    for name in REPORTER_FILES:
        shutil.copy(HARNESS_DIR / name, harness / name)
    return root


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CODERUN_", "PYTEST_"))}
    env.update(PYTHONPATH=str(tmp_path / "harness"), PYTHONDONTWRITEBYTECODE="1", **extra)
    return env


def _inputs(tmp_path: Path, root: Path, calls: list[str], prelude: str = "") -> list[str]:
    """dump_call texts of the (args, kwargs) Python expressions, made in the project's own process."""
    script = (f"import json, coderun_values as v\nfrom pkg import mod\n{prelude}\n"
              f"print(json.dumps([v.dump_call(*c) for c in [{', '.join('(' + c + ')' for c in calls)}]]))")
    env = _env(tmp_path)
    env["PYTHONPATH"] += os.pathsep + str(root)
    out = subprocess.run([sys.executable, "-c", script], cwd=root, env=env, capture_output=True, text=True,
                         check=True, timeout=60)
    return json.loads(out.stdout)


def _target(root: Path, qualname: str) -> dict:
    """The target of `qualname` in pkg/mod.py, as the host writes it."""
    tree = ast.parse((root / "pkg" / "mod.py").read_text())
    scope, parts = tree.body, qualname.split(".")
    for part in parts:
        node = next(n for n in scope if getattr(n, "name", None) == part)
        scope = node.body
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    return {"file": "pkg/mod.py", "qualname": qualname, "name": parts[-1], "lineno": node.lineno,
            "first": first, "end_lineno": node.end_lineno}


def _run(tmp_path: Path, root: Path, payload: dict) -> list[dict]:
    """The reporter's records of one pytest run of test_x.py with the payload."""
    report, diff = tmp_path / "report.jsonl", tmp_path / "payload.json"
    report.unlink(missing_ok=True)
    diff.write_text(json.dumps(payload))
    token = secrets.token_hex(8)
    env = _env(tmp_path, CODERUN_REPORT=str(report), CODERUN_REPORT_TOKEN=token, CODERUN_DIFF=str(diff))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "coderun_reporter", "-q", "-o", "addopts=",
                           "-p", "no:cacheprovider", "test_x.py"], cwd=root, env=env, capture_output=True,
                          text=True, timeout=120)
    records = read_records(report.read_text(), token)
    assert records and records[-1]["kind"] == "finish", (proc.stdout, proc.stderr, records)
    return records


def _differential(records: list[dict]) -> dict:
    found = [r for r in records if r["kind"] == "differential"]
    assert len(found) == 1, records
    kinds = [r["kind"] for r in records]
    assert kinds.index("differential") < kinds.index("finish")
    return found[0]


def _check(tmp_path, root, qualname, inputs, limit=1.0, budget=20.0) -> list[dict]:
    records = _run(tmp_path, root, {"mode": "check", "target": _target(root, qualname), "inputs": inputs,
                                    "limit": limit, "budget": budget})
    assert [r for r in records if r["kind"] == "tamper"] == [], records
    result = _differential(records)
    assert result["mode"] == "check" and len(result["observations"]) == len(inputs), result
    return result["observations"]


def _essence(obs: dict) -> list:
    return [obs["outcome"], obs["value"], obs["args"], obs["kwargs"]]


CASES = {
    "scale": (["([1, 2], 2), {}", "([2], 2), {}", "([], 5), {}", "([3], 0), {}"], {0, 3}),
    "Counter.add": (["[mod.Counter(5), 0], {}", "[mod.Counter(5), 3], {}"], {1}),
    "parse": (["['12'], {}", "[''], {}", "['x'], {}"], {1}),
}


@pytest.mark.parametrize("qualname", sorted(CASES))
def test_check_mode_tells_a_wrong_body_apart_exactly_on_the_inputs_it_gets_wrong(tmp_path, qualname):
    """The same inputs on the right and a wrong body (both pass the project's test): the observations
    differ on the inputs where the bodies behave differently, and only there."""
    calls, expected = CASES[qualname]
    right = _project(tmp_path / "right")
    inputs = _inputs(tmp_path / "right", right, calls)
    old, new = WRONG[qualname]
    wrong = _project(tmp_path / "wrong", MODULE.replace(old, new))
    seen = [_check(tmp_path / side, root, qualname, inputs) for side, root in (("right", right), ("wrong", wrong))]
    differing = {i for i, (a, b) in enumerate(zip(*seen, strict=True)) if _essence(a) != _essence(b)}
    assert differing == expected, seen


def test_a_method_call_is_observed_with_its_receiver_after_the_call(tmp_path):
    """The receiver is args[0]: its state after the call is part of what the call did."""
    root = _project(tmp_path)
    inputs = _inputs(tmp_path, root, ["[mod.Counter(5), 3], {}"])
    right = _check(tmp_path, root, "Counter.add", inputs)[0]
    assert right["outcome"] == "return" and right["value"] == 8
    assert right["args"] == ["list", [["obj", "pkg.mod.Counter", [["total", 8]]], 3]], right


def test_exceptions_are_observed_by_their_type(tmp_path):
    root = _project(tmp_path)
    inputs = _inputs(tmp_path, root, ["['x'], {}", "[None], {}"])
    obs = _check(tmp_path, root, "parse", inputs)
    assert [(o["outcome"], o["value"]) for o in obs] == [("raise", "ValueError"), ("raise", "TypeError")]


@pytest.mark.parametrize("qualname", ["slow", "stubborn"])
def test_a_hanging_call_times_out_at_its_limit_and_the_run_still_finishes(tmp_path, qualname):
    """A call that never returns is stopped by the per-call alarm (also when it swallows the first alarm
    with a bare except), the next input runs, and the session ends with its `finish` record."""
    root = _project(tmp_path)
    inputs = _inputs(tmp_path, root, ["[1], {}", "[-5], {}"])
    hung, fine = _check(tmp_path, root, qualname, inputs, limit=0.5)
    assert hung["outcome"] == "timeout" and 0.4 < hung["seconds"] < 5, hung
    assert (fine["outcome"], fine["value"]) == ("return", -5), fine


def test_the_budget_stops_the_step_and_says_so(tmp_path):
    """Once the step's budget is used up, the remaining inputs are `timeout` and the record says from where."""
    root = _project(tmp_path)
    inputs = _inputs(tmp_path, root, ["[1], {}", "[2], {}", "[-1], {}"])
    records = _run(tmp_path, root, {"mode": "check", "target": _target(root, "slow"), "inputs": inputs,
                                    "limit": 0.6, "budget": 1.0})
    result = _differential(records)
    assert [o["outcome"] for o in result["observations"]] == ["timeout"] * 3, result
    assert result["stopped"]["at"] == 1, result


def test_unloadable_inputs_are_said_so_and_the_others_still_run(tmp_path):
    """An input that cannot be unpickled here (garbage, or a class from a module this project lacks)."""
    root = _project(tmp_path)
    missing = _inputs(tmp_path, root, ["[gone.Thing()], {}"], prelude=textwrap.dedent("""\
        import sys, types
        gone = types.ModuleType("gone")
        class Thing:
            pass
        Thing.__module__ = "gone"
        gone.Thing = Thing
        sys.modules["gone"] = gone"""))
    inputs = ["bm90IGEgcGlja2xl", *missing, *_inputs(tmp_path, root, ["['7'], {}"])]
    obs = _check(tmp_path, root, "parse", inputs)
    assert [o["outcome"] for o in obs] == ["unloadable", "unloadable", "return"], obs
    assert obs[2]["value"] == 7


def test_a_decorated_function_is_called_raw(tmp_path):
    """The target is the function under its decorator (the __wrapped__ chain), as the recorder saw it."""
    root = _project(tmp_path)
    obs = _check(tmp_path, root, "half", _inputs(tmp_path, root, ["[3], {}"]))
    assert obs[0]["value"] == ["float", "1.5"], obs


def test_a_target_that_cannot_be_called_alone_is_an_error_and_nothing_runs(tmp_path):
    root = _project(tmp_path)
    target = dict(_target(root, "outer"), qualname="outer.<locals>.inner", name="inner")
    result = _differential(_run(tmp_path, root, {"mode": "check", "target": target, "inputs": [], "limit": 1}))
    assert set(result) == {"token", "kind", "error", "step_seconds"} and "<locals>" in result["error"], result
    # Exploring the original, the def must be where the task says; checking a sample, only file and name.
    moved = dict(_target(root, "scale"), lineno=1, first=1)
    result = _differential(_run(tmp_path, root, {"mode": "explore", "target": moved, "inputs": [], "limit": 1}))
    assert "was found at" in result["error"], result
    result = _differential(_run(tmp_path, root, {"mode": "check", "target": moved, "inputs": [], "limit": 1}))
    assert result.get("observations") == [] and "error" not in result, result


def test_a_failing_test_skips_the_step(tmp_path):
    """The differential step is for samples that pass the project's tests: a failure skips it."""
    root = _project(tmp_path, tests=TESTS + "\n\ndef test_fails():\n    assert mod.scale([1], 2) == [3]\n")
    inputs = _inputs(tmp_path, root, ["([1], 2), {}"])
    records = _run(tmp_path, root, {"mode": "check", "target": _target(root, "scale"), "inputs": inputs,
                                    "limit": 1})
    assert {k: v for k, v in _differential(records).items() if k != "token"} == {
        "kind": "differential", "skipped": "tests failed"}


def _explore(tmp_path, root, qualname, calls, seed=3, budget=60) -> dict:
    inputs = _inputs(tmp_path, root, calls)
    records = _run(tmp_path, root, {"mode": "explore", "target": _target(root, qualname), "inputs": inputs,
                                    "limit": 1.0, "budget": budget,
                                    "explore": {"seed": seed, "per_input": 8, "max_candidates": 200,
                                                "mutants": 20}})
    assert [r for r in records if r["kind"] == "tamper"] == [], records
    result = _differential(records)
    assert result["mode"] == "explore" and "stopped" not in result, result
    return result


def test_explore_adds_mutated_inputs_the_original_accepts_with_arcs_and_kills(tmp_path):
    """EvalPlus-style: mutated inputs the original runs without raising, each called twice, with the arcs of
    the body it ran; the `+` -> `-` mutant of the body is killed by some candidate."""
    root = _project(tmp_path)
    result = _explore(tmp_path, root, "shift", ["([1, 2], 3), {}", "([5], 1), {}"])
    cands = result["candidates"]
    mutated = [c for c in cands if c["origin"] == "mutated"]
    assert [c["origin"] for c in cands[:2]] == ["recorded", "recorded"] and len(mutated) >= 4, cands
    assert len(mutated) <= 16 and len({c["input"] for c in cands}) == len(cands)
    assert all(c["obs"]["outcome"] == "return" for c in mutated), mutated
    assert all(_essence(c["obs"]) == _essence(c["again"]) for c in cands)
    assert all(c["arcs"] and all(len(a) == 2 for a in c["arcs"]) for c in cands), cands
    line = _target(root, "shift")["lineno"]
    assert [-line, line + 1] in cands[0]["arcs"], cands[0]["arcs"]
    minus = [i for i, (_, what) in enumerate(result["mutated"]) if what == "operator -> Sub"]
    assert result["mutants"] == len(result["mutated"]) >= 1 and minus, result["mutated"]
    assert any(minus[0] in c["kills"] for c in cands), cands
    again = _explore(tmp_path, root, "shift", ["([1, 2], 3), {}", "([5], 1), {}"])
    assert [c["input"] for c in again["candidates"]] == [c["input"] for c in cands], "not deterministic"


def test_a_mutant_that_loops_is_stopped_at_a_multiple_of_the_originals_time(tmp_path):
    """Mutants of `countdown` that never return (`n -= 1` made `n += 1`, ...) ran to a fixed 0.5 s on every
    candidate: boolean's exploration used up its 120 s that way. A mutant's call now gets 20 times the
    original's on the same input, at least 50 ms: the step ends within a budget the fixed limit overran."""
    root = _project(tmp_path)
    # 17 candidates, 7 mutants, 2 of them looping on every positive n: about 12 s with the fixed limit
    result = _explore(tmp_path, root, "countdown", [f"[{n}], {{}}" for n in (3, 5, 8, 13)], budget=6)
    assert any(what == "operator -> Add" for _, what in result["mutated"]), result["mutated"]
    fast = {"obs": {"seconds": 0.0001}, "again": {"seconds": 0.0002}}
    slow = {"obs": {"seconds": 0.3}, "again": {"seconds": 0.01}}
    assert _limit_of(tmp_path, fast) == 0.05 and _limit_of(tmp_path, slow) == 0.5


def _limit_of(tmp_path: Path, cand: dict) -> float:
    code = f"import coderun_differential as d; print(d.mutant_limit({cand!r}))"
    out = subprocess.run([sys.executable, "-c", code], cwd=HARNESS_DIR, capture_output=True, text=True, check=True,
                         timeout=60)
    return float(out.stdout)


def test_explore_never_mutates_a_method_receiver(tmp_path):
    """Mutations touch the arguments, never self: every candidate's receiver is the recorded one."""
    root = _project(tmp_path)
    result = _explore(tmp_path, root, "Counter.add", ["[mod.Counter(5), 3], {}"])
    cands = result["candidates"]
    assert any(c["origin"] == "mutated" for c in cands)
    script = ("import json, sys, coderun_values as v\n"
              "print(json.dumps([vars(v.load_call(t)[0][0]) for t in json.load(sys.stdin)]))")
    env = _env(tmp_path)
    env["PYTHONPATH"] += os.pathsep + str(root)
    out = subprocess.run([sys.executable, "-c", script], cwd=root, env=env, input=json.dumps(
        [c["input"] for c in cands]), capture_output=True, text=True, check=True, timeout=60)
    assert json.loads(out.stdout) == [{"total": 5}] * len(cands)
    assert any(c["kills"] for c in cands), cands


def test_a_clean_run_with_the_step_reports_no_tampering(tmp_path):
    """The step's own work (alarms, the tracer, imports, mutants compiled) is not taken for tampering."""
    root = _project(tmp_path)
    inputs = _inputs(tmp_path, root, ["([1, 2], 3), {}"])
    for mode in ("check", "explore"):
        records = _run(tmp_path, root, {"mode": mode, "target": _target(root, "shift"), "inputs": inputs,
                                        "limit": 1, "explore": {"seed": 1, "mutants": 5}})
        assert [r for r in records if r["kind"] in ("tamper", "note")] == [], records
        assert "error" not in _differential(records)


@pytest.mark.parametrize("replaced", ["coderun_reporter._trim", "coderun_differential._form",
                                      "coderun_mutants.candidates"])
def test_tampering_during_the_differential_calls_is_caught_at_the_session_end(tmp_path, replaced):
    """A sample that waits for the differential step (an input its tests never use) to replace a function
    of the harness is named by the check that follows the step."""
    module, attr = replaced.split(".")
    sneaky = MODULE.replace("def scale(values, k):\n", "def scale(values, k):\n"
                            f"    if k == 99:\n        import {module}\n        {module}.{attr} = len\n")
    root = _project(tmp_path, sneaky)
    inputs = _inputs(tmp_path, root, ["([1], 99), {}"])
    records = _run(tmp_path, root, {"mode": "check", "target": _target(root, "scale"), "inputs": inputs,
                                    "limit": 1})
    tampers = [r for r in records if r["kind"] == "tamper"]
    assert [(t["code"], replaced in t["what"], "end of the session" in t["what"]) for t in tampers] == [
        ("reporter_replaced", True, True)], records
