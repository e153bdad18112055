"""run_sample on a tiny hand-made project, with both backends: correct code passes; wrong code, hangs,
early exits, forged output, conftest files and patched reporting never pass."""

from __future__ import annotations

import pytest
from sandbox_fixtures import LIMITS, NODEIDS, quiet
from sandbox_fixtures import sandbox as sandbox  # noqa: F401  (the parametrized fixture)

from coderun.records import Finding, FindingKind, VerdictKind
from coderun.runner.evidence import SampleRun
from coderun.runner.execute import run_sample
from coderun.runner.grade import grade
from coderun.sandbox import SandboxSpec, create_sandbox

pytestmark = pytest.mark.integration  # a venv, a sandbox or a project's tests in every test

GOOD = "def add(a, b):\n    return a + b\n"


def run(sandbox, source, tmp_path=None, nodeids=NODEIDS, **kw):
    args = dict(relfile="pkg/mod.py", new_source=source, nodeids=nodeids, timeout=60, per_test_timeout=3,
                env={"PYTHONHASHSEED": "0"})
    args.update(kw)
    if tmp_path is not None:
        args["log_path"] = tmp_path / "test.log"
    return run_sample(sandbox, SampleRun(**args))


def verdict(evidence):
    return grade(evidence.expected, evidence).verdict


def kinds(evidence):
    return {f.kind for f in evidence.tampering}


def test_correct_function_passes_and_leaves_a_log(sandbox, tmp_path):
    ev = run(sandbox, GOOD, tmp_path)
    assert verdict(ev) is VerdictKind.PASS, ev
    assert ev.exit_code == 0 and not ev.tampering and ev.infra_error is None
    assert sorted(o.nodeid for o in ev.outcomes) == sorted(NODEIDS)
    log = (tmp_path / "test.log").read_text()
    assert "reporter records" in log and ev.log_path == str(tmp_path / "test.log")


def test_wrong_function_fails_with_the_assertion_in_the_message(sandbox):
    ev = run(sandbox, "def add(a, b):\n    return a - b\n")
    assert verdict(ev) is VerdictKind.FAIL
    failed = {o.nodeid: o for o in ev.outcomes}
    assert failed[NODEIDS[0]].outcome == "failed" and "assert -1 == 3" in failed[NODEIDS[0]].message


def test_infinite_loop_times_out_per_test(sandbox):
    ev = run(sandbox, "def add(a, b):\n    while True:\n        pass\n", per_test_timeout=1)
    assert ev.timed_out and verdict(ev) is VerdictKind.FAIL
    assert all("Timeout" in o.message for o in ev.outcomes)


def test_coderun_own_body_that_loops_is_stopped_by_its_cpu_limit(sandbox):
    """A task build's stub or trivial body may get a per-test CPU limit below its wall-clock one: a loop ends
    there; a body that only waits still ends at the wall clock's; a sample never gets the CPU limit."""
    loop, sleep = "def add(a, b):\n    while True:\n        pass\n", "import time\ndef add(a, b):\n    time.sleep(30)\n"
    looped = run(sandbox, loop, per_test_timeout=20, trusted=True, cpu_per_test=0.2)
    assert looped.timed_out and verdict(looped) is VerdictKind.FAIL
    assert all("Timeout: test used over 0.2 s of CPU" in o.message for o in looped.outcomes), looped.outcomes
    slept = run(sandbox, sleep, per_test_timeout=1, trusted=True, cpu_per_test=0.2)
    assert all("Timeout: test exceeded 1 s (coderun per-test timeout)" in o.message for o in slept.outcomes)
    sample = run(sandbox, loop, nodeids=NODEIDS[:1], per_test_timeout=1, cpu_per_test=0.2)
    assert all("Timeout: test exceeded 1 s" in o.message for o in sample.outcomes), sample.outcomes


def test_swallowed_alarm_is_stopped_by_the_outer_limit(sandbox):
    """A loop that catches BaseException outlives the per-test alarm; faulthandler or the hard limit ends it."""
    src = ("def add(a, b):\n    while True:\n        try:\n            while True:\n                pass\n"
           "        except BaseException:\n            pass\n")
    ev = run(sandbox, src, per_test_timeout=1, timeout=30)
    assert ev.timed_out and verdict(ev) is VerdictKind.FAIL


@pytest.mark.parametrize("source", [
    "import sys\nsys.exit(0)\n" + GOOD,
    "import os\nos._exit(0)\n" + GOOD,
    "import os\ndef add(a, b):\n    os._exit(0)\n",
    "import sys\ndef add(a, b):\n    sys.exit(0)\n",
    "def add(a, b):\n    raise KeyboardInterrupt\n",
], ids=["sys.exit-at-import", "os._exit-at-import", "os._exit-in-function", "sys.exit-in-function",
        "KeyboardInterrupt"])
def test_exiting_early_does_not_pass(sandbox, source):
    assert verdict(run(sandbox, source)) is VerdictKind.FAIL


def test_printed_passed_lines_do_not_pass(sandbox):
    src = (f"import sys\nfor n in {NODEIDS!r}:\n    print(n + ' PASSED')\n"
           "print('== 2 passed in 0.01s ==')\ndef add(a, b):\n    return 0\n")
    assert verdict(run(sandbox, src)) is VerdictKind.FAIL


def test_writing_a_conftest_does_not_pass_and_is_flagged(sandbox):
    conftest = ("import pytest\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
                "    out = yield\n    out.get_result().outcome = 'passed'\n")
    src = ("import os\nhere = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))\n"
           f"for d in ('', 'tests'):\n    open(os.path.join(here, d, 'conftest.py'), 'w').write({conftest!r})\n"
           "def add(a, b):\n    return 0\n")
    ev = run(sandbox, src)
    assert verdict(ev) is VerdictKind.FAIL
    assert FindingKind.CONFTEST_CREATED in kinds(ev)
    assert any("conftest.py created" in f.detail for f in ev.tampering)


def test_patching_pytest_reports_is_flagged(sandbox):
    src = ("import _pytest.reports as r\nr.BaseReport.failed = property(lambda self: False)\n"
           "def add(a, b):\n    return 0\n")
    ev = run(sandbox, src)
    assert verdict(ev) is VerdictKind.FAIL
    assert FindingKind.PYTEST_REPLACED in kinds(ev)
    assert any("BaseReport.failed was replaced" in f.detail for f in ev.tampering)


def test_registering_a_forging_plugin_is_flagged(sandbox):
    """A sample that finds pytest's plugin manager can forge outcomes; it cannot do it unseen."""
    src = ("import gc, pytest\nclass Forge:\n    @pytest.hookimpl(hookwrapper=True)\n"
           "    def pytest_runtest_makereport(self, item, call):\n        out = yield\n"
           "        out.get_result().outcome = 'passed'\n"
           "for obj in gc.get_objects():\n    if type(obj).__name__ == 'PytestPluginManager':\n"
           "        obj.register(Forge())\n        break\ndef add(a, b):\n    return 0\n")
    ev = run(sandbox, src)
    assert FindingKind.PLUGIN_REGISTERED_AT_COLLECTION in kinds(ev)
    assert any("plugin was registered" in f.detail for f in ev.tampering)


def test_editing_the_tests_is_flagged(sandbox):
    src = ("import os\nhere = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))\n"
           "open(os.path.join(here, 'tests', 'test_mod.py'), 'a').write('\\n# edited\\n')\n" + GOOD)
    ev = run(sandbox, src)
    assert Finding(kind=FindingKind.TEST_FILE_MODIFIED,
                   detail="test file modified during the run: tests/test_mod.py") in ev.tampering


def test_a_missing_expected_test_is_not_a_pass(sandbox):
    ev = run(sandbox, GOOD, nodeids=[*NODEIDS, "tests/test_mod.py::test_that_does_not_exist"])
    assert verdict(ev) is VerdictKind.FAIL


def test_each_sample_starts_from_the_pristine_tree(sandbox):
    run(sandbox, "import os\nopen(os.path.abspath(__file__) + '.bak', 'w').write('x')\n"
                 "open(os.path.join(os.path.dirname(__file__), '__init__.py'), 'w').write('raise ImportError')\n" + GOOD)
    ev = run(sandbox, GOOD)
    assert verdict(ev) is VerdictKind.PASS and not ev.tampering


def test_a_broken_sandbox_is_infra_not_fail(request, tmp_path):
    from sandbox_fixtures import spec_for

    from coderun.sandbox import create_sandbox

    with quiet():
        sb = create_sandbox("local", spec_for("local", request))
        sb.start()
    sb.close()
    ev = run(sb, GOOD, tmp_path)
    assert ev.infra_error and verdict(ev) is VerdictKind.INFRA


def test_only_the_tests_a_node_id_names_are_built(sandbox, tmp_path):
    """Functions and classes of the test file that no expected node id names are never built: here building
    either would be a collection error (two ids for one parameter) that stops the whole file."""
    tests = ("from pkg.mod import add\nimport pytest\n\n\ndef test_add():\n    assert add(1, 2) == 3\n\n\n"
             "def test_add_neg():\n    assert add(-1, 1) == 0\n\n\n"
             "@pytest.mark.parametrize('x', [1], ids=['a', 'b'])\ndef test_unrelated(x):\n    pass\n\n\n"
             "class TestUnrelated:\n    @pytest.mark.parametrize('x', [1], ids=['a', 'b'])\n"
             "    def test_it(self, x):\n        pass\n")
    ev = run(sandbox, tests, tmp_path, relfile="tests/test_mod.py")
    assert verdict(ev) is VerdictKind.PASS, ev
    assert "deselected" not in (tmp_path / "test.log").read_text()


def test_a_failing_unittest_subtest_fails_its_test(sandbox):
    """pytest 9 reports a unittest test whose subTest failed as passed after the subtest's own failed report;
    the reporter kept the last report of the call, so the test's record said passed."""
    tests = ("import unittest\nfrom pkg.mod import add\n\n\nclass TestAdd(unittest.TestCase):\n"
             "    def test_add(self):\n        for a in (1, 2):\n            with self.subTest(a=a):\n"
             "                self.assertEqual(add(a, 1), 2)\n")
    ev = run(sandbox, tests, relfile="tests/test_mod.py", nodeids=["tests/test_mod.py::TestAdd::test_add"])
    assert verdict(ev) is VerdictKind.FAIL
    (outcome,) = ev.outcomes
    assert outcome.outcome == "failed" and "3 != 2" in outcome.message, outcome


def test_node_ids_are_rooted_at_the_tree_when_an_ini_file_is_below_it(tmp_path, request):
    """A monorepo (Krake: krake/pytest.ini beside krake/tests): the baseline names tests from the tree's root,
    so the run must too, or pytest roots the ids at the ini's folder and no wanted id is collected."""
    root = tmp_path / "project"
    for rel, text in {"sub/pkg/__init__.py": "", "sub/pkg/mod.py": GOOD, "sub/pytest.ini": "[pytest]\n",
                      "sub/tests/test_mod.py": "from pkg.mod import add\n\n\ndef test_add():\n"
                                               "    assert add(1, 2) == 3\n"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    spec = SandboxSpec(project="mono", project_dir=str(root), python=str(request.getfixturevalue("tiny_venv")),
                       import_root="sub", limits=LIMITS)
    with quiet(), create_sandbox("local", spec) as sb:
        ev = run(sb, GOOD, relfile="sub/pkg/mod.py", nodeids=["sub/tests/test_mod.py::test_add"])
    assert verdict(ev) is VerdictKind.PASS, ev
