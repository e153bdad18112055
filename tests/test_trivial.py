"""Trivial bodies (tasks/trivial): which can be built from a signature and a recording, and a real
verification that names those a project's tests let through."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from coderun.analyzers import analyze_project
from coderun.cli.main import app
from coderun.cli.tasks import print_project
from coderun.config import load_settings
from coderun.evaluation.store import RunStore
from coderun.manifests.schema import load_manifest
from coderun.records import TaskStatus
from coderun.runner.splice import blank_body
from coderun.tasks import build_tasks, load_tasks
from coderun.tasks.sandbox_runs import stub_collect_limit, stub_cpu_limit, stub_run_limit
from coderun.tasks.trivial import (
    RAISE,
    annotation_type,
    bodies_for,
    is_method,
    literal_repr,
    signature_parts,
    trivial_bodies,
)
from coderun.tasks.verify import Shared, TaskTests, verify_task
from tests.helpers import write_tree


def ret(value) -> dict:
    return {"outcome": "return", "value": value, "args": [], "kwargs": {}, "seconds": 0.0}


def test_raise_and_none_are_always_there_in_order():
    assert trivial_bodies([], False, None, []) == [("raise", "raise NotImplementedError"), ("none", "return None")]


def test_first_arg_skips_the_receiver_and_uses_the_args_tuple():
    assert dict(trivial_bodies(["self", "x"], True, None))["first_arg"] == "return x"
    assert dict(trivial_bodies(["this", "x"], True, None))["first_arg"] == "return x"  # the receiver by place
    assert dict(trivial_bodies(["x", "y"], False, None))["first_arg"] == "return x"
    assert dict(trivial_bodies(["cls", "args"], False, None))["first_arg"] == "return args"
    assert "first_arg" not in dict(trivial_bodies(["self"], True, None))
    params, _ = signature_parts("def f(self, *items, key=None, **kw):")
    assert params == ["self", "items", "key", "kw"]
    assert dict(trivial_bodies(params, True, None))["first_arg"] == "return items"


def test_empty_from_the_most_common_recorded_type():
    recorded = [ret(["list", [1]]), ret(["dict", []]), ret(["list", []]), ret(None), ret(["obj", "C", None])]
    assert dict(trivial_bodies(["x"], False, "str", recorded))["empty"] == "return []"  # recording first
    forms = {"tuple": ["tuple", []], "set": ["set", []], "str": "a", "bytes": ["bytes", "61"], "int": 3,
             "float": ["float", "1.5"], "bool": True, "gen": ["gen", [1]]}
    empties = {k: dict(trivial_bodies([], False, None, [ret(v)])).get("empty") for k, v in forms.items()}
    assert empties == {"tuple": "return ()", "set": "return set()", "str": "return ''", "bytes": "return b''",
                       "int": "return 0", "float": "return 0.0", "bool": "return False", "gen": "return iter(())"}


def test_empty_from_the_annotation_when_nothing_was_recorded():
    cases = {"List[int]": "list", "typing.Sequence[str]": "list", "Optional[Dict[str, int]]": "dict",
             "'Mapping[str, int]'": "dict", "str | None": "str", "Union[None, frozenset]": "set", "bool": "bool",
             "Tuple[int, ...]": "tuple", "Iterator[int]": "gen", "Union[int, str]": None, "Any": None,
             "MyClass": None, "not valid (": None}
    assert {a: annotation_type(a) for a in cases} == cases
    assert "empty" not in dict(trivial_bodies(["x"], False, None, [ret(None)]))
    _, returns = signature_parts("async def f(\n    x: int,  # the count\n) -> Optional[List[int]]:")
    assert returns == "Optional[List[int]]"
    assert dict(trivial_bodies(["x"], False, returns))["empty"] == "return []"


def test_constant_is_the_most_common_short_literal():
    recorded = [ret("a"), ret(7), ret(7), ret(None), ret(None), ret(None)]
    assert dict(trivial_bodies([], False, None, recorded))["constant"] == "return 7"  # None aside
    assert literal_repr(["float", "0.25"]) == "0.25" and literal_repr(["float", "nan"]) is None
    assert literal_repr(["float", "inf"]) is None and literal_repr(["bytes", "6869"]) == "b'hi'"
    assert literal_repr(["int", str(2 ** 60)]) == str(2 ** 60) and literal_repr(False) == "False"
    assert literal_repr("x" * 100) is None and literal_repr(None) is None and literal_repr(["list", []]) is None
    assert literal_repr("<root0>/data.txt") is None  # a path coderun_values replaced: not what was returned
    assert "constant" not in dict(trivial_bodies([], False, None, [ret(None), ret(["obj", "C", None])]))


def test_ties_go_to_the_first_recorded_and_statements_are_not_repeated():
    assert dict(trivial_bodies([], False, None, [ret("b"), ret(2), ret(2), ret("b")]))["constant"] == "return 'b'"
    # always '' recorded: `empty` is `return ''`, and `constant` would be the same run
    names = [n for n, _ in trivial_bodies(["x"], False, None, [ret(""), ret("")])]
    assert names == ["raise", "none", "first_arg", "empty"]


def test_is_method_and_bodies_for_read_what_the_analyzer_keeps():
    assert is_method("C", []) and is_method("C", ["@classmethod"]) and not is_method(None, [])
    assert not is_method("C", ["@staticmethod"])
    bodies = bodies_for("def f(x, y) -> list:", "C", ["@staticmethod"], [ret(3)])
    assert bodies == [("raise", "raise NotImplementedError"), ("none", "return None"), ("first_arg", "return x"),
                      ("empty", "return 0"), ("constant", "return 3")]
    assert signature_parts("def f(x) print x:") == ([], None)  # what this Python cannot parse


# -- a real verification ------------------------------------------------------------------------

DOC = '"""Return the {what}, computed step by step for the caller."""'
PROJECT = {
    "lib/__init__.py": "",
    "lib/words.py": f'''def label(prefix):
    {DOC.format(what="label of a thing, its prefix and a fixed tag")}
    tag = "thing"
    text = prefix + tag
    text = text.strip()
    return text


def double(x):
    {DOC.format(what="double of x")}
    twice = x
    twice = twice + x
    result = twice
    return result
''',
    "tests/test_words.py": '''from lib.words import double, label


def test_label_exists():
    assert label("a-") is not None


def test_double():
    assert double(3) == 6
    assert double(0) == 0
''',
}


def subprocess_runner(root: Path, work: Path):
    """A TestRunner that really runs pytest (this interpreter) on a fresh copy of `root` per run."""
    counter = iter(range(10 ** 6))

    def run(relfile, new_source, nodeids, *, first_failure=False, configuration="", kind=""):
        copy = work / f"run-{next(counter)}"
        shutil.copytree(root, copy)
        if relfile and new_source is not None:
            (copy / relfile).write_text(new_source)
        args = [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", *(["-x"] * first_failure)]
        done = subprocess.run([*args, *nodeids], cwd=copy, capture_output=True, text=True, timeout=120)
        return {n: "passed" for n in nodeids if f"PASSED {n}" in done.stdout}

    return run


@pytest.fixture(scope="module")
def verified(tmp_path_factory) -> dict:
    """Each function of PROJECT verified with the trivial bodies its signature gives, plus a recording's
    constant for `label`."""
    tmp = tmp_path_factory.mktemp("trivial")
    root = write_tree(tmp / "lib", PROJECT)
    runner = subprocess_runner(root, tmp / "runs")
    shared = {"": Shared(frozenset(), frozenset())}
    tests = {"label": "tests/test_words.py::test_label_exists", "double": "tests/test_words.py::test_double"}
    recorded = {"label": [ret("a-thing")], "double": [ret(6), ret(0)]}
    out = {}
    for fn in analyze_project(root, use_jedi=False).in_file("lib/words.py"):
        bodies = bodies_for(fn.signature, fn.class_name, fn.decorators, recorded[fn.name])
        spec = TaskTests(f"lib/{fn.key}", fn.file, fn.qualname, fn.lineno, (tests[fn.name],),
                         tuple(b for b in bodies if b[0] != RAISE))
        out[fn.name] = (spec, verify_task(spec, runner, (root / fn.file).read_text(),
                                          lambda s, q, ln, st: blank_body(s, q, lineno=ln, statement=st), shared))
    return out


@pytest.mark.integration
def test_tests_that_only_check_not_none_let_first_arg_and_constant_through(verified):
    """The unseen project's case: `return prefix + ...` checked only for `is not None`."""
    spec, v = verified["label"]
    assert [n for n, _ in spec.trivial] == ["none", "first_arg", "empty", "constant"]
    assert v.status is TaskStatus.VERIFIED and not v.pass_stub_passes
    assert v.trivial_passes == ("first_arg", "empty", "constant")  # '' is not None either


@pytest.mark.integration
def test_tests_that_check_the_value_let_no_trivial_body_through(verified):
    spec, v = verified["double"]
    assert dict(spec.trivial) == {"none": "return None", "first_arg": "return x", "empty": "return 0",
                                  "constant": "return 6"}
    assert v.status is TaskStatus.VERIFIED and v.trivial_passes == () and not v.pass_stub_passes


@pytest.mark.slow
def test_a_build_stores_reports_and_lists_the_trivial_bodies_that_pass(tmp_path, monkeypatch):
    """Through the whole build (venv, coverage, recording, sandbox runs): the task, the report, `tasks build`
    and `tasks list` name the bodies a task's tests let through; `empty` and `constant` come from the
    recorded return value ('a-thing')."""
    write_tree(tmp_path / "lib", PROJECT)
    (tmp_path / "lib.yaml").write_text(f"name: lib\nsource: {{path: {tmp_path / 'lib'}}}\npython: '3.11'\n"
                                       "tests:\n  paths: [tests]\n")
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    settings = load_settings()
    report = build_tasks(load_manifest(tmp_path / "lib.yaml"), settings).projects[0]
    tasks = {t.name: t for t in load_tasks(settings, status="all")}
    passes = ["first_arg", "empty", "constant"]
    assert tasks["label"].status is TaskStatus.VERIFIED and tasks["label"].trivial_passes == passes
    assert tasks["double"].trivial_passes == [] and not tasks["double"].pass_stub_passes
    assert report.trivial_passes == {"lib/lib/words.py::label": passes}
    out = Console(record=True, width=200)
    print_project(report, out)
    assert "trivial bodies pass the tests of 1 verified tasks (first_arg 1, empty 1, constant 1)" in out.export_text()
    listing = CliRunner().invoke(app, ["tasks", "list", "--project", "lib"], env={"COLUMNS": "200"})
    assert listing.exit_code == 0, listing.output
    flagged = [line for line in listing.stdout.splitlines() if "trivial:first" in line]  # a wide listing: one line
    assert len(flagged) == 1 and "trivial:first_arg,empty,constant" in flagged[0]
    as_json = CliRunner().invoke(app, ["tasks", "list", "--project", "lib", "--json"]).stdout.splitlines()
    assert {json.loads(line)["name"]: json.loads(line)["trivial_passes"] for line in as_json} == {
        "label": passes, "double": []}
    assert "first_arg 1 (returns its first argument)" in " ".join(listing.stdout.split())
    assert "constant 1 (returns a constant the original returned)" in " ".join(listing.stdout.split())
    # pass+ catches each body the project's tests let through, and keeps the original (issue 23).
    label = tasks["label"]
    assert label.rigor is not None and label.rigor.inputs >= 2 and label.rigor.augmented >= 1, label.rigor
    header = "def label(prefix):\n"
    rows = {"original": label.source, "first_arg": header + "    return prefix\n",
            "constant": header + "    return 'a-thing'\n"}
    (tmp_path / "s.jsonl").write_text("".join(json.dumps({"task_id": label.task_id, "solution": code}) + "\n"
                                              for code in rows.values()))
    res = CliRunner().invoke(app, ["eval", "--samples", str(tmp_path / "s.jsonl"), "--backend", "local",
                                   "--rigor", "plus", "--run-dir", str(tmp_path / "run"), "-k", "1",
                                   "--projects", str(tmp_path)])
    assert res.exit_code == 0, res.output
    with RunStore.open(tmp_path / "run") as store:
        by_index = {r.index: r for r in store.results()}
    got = {name: (by_index[i].rigor.base.value, by_index[i].verdict.value, by_index[i].failure)
           for i, name in enumerate(rows)}
    assert got == {"original": ("pass", "pass", None),
                   "first_arg": ("pass", "fail", "functional/differential"),
                   "constant": ("pass", "fail", "functional/differential")}, got
    assert "disagrees with the original" in by_index[1].reason
    log = (tmp_path / "run" / by_index[1].log_path).read_text()
    assert "## differential (pass+)" in log and "original:" in log and "sample:" in log


DRAIN = {
    "lib/__init__.py": "",
    "lib/queue.py": f'''def pop_oldest(items):
    {DOC.format(what="oldest entry of the list, removed from it, or None once the list is empty")}
    if not items:
        return None
    first = items[0]
    del items[0]
    return first
''',
    "tests/test_queue.py": '''from lib.queue import pop_oldest


def test_drain_counts_every_entry():
    items, count = [1, 2, 3], 0
    while pop_oldest(items) is not None:
        count += 1
    assert count == 3 and items == []
''',
}


def test_a_body_that_hangs_before_any_test_is_stopped_at_a_limit_from_the_originals_run():
    """zope.interface's trivial body that loops in its C3 merge at import sat out 66.8 s (60 s over five times
    its tests' times) at the very end of the whole build: the tests' own times leave out the import and
    collection the original's run of the same tests paid. With that run's time the limit follows it, and is
    never longer than without."""
    tests = [0.01, 0.02]
    assert stub_run_limit(tests) == pytest.approx(60.15)
    assert stub_run_limit(tests, original_run=1.2) == pytest.approx(16.0)
    assert stub_run_limit(tests, original_run=40.0) == pytest.approx(60.15)


@pytest.mark.slow
def test_a_trivial_body_that_loops_is_stopped_at_a_limit_from_the_original_time(tmp_path, monkeypatch):
    """A trivial body that loops (`return items` where the caller waits for None) sat out the evaluation's
    10 s per-test timeout in every build (122 of 163 s of cachetools' verification): its run only decides
    whether the body is caught, and the original took milliseconds. The loop burns CPU: it ends at the CPU
    limit's floor, before the wall clock's."""
    task, logs = _built(tmp_path, monkeypatch, DRAIN, "pop_oldest", timeout=30)
    assert task.status is TaskStatus.VERIFIED and task.trivial_passes == []
    timed_out = [text for text in logs if "(coderun per-test CPU limit of its own bodies)" in text]
    assert timed_out and all("Timeout: test used over 0.2 s of CPU" in text for text in timed_out), timed_out
    assert not [text for text in logs if "(coderun per-test timeout)" in text]


SLOTS = {
    "lib/__init__.py": "",
    "lib/slots.py": f'''def next_free(used, start):
    {DOC.format(what="first number from start that is not a key of used")}
    n = start
    while n in used:
        n += 1
    return n


SLOTS = {{}}
_n = 0
while len(SLOTS) < 3:  # with `return None` for a body, None is taken again and again: a loop at import
    _n = next_free(SLOTS, _n)
    SLOTS[_n] = True
''',
    "tests/test_slots.py": '''from lib.slots import SLOTS, next_free


def test_slots_are_the_first_numbers():
    assert sorted(SLOTS) == [0, 1, 2]


def test_next_free_skips_the_used():
    assert next_free({3: True, 4: True}, 3) == 5
''',
}


def test_the_cpu_limit_follows_the_slowest_test_with_a_floor_below_the_wall_clocks():
    assert stub_cpu_limit([0.001, 0.01]) == pytest.approx(0.2)
    assert stub_cpu_limit([0.001, 0.3]) == pytest.approx(1.5)
    assert stub_cpu_limit([]) == pytest.approx(0.2)


def test_the_collection_limit_follows_the_originals_collection():
    assert stub_collect_limit(None) == 0.0   # no run of the original on these tests: no collection limit
    assert stub_collect_limit(0.4) == pytest.approx(5.0)
    assert stub_collect_limit(2.0) == pytest.approx(10.0)


@pytest.mark.slow
def test_a_trivial_body_that_loops_at_import_is_stopped_at_a_collection_limit(tmp_path, monkeypatch):
    """zope.interface's `return None` in its C3 merge loops while the test modules import it: no test's limit is
    armed yet, and each such run sat out the whole run's limit (56 s, three times per build). The collection
    has a limit of its own, from the original's: the loop ends there and counts as caught."""
    task, logs = _built(tmp_path, monkeypatch, SLOTS, "next_free", timeout=60)
    assert task.status is TaskStatus.VERIFIED and task.trivial_passes == []
    stopped = [text for text in logs if "(coderun collection timeout)" in text]
    assert len(stopped) == 1 and "Timeout: collection exceeded 5 s" in stopped[0], logs
    assert "timed out: False" in stopped[0]   # the collection's limit, not the whole run's


def _built(tmp_path, monkeypatch, tree: dict, name: str, *, timeout: int):
    """The task `name` of a project `lib` made of `tree`, built without pass+, and the build's run logs."""
    write_tree(tmp_path / "lib", tree)
    (tmp_path / "lib.yaml").write_text(f"name: lib\nsource: {{path: {tmp_path / 'lib'}}}\npython: '3.11'\n"
                                       f"tests:\n  paths: [tests]\n  timeout_per_test: {timeout}\n")
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    settings = load_settings()
    build_tasks(load_manifest(tmp_path / "lib.yaml"), settings, rigor=False)
    task = next(t for t in load_tasks(settings, status="all") if t.name == name)
    return task, [p.read_text() for p in sorted((settings.runs / "tasks" / "lib").glob("run-*.log"))]
