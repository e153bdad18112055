"""Verdicts that mean what they say, end to end on a small hand-made project (real venv, tasks, sandbox runs):
a doctest of the target's own docstring survives a sample's docstring; a task a trivial body passes is kept
out of the headline; tests whose parametrize ids change between runs are identified by position."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from coderun.cli.main import app
from coderun.config import load_settings
from coderun.evaluation.store import RunStore
from coderun.manifests.schema import load_manifest
from coderun.tasks import build_tasks, load_tasks
from tests.helpers import write_tree

PROJECT = {
    "fid/__init__.py": "",
    "fid/sums.py": '''import time


def dictsum(a, b):
    """Sum two dicts key by key.

    >>> dictsum({'x': 1}, {'x': 2, 'y': 3})
    {'x': 3, 'y': 3}
    """
    out = dict(a)
    for key, value in b.items():
        out[key] = out.get(key, 0) + value
    return out


def relabel(text, old, new):
    """Replace every "old:" prefix of the words of text by "new:"."""
    words = text.split(" ")
    fixed = [new + w[len(old):] if w.startswith(old + ":") else w for w in words]
    joined = " ".join(fixed)
    return joined


class Clock:
    def __init__(self, hour):
        self.hour = hour

    def __repr__(self):  # like an object's default repr (its address), a value no two runs share
        return f"<Clock {self.hour} made at {time.perf_counter_ns()}>"


def period(clock):
    """'am' before noon, 'pm' from noon on."""
    hour = clock.hour
    if hour < 12:
        return "am"
    return "pm"
''',
    "tests/test_sums.py": '''import pathlib

import pytest

from fid.sums import Clock, dictsum, period, relabel


def test_dictsum():
    assert dictsum({}, {"a": 1}) == {"a": 1}


def test_relabel_leaves_other_words():
    assert relabel("a b", "x", "y") == "a b"


@pytest.mark.parametrize("clock, expected", [(Clock(1), "am"), (Clock(13), "pm")], ids=repr)
def test_period(clock, expected):
    assert period(clock) == expected


# like rdflib's manifest tests: the id is a data file's URI, so it holds the path of the tree the tests run in
@pytest.mark.parametrize("where", [pathlib.Path(__file__).parent.as_uri() + "#night"])
def test_period_at(where):
    assert period(Clock(23)) == "pm"
''',
}

DICTSUM_OWN_DOC = '''def dictsum(a, b):
    """Add b's values to a's (my own words, no example)."""
    return {k: a.get(k, 0) + b.get(k, 0) for k in {**a, **b}}
'''


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fidproj")
    write_tree(tmp / "fid", PROJECT)
    manifest = tmp / "fid.yaml"
    # The module is a test path (for its doctests): its functions are declared, discovery skips test code.
    manifest.write_text("name: fid\nsource: {path: fid}\npython: '3.11'\n"
                        "tests:\n  paths: [tests, fid/sums.py]\n  args: ['--doctest-modules']\n"
                        "tasks:\n  targets:\n" + "".join(f"    - function: fid/sums.py::{name}\n"
                                                         for name in ("dictsum", "relabel", "period")))
    mp = pytest.MonkeyPatch()
    mp.setenv("CODERUN_HOME", str(tmp / "home"))
    settings = load_settings()
    report = build_tasks(load_manifest(manifest), settings)
    tasks = {t.name: t for t in load_tasks(settings, status="all")}
    yield tmp, manifest, tasks, report
    mp.undo()


def _eval(project, tmp_path, rows, *args):
    tmp, manifest, tasks, _ = project
    tmp_path.mkdir(parents=True, exist_ok=True)
    samples = tmp_path / "samples.jsonl"
    samples.write_text("".join(json.dumps({"task_id": tasks[name].task_id, "solution": code}) + "\n"
                               for name, code in rows))
    run = tmp_path / "run"
    res = CliRunner().invoke(app, ["eval", "--backend", "local", "-j", "2", "--samples", str(samples),
                                   "--run-dir", str(run), "--projects", str(manifest.parent), *args])
    assert res.exit_code == 0, res.output
    with RunStore.open(run) as store:
        return {(r.task_id, r.index): r for r in store.results()}, res.output


@pytest.mark.slow
def test_a_sample_with_its_own_docstring_keeps_the_targets_doctest(project, tmp_path):
    """planb `_dictsum`: the task's tests include the doctest of the original's docstring; every sample that
    wrote a docstring of its own failed with "1 expected tests did not run", whatever its body."""
    dictsum = project[2]["dictsum"]
    assert dictsum.own_doctests() == ["fid/sums.py::fid.sums.dictsum"]
    assert set(dictsum.tests) == {"fid/sums.py::fid.sums.dictsum", "tests/test_sums.py::test_dictsum"}
    results, _ = _eval(project, tmp_path, [("dictsum", DICTSUM_OWN_DOC)])
    (result,) = results.values()
    assert result.verdict.value == "pass", result.reason


PERIOD_OK = "def period(clock):\n    return 'am' if clock.hour < 12 else 'pm'\n"
PERIOD_WRONG = "def period(clock):\n    return 'pm' if clock.hour < 12 else 'am'\n"


@pytest.mark.slow
def test_tests_whose_ids_change_between_runs_are_known_by_position(project, tmp_path):
    """humanize: parametrize ids made of an object's repr differ in every run; the tests were dropped as flaky
    and the pass+ recording could not select them (`ERROR: not found`), so its tasks had no inputs. rdflib:
    ids made of a data file's URI hold the tree's path, which differs in every sandbox (261 tests dropped as
    flaky)."""
    _, _, tasks, report = project
    period = tasks["period"]
    keys = ["tests/test_sums.py::test_period[#0-0]", "tests/test_sums.py::test_period[#1-1]",
            "tests/test_sums.py::test_period_at[#0]"]
    assert period.status.value == "verified" and sorted(period.tests) == keys and not period.flaky_tests
    (built,) = report.projects
    assert sorted(built.positions) == keys and "<Clock 1 made at" in built.positions[keys[0]]
    assert period.rigor is not None and period.rigor.recorded == 3 and period.rigor.inputs >= 2, period.rigor
    results, _ = _eval(project, tmp_path, [("period", PERIOD_OK), ("period", PERIOD_WRONG)])
    verdicts = {r.index: r for r in results.values()}
    assert verdicts[0].verdict.value == "pass", verdicts[0].reason
    assert verdicts[1].verdict.value == "fail" and "(first: tests/test_sums.py::test_period[#0-0] failed)" in \
        verdicts[1].reason, verdicts[1].reason


def test_a_position_key_is_used_only_for_an_id_that_changed_and_is_unambiguous():
    from coderun.tasks.coverage_map import by_position

    first = {"t.py::f[<A at 0x1>]": "t.py::f[#0]", "t.py::f[b]": "t.py::f[#1]", "t.py::g[x]": "t.py::g[#0]",
             "t.py::g[y]": "t.py::g[#0]"}
    second = {"t.py::f[<A at 0x2>]": "t.py::f[#0]", "t.py::f[b]": "t.py::f[#1]", "t.py::g[z]": "t.py::g[#0]"}
    assert by_position(first, second) == {"t.py::f[<A at 0x1>]": "t.py::f[#0]"}


RELABEL_FIRST_ONLY = '''def relabel(text, old, new):
    """Replace the old prefix by new."""
    return text.replace(old + ":", new + ":", 1)
'''


@pytest.mark.slow
def test_a_task_a_trivial_body_passes_is_left_out_of_the_headline_and_flagged(project, tmp_path):
    """packtools `fix_namespace_prefix_w`: its tests never contain the text the function rewrites, so
    `return <first argument>` passes them; 10 wrong samples were graded pass and nothing said why."""
    relabel = project[2]["relabel"]
    assert relabel.status.value == "verified" and "first_arg" in relabel.trivial_passes
    assert any(f.startswith("trivial:") and "first_arg" in f for f in relabel.flags())
    assert set(relabel.trivial_plus_passes) <= set(relabel.trivial_passes)
    results, output = _eval(project, tmp_path / "base", [("relabel", RELABEL_FIRST_ONLY), ("dictsum", DICTSUM_OWN_DOC)])
    assert {r.task_id for r in results.values()} == {project[2]["dictsum"].task_id}
    assert "left out: trivial bodies pass its tests (first_arg" in output
    results, output = _eval(project, tmp_path / "weak", [("relabel", RELABEL_FIRST_ONLY)], "--include-weak")
    (result,) = results.values()
    assert result.verdict.value == "pass"   # the project's tests cannot tell; the report says so
    assert "tasks are trivial" in output and relabel.task_id in output
    report = json.loads((tmp_path / "weak" / "run" / "report.json").read_text())
    (row,) = [t for t in report["tasks"] if t["task_id"] == relabel.task_id]
    assert row["flags"] == relabel.flags()


@pytest.mark.integration
def test_a_task_counts_under_the_rigor_whose_verdict_no_trivial_body_gets(project):
    from coderun.tasks import in_benchmark

    relabel = project[2]["relabel"]
    caught = relabel.model_copy(update={"trivial_passes": ["first_arg"], "trivial_plus_passes": []})
    through = relabel.model_copy(update={"trivial_passes": ["first_arg"], "trivial_plus_passes": ["first_arg"]})
    unchecked = relabel.model_copy(update={"trivial_passes": ["first_arg"], "trivial_plus_passes": None})
    clean = relabel.model_copy(update={"trivial_passes": [], "trivial_plus_passes": []})
    assert [in_benchmark(t, False, "base") for t in (caught, through, unchecked, clean)] == [False] * 3 + [True]
    assert [in_benchmark(t, False, "plus") for t in (caught, through, unchecked, clean)] == [True, False, False, True]
    assert all(in_benchmark(t, True, rigor) for t in (caught, through, unchecked) for rigor in ("base", "plus"))
