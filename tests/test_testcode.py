"""The tests that run are the tests that were verified (issue 34): each sample here is a WRONG `add` that
changes the tiny project's collected tests so that they pass anyway, in a real pytest run with both executors:
from a thread started at import, from inside a test, before collection ends (a profile function at import),
while the harness snapshots them, by pointing an item at another function, and by rebinding a name in a test
module's globals. Each fails as tampering
with the change named; the right `add` beside them passes."""

from __future__ import annotations

import os
import subprocess
import sys

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
_SWAP = ("def _swap():\n"
         "    import sys\n"
         "    module = sys.modules['tests.test_mod']\n"
         "    for f in (module.test_add, module.test_add_neg):\n"
         "        f.__code__ = (lambda: None).__code__\n"
         "    _done.append(True)\n")

# name -> the sample: wrong (a - b) once the tests are changed, right before (so that the first test passes).
SAMPLES = {
    "a thread started at import": (  # it waits until the test module's functions are there, then swaps them
        "import sys, threading, time\n_done = []\n" + _SWAP
        + "def _waiting():\n    return not hasattr(sys.modules.get('tests.test_mod'), 'test_add_neg')\n"
        "def _watch():\n    while _waiting():\n        time.sleep(0.0005)\n"
        "    _swap()\n"
        "def add(a, b, _w=threading.Thread(daemon=True, target=lambda: (  # the helpers may come after add\n"
        "        [time.sleep(0.0005) for _ in iter(lambda: '_watch' in globals(), True)], globals()['_watch']())).start()):\n"
        "    return a - b\n"),
    "inside a test": (
        "_done = []\n" + _SWAP
        + "def add(a, b):\n    if not _done:\n        _swap()\n        return a + b\n    return a - b\n"),
    "before collection ends": (
        "import sys\n"
        "def _on_return(frame, event, arg):\n"
        "    if event == 'return' and frame.f_code.co_name == '<module>' and 'test_mod' in frame.f_code.co_filename:\n"
        "        for name in ('test_add', 'test_add_neg'):\n"
        "            frame.f_globals[name].__code__ = (lambda: None).__code__\n"
        "_profile = sys.setprofile(_on_return)\n"
        "def add(a, b):\n    sys.setprofile(None)\n    return a - b\n"),
    "while the harness snapshots the tests": (  # between the harness's checks and its snapshot, on the main thread
        "import sys\n"
        "def _on_return(frame, event, arg):\n"
        "    if event == 'return' and frame.f_code.co_name == '_dedupe':\n"
        "        module = sys.modules['tests.test_mod']\n"
        "        for f in (module.test_add, module.test_add_neg):\n"
        "            f.__code__ = (lambda: None).__code__\n"
        "        sys.setprofile(None)\n"
        "_profile = sys.setprofile(_on_return)\n"
        "def add(a, b):\n    return a - b\n"),
    "the function an item calls": (  # what pytest's `obj` property returns, read from the item's dict
        "import gc\n_done = []\n"
        "def add(a, b):\n"
        "    if not _done:\n"
        "        _done.append(True)\n"
        "        for item in gc.get_objects():\n"
        "            if type(item).__name__ == 'Function' and '_obj' in getattr(item, '__dict__', {}):\n"
        "                item.__dict__['_obj'] = lambda *args, **kwargs: None\n"
        "        return a + b\n"
        "    return a - b\n"),
    "a test module's global": (
        "import sys\n"
        "def add(a, b):\n"
        "    sys.modules['tests.test_mod'].add = lambda a, b: a + b\n"
        "    return a + b\n"),
}


def _naive(request) -> dict[str, Evidence]:
    with quiet(), create_sandbox("local", spec_for("local", request)) as sb:
        return {name: run_sample(sb, SampleRun(relfile="pkg/mod.py", new_source=code, nodeids=NODEIDS, timeout=60,
                                 per_test_timeout=10, env={})) for name, code in {**SAMPLES, "good": GOOD}.items()}


def _workers(request) -> dict[str, Evidence]:
    with WorkerPool("local", {"tiny": spec_for("local", request)}, 1) as pool:
        return {name: pool.run("tiny", SampleRun(relfile="pkg/mod.py", new_source=code, nodeids=NODEIDS,
                                                 timeout=60, per_test_timeout=10, env={}))
                for name, code in {**SAMPLES, "good": GOOD}.items()}


@pytest.mark.parametrize("executor", [_naive, _workers], ids=["naive", "workers"])
def test_tests_changed_after_or_before_collection_fail_as_tampering(request, executor):
    """A wrong function whose sample changed the collected tests (their code, a global they use) was
    graded pass: the tests it neutered all passed."""
    evidences = executor(request)
    for name in SAMPLES:
        ev = evidences[name]
        verdict = grade(ev.expected, ev)
        assert (verdict.verdict, verdict.failure) == (VerdictKind.FAIL, "other/tampering"), (name, ev)
        assert FindingKind.TESTS_CHANGED in {f.kind for f in ev.tampering}, (name, ev.tampering)
    good = evidences["good"]
    assert good.tampering == [] and grade(good.expected, good).verdict is VerdictKind.PASS, good


def test_a_tests_helper_given_the_samples_code_before_collection_ended_is_tampering(request, tmp_path):
    """A helper of the tests (not a test item) whose code a sample swapped for its own before collection
    ended was not reported: the check compared only code from the copy's other files with their text."""
    project = write_project(tmp_path / "project")
    (project / "tests" / "test_mod.py").write_text(
        "from pkg.mod import add\n\n\ndef _check(got, want):\n    assert got == want\n\n\n"
        "def test_add():\n    _check(add(1, 2), 3)\n\n\ndef test_add_neg():\n    _check(add(-1, 1), 0)\n")
    wrong = ("import sys\n"
             "def _on_return(frame, event, arg):\n"
             "    if event == 'return' and frame.f_code.co_name == '<module>' and 'test_mod' in frame.f_code.co_filename:\n"
             "        frame.f_globals['_check'].__code__ = (lambda got, want: None).__code__\n"
             "_profile = sys.setprofile(_on_return)\n"
             "def add(a, b):\n    sys.setprofile(None)\n    return a - b\n")
    spec = SandboxSpec(project="tiny", project_dir=str(project), python=str(request.getfixturevalue("tiny_venv")),
                       limits=LIMITS)
    with quiet(), create_sandbox("local", spec) as sb:
        ev = run_sample(sb, SampleRun(relfile="pkg/mod.py", new_source=wrong, nodeids=NODEIDS, timeout=60,
                                      per_test_timeout=10, env={}))
    verdict = grade(ev.expected, ev)
    assert (verdict.verdict, verdict.failure) == (VerdictKind.FAIL, "other/tampering"), ev
    assert any("_check comes from the sample's file" in f.detail for f in ev.tampering), ev.tampering
    _right_passes_and_wrong_fails(spec)


def test_generated_methods_of_test_classes_are_not_tampering(request, tmp_path):
    """The ground truth of pre-commit failed as tampering: a NamedTuple's `__new__` (and a dataclass's
    `__init__`), made by exec with the file name `<string>`, was taken for a file of the copy that cannot be
    read."""
    from sandbox_fixtures import LIMITS, PROJECT_FILES, write_project

    from coderun.sandbox import SandboxSpec

    project = write_project(tmp_path / "project")
    (project / "tests" / "test_mod.py").write_text(
        "import collections, dataclasses, typing\nfrom pkg.mod import add\n\n"
        "Pair = collections.namedtuple('Pair', 'a b')\n\n\nclass Typed(typing.NamedTuple):\n    a: int\n\n\n"
        "@dataclasses.dataclass\nclass Data:\n    a: int\n\n\n"
        + PROJECT_FILES["tests/test_mod.py"].split("\n", 1)[1].replace("add(1, 2)", "add(*Pair(1, 2))")
        .replace("add(-1, 1)", "add(Typed(-1).a, Data(1).a)"))
    spec = SandboxSpec(project="tiny", project_dir=str(project), python=str(request.getfixturevalue("tiny_venv")),
                       limits=LIMITS)
    with quiet(), create_sandbox("local", spec) as sb:
        ev = run_sample(sb, SampleRun(relfile="pkg/mod.py", new_source=GOOD, nodeids=NODEIDS, timeout=60,
                        per_test_timeout=10, env={}))
    assert ev.tampering == [] and grade(ev.expected, ev).verdict is VerdictKind.PASS, ev


def test_a_wrapper_that_names_its_tests_file_is_not_tampering(request, tmp_path):
    """lena's ground truth failed 7/51 as tampering: hypothesis's `@given` wrapper, made by exec, carries the
    file name and line of the test it wraps, and was taken for the test file's code changed before collection."""
    from sandbox_fixtures import LIMITS, PROJECT_FILES, write_project

    from coderun.sandbox import SandboxSpec

    impersonate = (  # what hypothesis's given does: the wrapper it execs runs the test it keeps in an attribute
        "class Handle:\n    pass\n\n\n"
        "def given(test):\n    ns, handle = {}, Handle()\n    handle.inner_test = test\n"
        "    exec('def accept(f):\\n    def wrapper():\\n        return f()\\n    return wrapper\\n', ns)\n"
        "    wrapper = ns['accept'](lambda: handle.inner_test())\n    wrapper.hypothesis = handle\n"
        "    wrapper.__code__ = wrapper.__code__.replace(co_filename=test.__code__.co_filename,\n"
        "        co_firstlineno=test.__code__.co_firstlineno, co_name=test.__name__)\n"
        "    wrapper.__name__ = test.__name__\n    return wrapper\n\n\n")
    project = write_project(tmp_path / "project")
    body = PROJECT_FILES["tests/test_mod.py"].split("\n", 1)[1]
    (project / "tests" / "test_mod.py").write_text(
        "from pkg.mod import add\n\n\n" + impersonate + body.replace("def test_add(", "@given\ndef test_add("))
    spec = SandboxSpec(project="tiny", project_dir=str(project), python=str(request.getfixturevalue("tiny_venv")),
                       limits=LIMITS)
    _right_passes_and_wrong_fails(spec)


def test_generated_methods_a_conftest_holds_are_not_unreadable_test_code(tmp_path, request):
    """findpython's conftest imports dataclasses: their generated methods come from "<string>", which the check
    read as a file of the copy that cannot be read, and `tasks build` refused the project as tampering."""
    project = write_project(tmp_path / "project")
    (project / "tests" / "conftest.py").write_text(
        "import collections\nimport dataclasses\n\n\n@dataclasses.dataclass\nclass Version:\n    major: int = 0\n\n\n"
        "Pair = collections.namedtuple('Pair', 'a b')\n")
    spec = SandboxSpec(project="tiny", project_dir=str(project), python=str(request.getfixturevalue("tiny_venv")),
                       limits=LIMITS)
    with quiet(), create_sandbox("local", spec) as sb:
        ev = run_sample(sb, SampleRun(relfile="pkg/mod.py", new_source=GOOD, nodeids=NODEIDS, timeout=60, per_test_timeout=10,
                        env={}))
    assert ev.tampering == [] and grade(ev.expected, ev).verdict is VerdictKind.PASS, ev


def test_the_project_code_under_pytest_4_is_not_tampering(tmp_path_factory, request):
    """infrared pins pytest 4.6, whose assertion rewriting takes the module's path as a py.path: the check's
    reference compile passed a str, failed on the first `assert`, and every test with one read as "changed
    before collection ended", so `tasks build` refused the project as tampering."""
    from coderun.envs.local import find_python
    from tests.shared_home import built_once

    def build(folder):
        subprocess.run([find_python("3.9")[0], "-m", "venv", str(folder / "venv")], check=True)
        subprocess.run([str(folder / "venv" / "bin" / "python"), "-m", "pip", "install", "-q", "pytest==4.6.11"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    python = built_once(tmp_path_factory, "pytest4-venv", build) / "venv" / "bin" / "python"
    spec = SandboxSpec(project="tiny", project_dir=str(request.getfixturevalue("tiny_project")), python=str(python),
                       limits=LIMITS)
    _right_passes_and_wrong_fails(spec)


def _right_passes_and_wrong_fails(spec: SandboxSpec, nodeids: list[str] = NODEIDS) -> None:
    """The right `add` passes untouched by the check; a wrong one fails on the tests (not as tampering)."""
    with quiet(), create_sandbox("local", spec) as sb:
        good, wrong = (run_sample(sb, SampleRun(relfile="pkg/mod.py", new_source=code, nodeids=nodeids, timeout=60,
                                  per_test_timeout=10, env={})) for code in (GOOD, GOOD.replace("a + b", "a - b")))
    assert good.tampering == [] and grade(good.expected, good).verdict is VerdictKind.PASS, good
    assert grade(wrong.expected, wrong).verdict is VerdictKind.FAIL, wrong


_SET_IN_A_FIXTURE = ("import pytest\nfrom pkg.mod import add\nfrom tests import knobs\n\n\n"
                     "@pytest.fixture(scope='module', autouse=True)\ndef level():\n    old = knobs.LEVEL\n"
                     "    knobs.LEVEL = 2\n    yield\n    knobs.LEVEL = old\n\n\n"
                     "def test_add():\n    assert add(1, 2) == 3\n\n\ndef test_add_neg():\n    assert add(-1, 1) == 0\n")


@pytest.mark.parametrize("where", ["test", "fixture"])
def test_a_global_the_tests_set_through_the_module_name_is_not_tampering(tmp_path, request, where):
    """rdflib's test_testsuite.py sets `runner.DEFAULT_PARSER_VERSION` on a helper module of its tests folder,
    in a module-scoped fixture: the check allowed only `global NAME` in the module's own code, then only in
    plain functions (pytest wraps a fixture's body in a function or object of its own), and `tasks build`
    refused rdflib."""
    project = write_project(tmp_path / "project")
    (project / "tests" / "knobs.py").write_text("LEVEL = 1\n")
    (project / "tests" / "test_mod.py").write_text(_SET_IN_A_FIXTURE if where == "fixture" else (
        "from pkg.mod import add\nfrom tests import knobs\n\n\ndef test_add():\n    knobs.LEVEL = 2\n"
        "    assert add(1, 2) == 3\n\n\ndef test_add_neg():\n    assert add(-1, 1) == 0\n"))
    _right_passes_and_wrong_fails(SandboxSpec(project="tiny", project_dir=str(project), limits=LIMITS,
                                              python=str(request.getfixturevalue("tiny_venv"))))


def test_a_test_method_inherited_from_an_installed_library_is_not_tampering(tmp_path_factory, tmp_path):
    """rdiffweb's admin tests inherit `test_gc` from cherrypy's CPWebCase: a test function from outside the
    copy read as "not test code", and `tasks build` refused rdiffweb."""
    from coderun.envs.local import find_python
    from tests.shared_home import built_once

    def build(folder):
        subprocess.run([find_python("3.11")[0], "-m", "venv", str(folder / "venv")], check=True)
        subprocess.run([str(folder / "venv" / "bin" / "python"), "-m", "pip", "install", "-q", "pytest"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        site = next((folder / "venv" / "lib").glob("python3*/site-packages"))
        (site / "basecase.py").write_text("import unittest\n\n\nclass Base(unittest.TestCase):\n"
                                          "    def test_inherited(self):\n        self.assertTrue(True)\n")

    python = built_once(tmp_path_factory, "basecase-venv", build) / "venv" / "bin" / "python"
    project = write_project(tmp_path / "project")
    (project / "tests" / "test_mod.py").write_text(
        "from basecase import Base\n\nfrom pkg.mod import add\n\n\nclass TestAdd(Base):\n"
        "    def test_add(self):\n        assert add(1, 2) == 3\n")
    _right_passes_and_wrong_fails(SandboxSpec(project="tiny", project_dir=str(project), python=str(python),
                                              limits=LIMITS),
                                  ["tests/test_mod.py::TestAdd::test_add", "tests/test_mod.py::TestAdd::test_inherited"])


PROBE = """
import sys
import coderun_testcode as testcode

class Probe:
    def pytest_collection_finish(self, session):
        testcode.take(session.items, session.config.rootpath.as_posix(), "")
        said = [testcode.changes(), testcode._unchanged()]
        item = session.items[0]
        item.__dict__["_obj"] = lambda: None
        said += [testcode._unchanged(), testcode.changes()]
        print("PROBE", said)
        session.shouldstop = "probed"

sys.exit(__import__("pytest").main(["-q", "-p", "no:cacheprovider", "-o", "addopts=", "tests"], plugins=[Probe()]))
"""


def test_the_check_after_each_test_sees_an_items_function_replaced_through_its_dict(tmp_path):
    """The fast path reads a Function item's test function from the item's dict (`_obj`, what pytest's `obj`
    property returns), not through the property: a sample that sets it there is seen by the fast path
    itself, not only when something else sends the check down the slow one."""
    from coderun.harness import HARNESS_DIR

    project = write_project(tmp_path / "project")
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=project, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": f"{HARNESS_DIR}{os.pathsep}{project}"})
    line = next((x for x in done.stdout.splitlines() if x.startswith("PROBE")), done.stdout + done.stderr)
    assert line == ("PROBE [[], True, False, ['the test tests/test_mod.py::test_add is another function now']]"), line
