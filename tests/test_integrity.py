"""The reporter's integrity check is generic: it names what a sample changed in the harness whatever the
move, not a list of known moves. Each sample here patches something no hostile sample and no other test
touches, in a real pytest run of the tiny project with both executors, and is caught with its kind; and a
phase that raised cannot be reported as passed, whichever class makes the report lie."""

from __future__ import annotations

import pytest
from sandbox_fixtures import LIMITS, NODEIDS, quiet, spec_for, write_project

from coderun.records import Evidence, FindingKind, VerdictKind
from coderun.runner.evidence import SampleRun
from coderun.runner.execute import run_sample
from coderun.runner.executors import WorkerPool
from coderun.runner.grade import grade
from coderun.sandbox import SandboxSpec, create_sandbox

pytestmark = pytest.mark.integration  # a venv, a sandbox or a project's tests in every test

GOOD = "def add(a, b):\n    return a + b\n"

# (what it changes, the kind it must raise, the sample); every one of them keeps the tests passing.
SAMPLES = {
    "a method's code object": (FindingKind.PYTEST_REPLACED,
                               "import _pytest.mark.structures as s\n"
                               "s.MarkDecorator.with_args.__code__ = (lambda self, *a, **k: self).__code__\n"
                               + GOOD),
    "an attribute added to a pluggy class": (FindingKind.PYTEST_REPLACED,
                                             "import pluggy\npluggy.HookimplMarker.extra = staticmethod(len)\n"
                                             + GOOD),
    "a module global of unittest": (FindingKind.UNITTEST_REPLACED,
                                    "import unittest.util as u\nu.safe_repr = repr\n" + GOOD),
    "a builtin": (FindingKind.RUNTIME_REPLACED, "import builtins\n_s = builtins.sorted\n"
                                                "builtins.sorted = lambda *a, **k: _s(*a, **k)\n" + GOOD),
    "a sys attribute pytest calls": (FindingKind.RUNTIME_REPLACED, "import sys\n_x = sys.exc_info\n"
                                                                   "sys.exc_info = lambda: _x()\n" + GOOD),
    "the report of a failing call, through a subclass's property": (
        FindingKind.OUTCOME_FORGED,
        "def add(a, b):\n    import _pytest.reports as r\n"
        "    for cls in r.BaseReport.__subclasses__():\n"
        "        cls.outcome = property(lambda self: 'passed', lambda self, v: None)\n"
        "    raise AssertionError('wrong on purpose')\n"),
}


def _naive(request) -> dict[str, Evidence]:
    with quiet(), create_sandbox("local", spec_for("local", request)) as sb:
        return {name: run_sample(sb, SampleRun(relfile="pkg/mod.py", new_source=code, nodeids=NODEIDS, timeout=60,
                                 per_test_timeout=10, env={})) for name, (_, code) in SAMPLES.items()}


def _workers(request) -> dict[str, Evidence]:
    with WorkerPool("local", {"tiny": spec_for("local", request)}, 1) as pool:
        return {name: pool.run("tiny", SampleRun(relfile="pkg/mod.py", new_source=code, nodeids=NODEIDS,
                                                 timeout=60, per_test_timeout=10, env={}))
                for name, (_, code) in SAMPLES.items()}


@pytest.mark.parametrize("executor", [_naive, _workers], ids=["naive", "workers"])
def test_any_change_to_the_harness_is_caught_and_named(request, executor):
    """Patching what no known move names still fails the sample as tampering, with the change named."""
    evidences = executor(request)
    for name, (kind, _) in SAMPLES.items():
        ev = evidences[name]
        verdict = grade(ev.expected, ev)
        assert (verdict.verdict, verdict.failure) == (VerdictKind.FAIL, "other/tampering"), (name, ev)
        assert kind in {f.kind for f in ev.tampering}, (name, ev.tampering)


def test_the_good_sample_raises_nothing(request):
    """The control: the same run with the plain function has no finding at all."""
    with WorkerPool("local", {"tiny": spec_for("local", request)}, 1) as pool:
        ev = pool.run("tiny", SampleRun(relfile="pkg/mod.py", new_source=GOOD, nodeids=NODEIDS, timeout=60,
                                        per_test_timeout=10, env={}))
    assert ev.tampering == [] and grade(ev.expected, ev).verdict is VerdictKind.PASS, ev


def test_doctests_that_show_values_do_not_replace_a_builtin(tmp_path, request):
    """semver 2.13.0's doctests: each shown value sets `builtins._` again (the displayhook's), which read as a
    builtin replaced, and `tasks build` refused the project as tampering."""
    project = write_project(tmp_path / "project")
    (project / "pkg" / "other.py").write_text('def double(x):\n    """\n    >>> double(2)\n    4\n    """\n'
                                              '    return 2 * x\n\n\ndef triple(x):\n    """\n    >>> triple(2)\n'
                                              '    6\n    """\n    return 3 * x\n')
    spec = SandboxSpec(project="tiny", project_dir=str(project), python=str(request.getfixturevalue("tiny_venv")),
                       limits=LIMITS)
    nodeids = ["pkg/other.py::pkg.other.double", "pkg/other.py::pkg.other.triple", *NODEIDS]
    with quiet(), create_sandbox("local", spec) as sb:
        ev = run_sample(sb, SampleRun(relfile="pkg/mod.py", new_source=GOOD, nodeids=nodeids, timeout=60, per_test_timeout=10,
                        env={}, pytest_args=("--doctest-modules",)))
    assert ev.tampering == [] and grade(ev.expected, ev).verdict is VerdictKind.PASS, ev
