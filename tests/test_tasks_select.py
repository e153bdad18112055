"""Task selection (CoderEval's rules on real analyzer output), verification decisions, the task store."""

from __future__ import annotations

import pytest

from coderun.analyzers import analyze_project
from coderun.config import Settings
from coderun.errors import TaskError
from coderun.manifests.schema import parse_manifest
from coderun.records import Level, Task, TaskStatus
from coderun.tasks import find_task, load_tasks, store
from coderun.tasks.discovery import glob_regex, is_english, select
from coderun.tasks.verify import OriginalRuns, Shared, TaskTests, Verification, unstable_tests, verify_task
from tests.helpers import write_tree

BODY = "    a = 1\n    b = 2\n    c = a + b\n    return c\n"
DOC = '    """Return the sum of two numbers for the caller."""\n'

TREE = {
    "pkg/__init__.py": "",
    "pkg/mod.py": (
        "import abc\nimport warnings\n\n\n"
        f"def good():\n{DOC}{BODY}\n\n"
        f"def short():\n{DOC}    return 1\n\n\n"
        f"def undocumented():\n{BODY}\n\n"
        f"def old_api():\n    \"\"\"Deprecated: use good() instead of this one.\"\"\"\n{BODY}\n\n"
        f"def warns():\n{DOC}    warnings.warn('x', DeprecationWarning)\n{BODY}\n\n"
        f"def chinese():\n    \"\"\"返回两个数字的和，供调用者使用。\"\"\"\n{BODY}\n\n"
        f"def params_only():\n    \"\"\":param x: int\\n:rtype: int\"\"\"\n{BODY}\n\n"
        f"class Base(abc.ABC):\n    @abc.abstractmethod\n    def run(self):\n    {DOC}    {BODY.replace(chr(10) + '    ', chr(10) + '        ')}\n"
        f"    def method(self):\n    {DOC}    {BODY.replace(chr(10) + '    ', chr(10) + '        ')}\n\n"
        f"def test_tag():\n{DOC}{BODY}"),
    "pkg/other.py": f"def helper():\n{DOC}{BODY}\n\ndef busy():\n{DOC}    a = len(str(1))\n{BODY}",
    "tests/test_mod.py": f"def test_good():\n{DOC}{BODY}",
    "pkg/testing_utils.py": f"class TestCaseMixin:\n    def check(self):\n    {DOC}    {BODY.replace(chr(10) + '    ', chr(10) + '        ')}",
}


def manifest(tasks: str = "") -> object:
    return parse_manifest(f"name: pkg\nsource: {{path: .}}\npython: '3.11'\ntests: {{paths: [tests]}}\n{tasks}",
                          __import__("pathlib").Path("pkg.yaml"))


@pytest.fixture(scope="module")
def analysis(tmp_path_factory):
    root = write_tree(tmp_path_factory.mktemp("sel"), TREE)
    return analyze_project(root, use_jedi=False)


def names(selection) -> list[str]:
    return [c.function.qualname for c in selection.candidates]


def test_discovery_applies_codereval_rules(analysis):
    sel = select(manifest(), analysis)
    # test_tag is a library function merely named test_*: CoderEval has one (federation).
    assert names(sel) == ["good", "Base.method", "test_tag", "helper", "busy"]
    assert sel.rejected["deprecated"] == 2
    assert sel.rejected["no English docstring"] == 3        # undocumented, chinese, params_only
    assert sel.rejected["interface or abstract method"] == 1
    assert sel.rejected["test code"] == 2                   # tests/test_mod.py, TestCaseMixin.check
    assert sel.rejected["body shorter than 4 lines"] == 1


def test_explicit_targets_come_first_bypass_rules_and_keep_aliases(analysis):
    sel = select(manifest("tasks:\n  targets:\n    - {function: 'pkg/mod.py::short', aliases: [X1], "
                          "human_docstring: One.}\n    - {function: 'pkg/mod.py::missing'}\n"
                          "  discover: {include: ['pkg/mod.py'], limit: 1}\n"), analysis)
    assert names(sel) == ["short", "good"]
    assert sel.candidates[0].explicit and sel.candidates[0].aliases == ("X1",)
    assert sel.candidates[0].human_docstring == "One."
    assert sel.unresolved == ("pkg/mod.py::missing",)
    assert sel.rejected["file not included"] == 4 and sel.rejected["over the discovery limit"] == 2


def test_max_context_tokens_and_exclude(analysis):
    sel = select(manifest("tasks:\n  discover: {max_context_tokens: 1}\n"), analysis)
    assert "helper" in names(sel) and "busy" not in names(sel)
    assert sel.rejected["more than 1 context tokens"] == 1
    sel = select(manifest("tasks:\n  discover: {exclude: ['pkg/other.py']}\n"), analysis)
    assert "helper" not in names(sel) and "good" in names(sel)


def test_glob_stays_in_one_directory_unless_double_star():
    assert glob_regex("pkg/*.py").match("pkg/a.py") and not glob_regex("pkg/*.py").match("pkg/sub/a.py")
    assert glob_regex("pkg/**/*.py").match("pkg/a.py") and glob_regex("pkg/**/*.py").match("pkg/x/y/a.py")
    assert glob_regex("pkg/tests/**").match("pkg/tests/a/b.py")


def test_is_english():
    assert is_english("Return the value of the cache entry.")
    assert not is_english("TODO")
    assert not is_english("返回缓存条目的值。 the")


# -- verification decisions -------------------------------------------------------------------


class ScriptedRunner:
    """Runs nothing: answers from a table (the real runs are in test_tasks_build.py). `blanked` holds the
    outcomes with `raise NotImplementedError`, `pass_stub` those with `return None`, `trivial` those with
    other statements, by statement (default: as `blanked`), each keyed by test, or by (configuration,
    test) to differ per configuration."""

    def __init__(self, original: dict, blanked: dict, pass_stub: dict | None = None,
                 trivial: dict[str, dict] | None = None):
        self.original = {k: list(v) for k, v in original.items()}
        self.blanked = blanked
        self.stubs = {**(trivial or {}), "return None": blanked if pass_stub is None else pass_stub}
        self.calls: list[tuple[str | None, bool, list[str]]] = []

    def __call__(self, relfile, new_source, nodeids, *, first_failure=False, configuration="", kind=""):
        self.calls.append((relfile, new_source is not None, list(nodeids)))
        assert first_failure == (new_source is not None)  # only the stub runs may stop early
        if new_source is not None:
            table = self.stubs.get(new_source.rpartition("# blanked: ")[2], self.blanked)
            return {n: table.get((configuration, n), table.get(n, "passed")) for n in nodeids}
        return {n: _pop(self.original, (configuration, n)) or _pop(self.original, n) or "passed" for n in nodeids}


def _pop(table: dict, key) -> str | None:
    return table[key].pop(0) if table.get(key) else None


def blank(src, qual, lineno, statement):
    return src + "\n# blanked: " + statement


def spec(*tests):
    return TaskTests("p/f.py::f", "f.py", "f", 1, tuple(tests))


def shared(flaky=(), always=(), conf=""):
    return {conf: Shared(frozenset(flaky), frozenset(always))}


def test_unstable_tests_counts_every_run():
    r = ScriptedRunner({"a": ["passed", "failed"], "b": ["failed", "failed"]}, {})
    failed_any, failed_all = unstable_tests(r, ["a", "b", "c"], runs=2)
    assert failed_any == {"a", "b"} and failed_all == {"b"} and len(r.calls) == 2


def test_verified_weak_uncovered_flaky_broken():
    r = ScriptedRunner({}, {"t1": "failed"})
    v = verify_task(spec("t1", "t2"), r, "src", blank, shared())
    assert v.status is TaskStatus.VERIFIED and v.blank_failed == ("t1",) and not v.pass_stub_passes
    # the task's own original run, the `raise` run, the `pass` run
    assert [c[1] for c in r.calls] == [False, True, True]

    v = verify_task(spec("t2"), ScriptedRunner({}, {}), "src", blank, shared())
    assert v.status is TaskStatus.WEAK

    assert verify_task(spec(), r, "src", blank, shared()).status is TaskStatus.UNCOVERED

    v = verify_task(spec("t1", "t2"), ScriptedRunner({"t2": ["failed"]}, {"t1": "failed"}), "src", blank,
                    shared(flaky={"t1"}))
    assert v.status is TaskStatus.FLAKY and v.flaky == ("t1", "t2")

    v = verify_task(spec("t1"), ScriptedRunner({"t1": ["failed"]}, {}), "src", blank,
                    shared(flaky={"t1"}, always={"t1"}))
    assert v.status is TaskStatus.BROKEN


def test_tasks_with_the_same_tests_share_the_runs_of_the_original():
    """Two functions of one file exercised by the same tests: the original runs on them once (and once more
    on what is left when that run drops a test), not once per task; another set of tests has its own run."""
    r = ScriptedRunner({"t2": ["failed"]}, {"t1": "failed"})
    originals = OriginalRuns(r)
    first = TaskTests("p/f.py::f", "f.py", "f", 1, ("t1", "t2"))
    second = TaskTests("p/f.py::g", "f.py", "g", 5, ("t1", "t2"))
    other = TaskTests("p/f.py::h", "f.py", "h", 9, ("t1",))
    verdicts = [verify_task(t, r, "src", blank, shared(), originals) for t in (first, second, other)]
    assert [v.status for v in verdicts] == [TaskStatus.VERIFIED] * 3
    assert verdicts[0].flaky == verdicts[1].flaky == ("t2",) and verdicts[1].tests == ("t1",)
    originals_run = [c[2] for c in r.calls if not c[1]]
    assert originals_run == [["t1", "t2"], ["t1"]]  # the third task's tests are what the second's settled on

    alone = ScriptedRunner({"t2": ["failed", "failed"]}, {"t1": "failed"})
    for t in (first, second):
        verify_task(t, alone, "src", blank, shared())
    assert [c[2] for c in alone.calls if not c[1]] == [["t1", "t2"], ["t1"], ["t1", "t2"], ["t1"]]


def test_the_last_own_run_of_the_original_explores_for_pass_plus():
    """A task with recorded calls (an `explore` payload) ends its own runs of the original with pass+'s
    exploring step; the one on the tests it keeps is handed over, so pass+ does not run them again. A task
    whose run was another's (the same tests) gets none and pass+ makes its own."""
    r = ScriptedRunner({"t2": ["failed"]}, {"t1": "failed"})
    explored: list[tuple[list[str], str]] = []

    def explorer(nodeids, payload, configuration):
        explored.append((nodeids, payload))
        return r(None, None, nodeids, configuration=configuration), {"mode": "explore", "for": payload}

    originals = OriginalRuns(r, explorer)
    first = TaskTests("p/f.py::f", "f.py", "f", 1, ("t1", "t2"), explore="F")
    second = TaskTests("p/f.py::g", "f.py", "g", 5, ("t1", "t2"), explore="G")
    v1, v2 = (verify_task(t, r, "src", blank, shared(), originals) for t in (first, second))
    assert explored == [(["t1", "t2"], "F"), (["t1"], "F")]       # t2 failed: the step ran again on t1 alone
    assert v1.tests == ("t1",) and v1.explored == ({"t1": "passed"}, {"mode": "explore", "for": "F"})
    assert v2.status is TaskStatus.VERIFIED and v2.explored is None
    assert Verification.from_json(v1.to_json(first), first).explored is None   # not kept with the decision
    plain = verify_task(TaskTests("p/f.py::h", "f.py", "h", 9, ("t3",)), r, "src", blank, shared(), originals)
    assert plain.explored is None and len(explored) == 2


def test_flaky_test_dropped_before_the_blank_run():
    r = ScriptedRunner({}, {"t1": "failed", "t2": "passed"})
    v = verify_task(spec("t1", "t2"), r, "src", blank, shared(flaky={"t1"}))
    assert v.status is TaskStatus.WEAK and v.tests == ("t2",) and v.flaky == ("t1",)
    assert r.calls[-1][2] == ["t2"]


def test_tests_a_pass_body_passes_mark_the_task():
    """A body returning None that the tests accept: the task stays verified, marked pass_stub_passes."""
    r = ScriptedRunner({}, {"t1": "failed"}, pass_stub={})
    v = verify_task(spec("t1"), r, "src", blank, shared())
    assert v.status is TaskStatus.VERIFIED and v.pass_stub_passes and v.configurations == ()


def test_every_trivial_body_runs_and_those_the_tests_pass_are_named():
    """`return x` passes tests that only check `is not None`; `return None` does not: named, in order."""
    bodies = (("none", "return None"), ("first_arg", "return x"), ("constant", "return 3"))
    task = TaskTests("p/f.py::f", "f.py", "f", 1, ("t1",), bodies)
    r = ScriptedRunner({}, {"t1": "failed"}, trivial={"return x": {}, "return 3": {}})
    v = verify_task(task, r, "src", blank, shared())
    assert v.status is TaskStatus.VERIFIED and v.trivial_passes == ("first_arg", "constant")
    assert not v.pass_stub_passes
    assert len(r.calls) == 5  # the original, `raise`, then one run per trivial body


def test_a_weak_task_runs_no_other_trivial_body():
    """`raise` decides weak as before; the other bodies are not run for a task left out anyway."""
    r = ScriptedRunner({}, {})
    v = verify_task(TaskTests("p/f.py::f", "f.py", "f", 1, ("t1",), (("first_arg", "return x"),)), r, "src",
                    blank, shared())
    assert v.status is TaskStatus.WEAK and v.trivial_passes == () and len(r.calls) == 2


def test_a_kept_decision_is_redone_when_the_trivial_bodies_change():
    """A new recording changes the `constant` body: the decision kept for the old one no longer holds."""
    task = TaskTests("p/f.py::f", "f.py", "f", 1, ("t1",), (("none", "return None"), ("constant", "return 3")))
    v = verify_task(task, ScriptedRunner({}, {"t1": "failed"}, pass_stub={}, trivial={"return 3": {}}), "src",
                    blank, shared())
    assert Verification.from_json(v.to_json(task), task) == v and v.trivial_passes == ("none", "constant")
    other = TaskTests(task.task_id, "f.py", "f", 1, ("t1",), (("none", "return None"), ("constant", "return 4")))
    assert Verification.from_json(v.to_json(task), other) is None


def test_a_stub_caught_in_one_configuration_only_is_not_weak():
    """The `pass` stub passes where the variable is set and fails where it is not: not marked."""
    confs = {**shared(conf="pure"), **shared(conf="c")}
    r = ScriptedRunner({}, {"t1": "failed"}, pass_stub={("c", "t1"): "failed"})
    v = verify_task(spec("t1"), r, "src", blank, confs)
    assert v.status is TaskStatus.VERIFIED and not v.pass_stub_passes
    assert v.configurations == (("pure", ("t1",)), ("c", ("t1",)))

    r = ScriptedRunner({}, {"t1": "failed"}, pass_stub={})
    assert verify_task(spec("t1"), r, "src", blank, confs).pass_stub_passes


def test_a_test_failing_every_run_of_one_configuration_is_not_expected_there():
    """Skipped (or failing) in every run of one configuration: kept for the others, not flaky."""
    confs = {**shared(conf="pure", always={"t2"}), **shared(conf="c")}
    r = ScriptedRunner({("pure", "t2"): ["skipped"]}, {"t1": "failed"})
    v = verify_task(spec("t1", "t2"), r, "src", blank, confs)
    assert v.status is TaskStatus.VERIFIED and v.tests == ("t1", "t2") and v.flaky == ()
    assert dict(v.configurations) == {"pure": ("t1",), "c": ("t1", "t2")}


# -- store ------------------------------------------------------------------------------------


def task(tid: str, status: TaskStatus, aliases=(), level=Level.SELF_CONTAINED, project="p") -> Task:
    return Task(task_id=tid, aliases=list(aliases), project=project, commit="c", file="f.py", qualname=tid,
                name=tid, lineno=1, end_lineno=3, signature="def f():", docstring="d", source="def f(): pass",
                level=level, status=status)


def test_store_roundtrip_filters_and_aliases(tmp_path):
    s = Settings(home=tmp_path)
    store.save_project(s, "p", "c", [task("a", TaskStatus.VERIFIED, ["X"]), task("b", TaskStatus.WEAK, ["X", "Y"]),
                                     task("c", TaskStatus.UNCOVERED, level=Level.FILE_RUNNABLE)], "{}")
    assert [t.task_id for t in load_tasks(s)] == ["a"]
    assert [t.task_id for t in load_tasks(s, include_weak=True)] == ["a", "b"]
    assert [t.task_id for t in load_tasks(s, status="all", level="file_runnable")] == ["c"]
    assert find_task(s, "Y").task_id == "b"
    with pytest.raises(TaskError, match="alias of several"):
        find_task(s, "X")
    # Rebuilding a project replaces its rows; a project built with --include-weak keeps its weak tasks.
    store.save_project(s, "p", "c2", [task("b", TaskStatus.WEAK)], "{}", include_weak=True)
    assert [t.task_id for t in load_tasks(s)] == ["b"]
    assert store.export_jsonl(load_tasks(s, status="all"), tmp_path / "o.jsonl") == 1
