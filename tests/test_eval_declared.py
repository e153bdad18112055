"""A samples file on a fresh machine: `eval --samples` builds the projects whose manifests declare its ids,
and `tasks build --all` builds every known project. Real venvs, real task builds, real sandbox runs."""

from __future__ import annotations

import json
import os

import pytest
from typer.testing import CliRunner

from coderun.cli.main import app
from coderun.config import load_settings
from coderun.evaluation.store import RunStore
from coderun.manifests.schema import all_manifests, load_manifest
from coderun.tasks import built_projects, load_tasks
from coderun.tasks.declared import declared_ids, owner
from tests.helpers import DOC, MEAN, write_tree

PROJECT = {
    "calc/__init__.py": "",
    "calc/stats.py": f'''
{MEAN}

def shrug(values):
    {DOC.format(what="text")}
    text = str(values)
    text = text.strip()
    text = "<" + text + ">"
    return text
''',
    "tests/test_stats.py": '''from calc.stats import mean, shrug


def test_mean():  # two values: a body returning the recorded constant passes one (and is left out)
    assert mean([1, 2, 3]) == 2
    assert mean([4]) == 4


def test_shrug_runs():
    try:
        shrug([1])
    except Exception:
        pass
''',
}

CALC = """name: calc
source: {path: calc}
python: '3.11'
tests: {paths: [tests]}
tasks:
  targets:
  - {function: calc/stats.py::mean, aliases: [CE-mean]}
  - {function: calc/stats.py::shrug, aliases: [CE-weak]}
  - {function: calc/stats.py::gone, aliases: [CE-gone]}
  discover: {enabled: false}
"""
# A project whose source is missing: its build fails, and the others must go on.
BROKEN = """name: broken
source: {path: nowhere}
python: '3.11'
tasks:
  targets:
  - {function: pkg/mod.py::f, aliases: [CE-broken]}
"""

MEAN_OK = "def mean(values):\n    return sum(values) / len(values)\n"
MEAN_WRONG = "def mean(values):\n    return 0\n"


def _projects(root):
    write_tree(root / "calc", PROJECT)
    (root / "calc.yaml").write_text(CALC)
    (root / "broken.yaml").write_text(BROKEN)
    return root


def _flat(text: str) -> str:
    return " ".join(text.split())  # the terminal wraps long lines


def test_owner_knows_declared_ids_aliases_and_ids_naming_a_project(tmp_path):
    """The map that decides what to build: aliases and target ids, and project/file::name of a known project."""
    manifests = [load_manifest(p) for p in (_projects(tmp_path / "p") / "calc.yaml", tmp_path / "p" / "broken.yaml")]
    declared = declared_ids(manifests)
    assert owner(declared, manifests, "CE-mean").task_id == "calc/calc/stats.py::mean"
    assert owner(declared, manifests, "calc/calc/stats.py::shrug").target.aliases == ["CE-weak"]
    found = owner(declared, manifests, "calc/calc/other.py::f")  # a discovered task's id names its project
    assert found.project == "calc" and found.target is None
    assert owner(declared, manifests, "nope") is None
    assert owner(declared, manifests, "elsewhere/x.py::f") is None


@pytest.mark.slow
def test_eval_samples_on_an_empty_home_builds_declared_projects_and_keeps_unknown_ids_unknown(tmp_path,
                                                                                             monkeypatch):
    """CoderEval's result files listed 157 declared ids as `unknown task id` when their tasks were not built."""
    projects = _projects(tmp_path / "projects")
    home = tmp_path / "home"
    monkeypatch.setenv("CODERUN_HOME", str(home))
    monkeypatch.setenv("CODERUN_PROJECTS", str(projects))
    samples = tmp_path / "s.jsonl"
    many_unknown = [{"task_id": f"nope-{i}", "solution": "def f():\n    return 1\n"} for i in range(11)]
    samples.write_text("\n".join(json.dumps(r) for r in [
        *many_unknown,  # shown 10 at most: the rarer kinds below must still be shown
        {"_id": "CE-mean", "generate_results": [{"generate_code": MEAN_OK}, {"generate_code": MEAN_WRONG}]},
        {"task_id": "CE-weak", "solution": "def shrug(values):\n    return ''\n"},
        {"task_id": "CE-gone", "solution": "def gone():\n    return 1\n"},
        {"task_id": "CE-broken", "solution": "def f():\n    return 1\n"},
        {"task_id": "nope", "solution": "def f():\n    return 1\n"},
    ]) + "\n")
    res = CliRunner().invoke(app, ["eval", "--backend", "local", "-j", "1", "--samples", str(samples),
                                   "--run-dir", str(tmp_path / "run")])
    assert res.exit_code == 0, res.output
    out = _flat(res.output)
    assert "[1/2] no tasks stored for calc, whose manifest knows 3 of the samples' ids: building them first" in out
    assert "calc: 2 candidates (2 from the manifest, 0 discovered), 2 covered (coverage): 1 verified, 1 weak" in out
    assert "[2/2] no tasks stored for broken" in out and "error: broken: " in out
    assert built_projects(load_settings()) == {"calc"}  # only what the samples need, built-ins untouched
    problems = (tmp_path / "run" / "problems.txt").read_text().splitlines()
    assert len(problems) == 15, problems
    weak, gone, broken, unknown = problems[11:]
    assert f"s.jsonl:13: unverified_task: task CE-weak is declared by manifest {projects / 'calc.yaml'} but " \
           "was not verified (weak" in weak
    assert "s.jsonl:14: unbuilt_task: task CE-gone is declared" in gone and "calc/stats.py::gone is not in" in gone
    assert "s.jsonl:15: unbuilt_task: task CE-broken is declared" in broken
    assert "building broken's tasks failed: " in broken
    assert unknown.endswith("s.jsonl:16: unknown_task: unknown task id 'nope'")
    assert "15 input problems (12 unknown_task, 1 unverified_task, 2 unbuilt_task; 2 more not shown)" in out
    for line in (weak, gone, broken):
        assert line in res.output
    with RunStore.open(tmp_path / "run") as store:
        verdicts = {(r.task_id, r.index): r.verdict.value for r in store.results()}
    assert verdicts == {("calc/calc/stats.py::mean", 0): "pass", ("calc/calc/stats.py::mean", 1): "fail"}


@pytest.mark.slow
def test_eval_project_filter_leaves_other_declared_projects_unbuilt_and_out(tmp_path, monkeypatch):
    """With --project, samples of other known projects are left out (counted), not built, not problems."""
    projects = _projects(tmp_path / "projects")
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    samples = tmp_path / "s.jsonl"
    samples.write_text(json.dumps({"task_id": "CE-mean", "solution": MEAN_OK}) + "\n"
                       + json.dumps({"task_id": "CE-broken", "solution": "def f():\n    return 1\n"}) + "\n")
    res = CliRunner().invoke(app, ["eval", "--backend", "local", "-j", "1", "--samples", str(samples),
                                   "--project", "calc", "--projects", str(projects),
                                   "--run-dir", str(tmp_path / "run")])
    assert res.exit_code == 0, res.output
    out = _flat(res.output)
    assert "no tasks stored for calc, whose manifest knows 1 of the samples' ids" in out
    assert "for broken" not in out and "error" not in out and "CE-broken" not in out
    assert "1 samples are for tasks outside the selection and were left out" in out
    assert not (tmp_path / "run" / "problems.txt").exists()

@pytest.mark.slow
def test_tasks_build_all_builds_builtin_and_user_projects_and_goes_on_past_failures(tmp_path, monkeypatch):
    """`tasks build --all`: every known project; failures (here: no package index) are listed, exit non-zero."""
    projects = _projects(tmp_path / "projects")
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    # calc's environment first, from the real index; then the built-ins' sdists, fetched by pip with pip's
    # own configuration, come from an empty index and fail at once.
    env = CliRunner().invoke(app, ["env", "build", "calc", "--backend", "local", "--projects", str(projects)])
    assert env.exit_code == 0, env.output
    (tmp_path / "index").mkdir()
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", (tmp_path / "index").as_uri())
    for var in ("PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX"):
        monkeypatch.delenv(var, raising=False)
    # git sources: no mirror, and git itself refuses the network, so they fail at once wherever this runs
    monkeypatch.setenv("CODERUN_GIT_MIRRORS", "")
    monkeypatch.setenv("GIT_ALLOW_PROTOCOL", "file")
    res = CliRunner().invoke(app, ["tasks", "build", "--all", "--projects", str(projects)])
    assert res.exit_code == 4, res.output
    out = _flat(res.output)
    builtin = [m.name for m in all_manifests(load_settings())]  # built-in ones only: --projects is not given
    for m in all_manifests(load_settings()):
        # an sdist from the empty index fails at once; a git source fails without the network or a mirror
        assert f"error: {m.name}: " in out
        if m.source.pypi:
            assert f"error: {m.name}: no sdist of" in out and "from pip's package index" in out
        else:
            assert f"error: {m.name}: git failed for {m.source.git.url}" in out
    assert "calc: 2 candidates (2 from the manifest, 0 discovered)" in out
    assert "manifest targets not found: calc/stats.py::gone" in out
    assert f"error: {len(builtin) + 1} of {len(builtin) + 2} task builds failed: {', '.join([*builtin, 'broken'])}" in out
    settings = load_settings()
    assert built_projects(settings) == {"calc"}
    assert [t.name for t in load_tasks(settings)] == ["mean"]
    usage = CliRunner().invoke(app, ["tasks", "build"])
    assert usage.exit_code == 2 and "give project names or --all" in usage.output
