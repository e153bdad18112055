"""End to end on a small hand-made project: a real venv, a real coverage run, real sandbox runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from coderun.cli.main import app
from coderun.config import load_settings
from coderun.errors import TaskError
from coderun.manifests.schema import load_manifest
from coderun.records import TaskStatus
from coderun.tasks import build_tasks, find_task, load_tasks, store
from coderun.tasks.sandbox_runs import RUN_KINDS
from coderun.tasks.verify import ORIGINAL_RUNS
from tests.helpers import write_tree

DOC = '"""Return the {what} of the given value, computed step by step for the caller."""'

PROJECT = {
    "shop/__init__.py": "",
    "shop/prices.py": f'''import functools


def logged(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    return wrapper


@logged
def with_tax(price):
    {DOC.format(what="price with tax")}
    rate = 0.2
    tax = price * rate
    total = price + tax
    return round(total, 2)


def never_called(price):
    {DOC.format(what="discounted price")}
    discount = 0.1
    cut = price * discount
    reduced = price - cut
    return reduced


def shrug(price):
    {DOC.format(what="formatted price")}
    text = str(price)
    text = text.strip()
    text = "$" + text
    return text


def rounded(price):
    {DOC.format(what="rounded price")}
    whole = int(price)
    frac = price - whole
    up = frac >= 0.5
    return whole + int(up)
''',
    "tests/test_prices.py": '''import unittest

from shop.prices import rounded, shrug, with_tax


TAXED = []


def test_tax():
    TAXED.append(1)
    assert with_tax(10) == 12


def test_tax_zero():
    assert with_tax(0) == 0


def test_shrug_runs():
    try:
        shrug(3)
    except Exception:
        pass


def test_unrelated():
    assert 1 + 1 == 2


def test_rounded_stable():
    assert rounded(2.5) == 3
    assert rounded(0.2) == 0


def test_rounded_flaky():
    # Passes only after test_tax in the same session (test pollution): so in the baseline, the coverage run
    # and the two runs of every mapped test at once, but not in the task's own run of the original.
    assert TAXED
    assert rounded(1.2) == 1


class TaxCase(unittest.TestCase):
    def test_tax_unittest(self):
        self.assertEqual(with_tax(100), 120)
''',
    # infrared's plugin service: the first test in a process to set it up clones a plugin over the network and
    # fails; one that runs after the warm-up test (the union runs) or after the first failure passes.
    "shop/service.py": f'''_READY = []


def warm():
    _READY.append("warm")


def connect(name):
    {DOC.format(what="connection")}
    if not _READY:
        _READY.append("tried")
        raise ConnectionError("the first set-up clones a plugin over the network")
    return "connected to " + name
''',
    "tests/test_service.py": '''from shop import service


def test_warm():
    service.warm()


def test_connect_one():
    assert service.connect("a") == "connected to a"


def test_connect_two():
    assert service.connect("b") == "connected to b"
''',
}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tasks")
    write_tree(tmp / "shop", PROJECT)
    manifest_file = tmp / "shop.yaml"
    manifest_file.write_text(
        "name: shop\nsource: {path: shop}\npython: '3.11'\n"
        "tests:\n  paths: [tests]\n"
        "tasks:\n  targets:\n    - function: shop/prices.py::with_tax\n      aliases: [CE-1]\n"
        "      human_docstring: Add the tax to a price.\n")
    mp = pytest.MonkeyPatch()
    mp.setenv("CODERUN_HOME", str(tmp / "home"))
    settings = load_settings()
    report = build_tasks(load_manifest(manifest_file), settings)
    yield settings, report, manifest_file
    mp.undo()


def _by_name(settings):
    return {t.name: t for t in load_tasks(settings, status="all")}


@pytest.mark.slow
def test_covered_function_gets_exactly_the_tests_that_reach_it(built):
    settings, _, _ = built
    t = _by_name(settings)["with_tax"]
    assert t.status is TaskStatus.VERIFIED and t.mapping == "coverage"
    # Decorator and `def` lines run at import for every test; only callers of the body count.
    assert t.tests == ["tests/test_prices.py::TaxCase::test_tax_unittest", "tests/test_prices.py::test_tax",
                       "tests/test_prices.py::test_tax_zero"]
    assert t.test_files == ["tests/test_prices.py"]
    assert set(t.test_durations) == set(t.tests)
    assert t.explicit and t.aliases == ["CE-1"] and t.human_docstring == "Add the tax to a price."
    assert t.source.startswith("@logged\ndef with_tax(price):")
    assert t.task_id == "shop/shop/prices.py::with_tax"


@pytest.mark.slow
def test_uncovered_function_gets_no_tests(built):
    settings, _, _ = built
    t = _by_name(settings)["never_called"]
    assert t.status is TaskStatus.UNCOVERED and t.tests == [] and t.mapping == "none"


@pytest.mark.slow
def test_weak_task_is_detected_and_left_out_of_the_benchmark(built):
    settings, report, _ = built
    t = _by_name(settings)["shrug"]
    assert t.status is TaskStatus.WEAK and t.tests == ["tests/test_prices.py::test_shrug_runs"]
    assert "shrug" not in {x.name for x in load_tasks(settings)}
    assert "shrug" in {x.name for x in load_tasks(settings, include_weak=True)}
    assert report.projects[0].statuses["weak"] == 1


@pytest.mark.slow
def test_flaky_test_is_dropped_and_reported(built):
    settings, report, _ = built
    t = _by_name(settings)["rounded"]
    assert t.status is TaskStatus.VERIFIED
    assert t.tests == ["tests/test_prices.py::test_rounded_stable"]
    assert t.flaky_tests == ["tests/test_prices.py::test_rounded_flaky"]
    assert "tests/test_prices.py::test_rounded_flaky" in report.projects[0].flaky_tests


@pytest.mark.slow
def test_a_test_that_passes_only_after_a_dropped_one_is_dropped_too(built):
    # The task's own run fails test_connect_one (the first set-up) and passes test_connect_two after it;
    # alone, as the evaluation would run it, test_connect_two is the first set-up and fails: nothing is left.
    settings, _, _ = built
    t = _by_name(settings)["connect"]
    assert t.status is TaskStatus.FLAKY, t.status
    assert t.flaky_tests == ["tests/test_service.py::test_connect_one", "tests/test_service.py::test_connect_two"]


@pytest.mark.slow
def test_the_build_report_says_where_the_time_went(built):
    _, report, _ = built
    stages = report.projects[0].stage_seconds
    assert list(stages) == ["environment", "analysis", "coverage map", "recording", "verification", "pass+"]
    assert all(v >= 0 for v in stages.values()) and stages["verification"] > 0
    assert sum(stages.values()) <= report.projects[0].seconds + 0.1 * len(stages)


@pytest.mark.slow
def test_the_build_report_splits_the_sandbox_runs_by_kind(built):
    """Verification's and pass+'s runs by kind: the union of every mapped test twice, a task's own tests
    once per distinct set at least, a stub run per task its original passes, trivial bodies after a stub
    that is caught; their seconds are the runs' own, and the integrity checks a part of them."""
    settings, report, _ = built
    kinds = report.projects[0].run_kinds
    assert list(kinds) == [k for k in RUN_KINDS if k in kinds]
    assert kinds["original, all mapped tests"].runs == ORIGINAL_RUNS - 1
    stubbed = [t for t in load_tasks(settings, status="all") if t.status in (TaskStatus.VERIFIED, TaskStatus.WEAK)]
    assert kinds["stub"].runs >= len(stubbed) > 0 and kinds["trivial bodies"].runs > 0
    assert kinds["original, a task's tests"].runs >= len({tuple(t.tests) for t in stubbed})
    for k in kinds.values():
        assert k.tests > 0 and 0 < k.checks_seconds < k.seconds
    everything = store.build_reports(settings)["shop"]
    assert json.loads(everything)["run_kinds"]["stub"]["runs"] == kinds["stub"].runs


@pytest.mark.slow
def test_find_task_by_id_or_alias(built):
    settings, _, _ = built
    assert find_task(settings, "CE-1").name == "with_tax"
    assert find_task(settings, "shop/shop/prices.py::rounded").name == "rounded"
    with pytest.raises(TaskError):
        find_task(settings, "shop/shop/prices.py::nothing")


@pytest.mark.slow
def test_cli_list_json_and_export(built, tmp_path):
    settings, _, _ = built
    runner = CliRunner()
    res = runner.invoke(app, ["tasks", "list", "--project", "shop", "--status", "all", "--json"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    assert {r["name"]: r["status"] for r in rows} == {
        "with_tax": "verified", "never_called": "uncovered", "shrug": "weak", "rounded": "verified",
        "connect": "flaky"}
    for key in ("task_id", "aliases", "project", "file", "qualname", "level", "tests", "source"):
        assert key in rows[0]
    out = tmp_path / "tasks.jsonl"
    res = runner.invoke(app, ["tasks", "export", "-o", str(out)])
    assert res.exit_code == 0, res.output
    exported = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["name"] for r in exported) == ["rounded", "with_tax"]  # the benchmark: verified only
    bad = runner.invoke(app, ["tasks", "list", "--status", "great"])
    assert bad.exit_code == 2 and "unknown task status" in bad.output


@pytest.mark.slow
def test_unresolved_target_is_reported(built, tmp_path):
    settings, _, manifest_file = built
    text = manifest_file.read_text().replace("shop/prices.py::with_tax", "shop/prices.py::gone")
    other = tmp_path / "shop.yaml"
    other.write_text(text.replace("source: {path: shop}", f"source: {{path: {manifest_file.parent / 'shop'}}}"))
    report = build_tasks(load_manifest(other), settings)
    assert report.projects[0].unresolved == ["shop/prices.py::gone"]
    assert Path(settings.store_path).is_file()


UNDOCUMENTED = {"calc/__init__.py": "", "calc/ops.py": "def add(a, b):\n    total = a\n    total += b\n"
                "    result = total\n    return result\n",
                "tests/test_ops.py": "from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
                "    assert add(1, 1) == 2\n"}  # two values: a constant body passes one


@pytest.mark.slow
def test_no_candidate_is_an_error_and_undocumented_functions_can_be_taken(tmp_path, monkeypatch):
    """jmespath (2 of 239 functions documented) built 0 candidates and exited 0 without a word; `eval` then
    said to build them."""
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    write_tree(tmp_path / "calc", UNDOCUMENTED)
    f = tmp_path / "calc.yaml"
    f.write_text("name: calc\nsource: {path: calc}\npython: '3.11'\ntests:\n  paths: [tests]\n")
    res = CliRunner().invoke(app, ["tasks", "build", str(f)])
    out = " ".join(res.output.split())
    assert res.exit_code == 5, res.output
    assert "no candidate function among the 2 the analysis found (1 no English docstring, 1 test code)" in out
    assert "tasks.discover.undocumented: true" in out
    f.write_text(f.read_text() + "tasks:\n  discover: {undocumented: true}\n")
    build_tasks(load_manifest(f), load_settings())
    assert [t.qualname for t in load_tasks(load_settings(), project="calc")] == ["add"]


@pytest.mark.slow
def test_a_coverage_run_that_fails_is_an_error_with_its_cause(tmp_path, monkeypatch):
    """A coverage run that failed (coverage 4.4.2 pinned) fell back to mapping by file name with one log line:
    9 of 82 tasks verified instead of most."""
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    write_tree(tmp_path / "calc", {**UNDOCUMENTED, "tests/conftest.py":
                                   "import sys\nif 'coverage' in sys.modules:\n    raise SystemExit(3)\n"})
    f = tmp_path / "calc.yaml"
    f.write_text("name: calc\nsource: {path: calc}\npython: '3.11'\ntests:\n  paths: [tests]\n"
                 "tasks:\n  discover: {undocumented: true}\n")
    with pytest.raises(TaskError) as e:
        build_tasks(load_manifest(f), load_settings())
    assert "the coverage run that maps tests to functions did not complete (exit 3)" in e.value.message
    assert "coverage.log" in e.value.hint


def _finish_costs(log: str) -> dict:
    finish = [json.loads(line) for line in log.splitlines() if '"kind": "finish"' in line]
    return finish[0]["integrity"]


@pytest.mark.slow
def test_one_run_of_the_original_takes_the_test_code_snapshot(built):
    """The test-code checks cost O(tests) after each test (rdflib: 30 s of a 113 s run). One run takes them: the
    first shared run of the original, which runs every mapped test (a test dependency that changes test code
    would fail every sample, and the build says so). The original's other runs (the same tests, the same code)
    and coderun's own bodies (stubs, trivial bodies, pass+) skip them."""
    settings, _, _ = built
    logs = sorted((settings.runs / "tasks" / "shop").glob("run-*.log"))
    checked, skipped = [], []
    for log in logs:
        text = log.read_text()
        original = "# body: the project's own text\n" in text
        assert original or "# body: the project's own text (no test-code snapshot)" in text \
            or "# body: coderun's own" in text
        tests = len(text.split("# tests: ", 1)[1].split("\n", 1)[0].split())
        (checked if original else skipped).append((tests, _finish_costs(text)["tests_snapshot_ms"]))
    assert len(checked) == 1 and checked[0][1] > 0, checked
    assert checked[0][0] == max(n for n, _ in checked + skipped)  # every mapped test
    assert skipped and all(ms == 0 for _, ms in skipped), skipped
