"""Recording the original's calls: the coderun_recorder plugin in a real pytest run, and record_calls end to
end on a small hand-made project (real subprocesses; this interpreter is the project's venv)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from coderun.harness import HARNESS_DIR as HARNESS
from coderun.harness.coderun_values import load_call
from coderun.manifests.schema import Manifest
from coderun.plus.record import record_calls
from tests.helpers import write_tree

pytestmark = pytest.mark.integration  # a venv, a sandbox or a project's tests in every test

MODULE = '''import functools
import time


def add(a, b):
    return a + b


class Counter:
    def __init__(self):
        self.n = 0

    @functools.lru_cache(maxsize=None)
    def cached(self, k):
        return k

    def bump(self, k):
        self.n += k
        return self.n


def check(x):
    try:
        if x < 0:
            raise ValueError("negative")
        return x
    finally:
        x = None


def now(tag):
    return time.time()


def first_line(fh):
    return fh.readline()


def count_up(n):
    for i in range(n):
        yield i


def grow(items):
    items.append(len(items))


def rebind(items):
    items.append(0)
    items = None
    return 1


def square(x):
    return x * x


def size(text):
    return len(text)
'''

TESTS = '''import threading

import pytest

from pkg.mod import Counter, add, check, count_up, first_line, grow, now, rebind, size, square


def test_add():
    assert add(1, 2) == 3
    assert add("a", "b") == "ab"
    assert add(1, 2) == 3


def test_counter():
    c = Counter()
    c.bump(2)
    assert c.bump(3) == 5
    assert c.cached(4) == 4


def test_check():
    assert check(1) == 1
    with pytest.raises(ValueError):
        check(-1)


def test_now():
    assert now("x") > 0


def test_first_line(tmp_path):
    p = tmp_path / "f.txt"
    p.write_text("hello\\n")
    with open(p) as fh:
        assert first_line(fh) == "hello\\n"


def test_count_up():
    assert list(count_up(3)) == [0, 1, 2]
    assert list(count_up(2)) == [0, 1]


def test_grow_in_thread():
    items = [7]
    t = threading.Thread(target=grow, args=(items,))
    t.start()
    t.join()
    assert items == [7, 1]


def test_rebind():
    items = []
    assert rebind(items) == 1


def test_square_many():
    assert [square(i) for i in range(30)][-1] == 841


def test_size():
    assert size("x" * 5000) == 5000
    assert size("short") == 5
'''


def _targets(source: str, file: str) -> dict[str, dict[str, object]]:
    """qualname -> target, as coderun_recorder reads it, for every function of `source`."""
    out: dict[str, dict[str, object]] = {}

    def walk(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                walk(node.body, prefix + node.name + ".")
            elif isinstance(node, ast.FunctionDef):
                first = min([d.lineno for d in node.decorator_list] + [node.lineno])
                out[prefix + node.name] = {"file": file, "qualname": prefix + node.name, "name": node.name,
                                           "lineno": node.lineno, "first": first, "end_lineno": node.end_lineno}

    walk(ast.parse(source).body, "")
    return out


TARGETS = _targets(MODULE, "pkg/mod.py")


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("toy") / "toy"
    write_tree(root, {"pkg/__init__.py": "", "pkg/mod.py": MODULE, "tests/test_mod.py": TESTS})
    return root


def _plugin_run(project: Path, tmp: Path, *, max_calls: int = 20, max_bytes: int = 65536, args: tuple = ()
                ) -> tuple[dict[str, list[dict]], dict[str, dict[str, int]], list[str]]:
    """(task id -> captured lines, task id -> counts, errors) of one pytest run with the plugin."""
    out = tmp / "out.jsonl"
    spec = tmp / "spec.json"
    spec.write_text(json.dumps({"targets": list(TARGETS.values()), "task_ids": list(TARGETS),
                                "max_calls": max_calls, "max_bytes": max_bytes, "out": str(out)}))
    env = {**os.environ, "CODERUN_RECORD": str(spec),
           "PYTHONPATH": os.pathsep.join([str(project), str(HARNESS)])}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "coderun_recorder",
                           "tests", *args], cwd=project, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    calls: dict[str, list[dict]] = {}
    counts: dict[str, dict[str, int]] = {}
    errors: list[str] = []
    for line in out.read_text().splitlines():
        d = json.loads(line)
        if "counts" in d:
            counts[d["task_id"]] = d["counts"]
        elif "error" in d:
            errors.append(d["error"])
        else:
            calls.setdefault(d["task_id"], []).append(d)
    return calls, counts, errors


@pytest.fixture
def importable(project, monkeypatch):
    """The toy project's modules importable here (load_call unpickles its objects), for one test."""
    monkeypatch.syspath_prepend(str(project))
    yield
    for name in [m for m in sys.modules if m == "pkg" or m.startswith("pkg.")]:
        del sys.modules[name]


def test_plugin_records_inputs_before_and_effects_after(project, tmp_path, importable):
    calls, counts, errors = _plugin_run(project, tmp_path)
    assert errors == []
    assert [c["obs"]["value"] for c in calls["add"]] == [3, "ab"]
    assert counts["add"] == {**counts["add"], "calls": 3, "captured": 2, "repeated": 1}
    bumps = calls["Counter.bump"]
    receiver, k = load_call(bumps[1]["input"])[0]
    assert (receiver.n, k) == (2, 3)                                  # the receiver as it was at the call
    assert bumps[1]["obs"]["args"] == ["list", [["obj", "pkg.mod.Counter", [["n", 5]]], 3]]  # and after
    assert bumps[1]["obs"]["outcome"] == "return" and bumps[1]["obs"]["value"] == 5
    assert [(c["obs"]["outcome"], c["obs"]["value"]) for c in calls["check"]] == [("return", 1), ("raise", "ValueError")]
    assert calls["grow"][0]["obs"]["args"] == ["list", [["list", [7, 1]]]]  # called in another thread
    assert load_call(calls["grow"][0]["input"]) == ([[7]], {})
    assert calls["Counter.cached"][0]["obs"]["value"] == 4            # found under its decorator
    assert "first_line" not in calls and counts["first_line"]["unpicklable"] == 1
    assert "count_up" not in calls and counts["count_up"] == {**counts["count_up"], "calls": 2, "generator": 2}
    assert all(isinstance(c["obs"]["seconds"], float) for cs in calls.values() for c in cs)


def test_rebound_argument_is_reported_by_the_object_captured_at_the_call(project, tmp_path):
    """A function that rebinds its parameter name must still show what it did to the object it was given."""
    calls, _, _ = _plugin_run(project, tmp_path)
    assert calls["rebind"][0]["obs"]["args"] == ["list", [["list", [0]]]]
    assert load_call(calls["rebind"][0]["input"]) == ([[]], {})


def test_plugin_bounds_calls_and_bytes(project, tmp_path):
    calls, counts, _ = _plugin_run(project, tmp_path, max_calls=5, max_bytes=200)
    assert len(calls["square"]) == 5
    assert counts["square"] == {**counts["square"], "calls": 30, "captured": 5, "over_limit": 25}
    assert [c["obs"]["value"] for c in calls["size"]] == [5]
    assert counts["size"]["too_large"] == 1


def test_plugin_without_spec_does_nothing(project, tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(project), str(HARNESS)])}
    env.pop("CODERUN_RECORD", None)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "coderun_recorder",
                           "tests"], cwd=project,
                          env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


def _manifest(project: Path, timeout: float = 600.0) -> Manifest:
    return Manifest.model_validate({"name": "toy", "source": {"path": str(project)}, "python": "3.11",
                                    "tests": {"paths": ["tests"], "timeout": timeout}})


def test_record_calls_keeps_what_both_runs_agree_on(project, tmp_path):
    names = ["add", "Counter.bump", "check", "now", "first_line", "count_up"]
    targets = {f"toy/{q}": (TARGETS[q], [f"tests/test_mod.py::{t}"]) for q, t in [
        ("add", "test_add"), ("Counter.bump", "test_counter"), ("check", "test_check"), ("now", "test_now"),
        ("first_line", "test_first_line"), ("count_up", "test_count_up")]}
    log = tmp_path / "record.log"
    before = sorted(project.rglob("*"))
    got = record_calls(_manifest(project), Path(sys.executable), project, targets, log=log)
    assert sorted(got) == sorted(f"toy/{q}" for q in names)
    assert [c.obs["value"] for c in got["toy/add"].calls] == [3, "ab"]
    assert got["toy/add"].seen == 3 and got["toy/add"].uncaptured == {}
    assert [c.obs["outcome"] for c in got["toy/check"].calls] == ["return", "raise"]
    assert len(got["toy/Counter.bump"].calls) == 2
    now = got["toy/now"]
    assert (now.calls, now.seen, now.nondeterministic) == ([], 1, 1)   # time.time() differs between runs
    assert got["toy/first_line"].uncaptured == {"unpicklable": 1}
    assert got["toy/count_up"].uncaptured == {"generator": 2}
    assert log.read_text().count("-p coderun_recorder") == 2
    assert sorted(project.rglob("*")) == before  # the runs were made on copies


def test_a_mapped_id_that_does_not_collect_leaves_the_others_recorded(project, tmp_path):
    """rdflib's parametrize ids embed the path of the tree the coverage map ran in; another tree does not
    collect them. Given on pytest's command line, one such id ran no test at all ("ERROR: not found"), and
    every task of the project got no pass+ input. Only the wanted tests run: `test_square_many` is not."""
    gone = "tests/test_mod.py::test_manifest[file:///tmp/coderun-covmap-x/tree/manifest.ttl#t1]"
    targets = {"toy/add": (TARGETS["add"], ["tests/test_mod.py::test_add", gone]),
               "toy/square": (TARGETS["square"], [gone])}
    got = record_calls(_manifest(project), Path(sys.executable), project, targets, log=tmp_path / "log")
    assert [c.obs["value"] for c in got["toy/add"].calls] == [3, "ab"]
    assert got["toy/add"].uncaptured == {}
    assert got["toy/square"].seen == 0


def test_record_calls_uses_what_a_killed_run_wrote(tmp_path):
    """A run killed at the time limit still leaves the calls captured before: both runs' are used."""
    root = tmp_path / "slow"
    write_tree(root, {"pkg/__init__.py": "", "pkg/mod.py": MODULE, "tests/test_slow.py":
                      "import time\nfrom pkg.mod import add\n\n\ndef test_slow():\n    assert add(2, 2) == 4\n"
                      "    time.sleep(60)\n"})
    targets = {"toy/add": (TARGETS["add"], ["tests/test_slow.py::test_slow"])}
    got = record_calls(_manifest(root, timeout=1.0), Path(sys.executable), root, targets, log=tmp_path / "log")
    rec = got["toy/add"]
    assert [c.obs["value"] for c in rec.calls] == [4]
    assert rec.uncaptured == {"run_incomplete": 1}
    assert "timed out" in (tmp_path / "log").read_text()


def test_record_calls_without_output_says_the_run_failed(project, tmp_path):
    python = tmp_path / "venv" / "bin" / "python"  # no interpreter there: the run cannot start
    targets = {"toy/add": (TARGETS["add"], ["tests/test_mod.py::test_add"])}
    got = record_calls(_manifest(project), python, project, targets, log=None)
    assert got["toy/add"].calls == [] and got["toy/add"].uncaptured == {"run_failed": 1}


def test_tests_that_replace_the_tracer_are_reported(tmp_path):
    """A test that sets its own sys.settrace stops the recording: the output must say so, not look complete."""
    root = tmp_path / "tracer"
    write_tree(root, {"pkg/__init__.py": "", "pkg/mod.py": MODULE, "tests/test_trace.py":
                      "import sys\nfrom pkg.mod import add\n\n\ndef test_a():\n    assert add(1, 1) == 2\n"
                      "    sys.settrace(None)\n    sys.settrace(lambda *a: None)\n\n\n"
                      "def test_b():\n    assert add(2, 2) == 4\n"})
    calls, counts, errors = _plugin_run(root, tmp_path)
    assert [c["obs"]["value"] for c in calls["add"]] == [2]
    assert counts["add"]["calls"] == 1
    assert len(errors) == 1 and "replaced the recorder's tracer" in errors[0]
