"""`coderun eval` end to end on a small hand-made project: real venv, real tasks, real sandbox runs."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import pytest
from typer.testing import CliRunner

from coderun.cli.main import app
from coderun.config import load_settings
from coderun.evaluation.store import RunStore
from coderun.manifests.schema import load_manifest
from coderun.tasks import build_tasks, load_tasks
from tests.helpers import DOC, MEAN, write_tree
from tests.shared_home import built_once, home_view

PROJECT = {
    "calc/__init__.py": "",
    "calc/stats.py": f'''
{MEAN}

class Range:
    def __init__(self, values):
        self.values = list(values)

    def span(self):
        {DOC.format(what="span")}
        low = min(self.values)
        high = max(self.values)
        width = high - low
        return width
''',
    "tests/test_stats.py": '''from calc.stats import Range, mean


def test_mean():
    assert mean([1, 2, 3]) == 2


def test_mean_float():
    assert mean([1, 2]) == 1.5


def test_span():
    assert Range([3, 1, 7]).span() == 6
    assert Range([2, 2]).span() == 0
''',
}

MEAN_OK = "def mean(values):\n    return sum(values) / len(values)\n"
MEAN_WRONG = "def mean(values):\n    return sum(values) // len(values)\n"
SPAN_OK = "```python\ndef span(self):\n    return max(self.values) - min(self.values)\n```"
SPAN_SYNTAX = "def span(self):\n    return max(self.values) -\n"


def _build_calc(folder: Path) -> None:
    write_tree(folder / "calc", PROJECT)
    manifest = folder / "calc.yaml"
    manifest.write_text("name: calc\nsource: {path: calc}\npython: '3.11'\ntests:\n  paths: [tests]\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CODERUN_HOME", str(folder / "home"))
        build_tasks(load_manifest(manifest), load_settings())


def calc_built(tmp_path_factory) -> Path:
    """PROJECT with its environment and tasks built, once per session (this file and test_terminal.py use
    it): the folder holds calc/, calc.yaml (the only manifest) and home/, which tests see through home_view."""
    return built_once(tmp_path_factory, "calc", _build_calc)


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    shared = calc_built(tmp_path_factory)
    tmp = tmp_path_factory.mktemp("evalproj")
    home_view(shared / "home", tmp / "home")
    manifest = shared / "calc.yaml"
    mp = pytest.MonkeyPatch()
    mp.setenv("CODERUN_HOME", str(tmp / "home"))
    settings = load_settings()
    tasks = {t.name: t for t in load_tasks(settings)}
    assert set(tasks) == {"mean", "span"}
    yield tmp, manifest, tasks
    mp.undo()


def _samples_file(path, tasks, rows):
    lines = []
    for row in rows:
        lines.append(row if isinstance(row, str) else json.dumps(
            {"task_id": tasks[row[0]].task_id, "solution": row[1]}))
    path.write_text("\n".join(lines) + "\n")
    return path


def _verdicts(run_dir):
    with RunStore.open(run_dir) as store:
        return {(r.task_id, r.index): (r.verdict.value, r.failure) for r in store.results()}


def _eval(args):
    res = CliRunner().invoke(app, ["eval", "--backend", "local", "-j", "2", *args])
    assert res.exit_code == 0, res.output
    return res


@pytest.mark.slow
def test_ground_truth_scores_100_and_blank_bodies_0(project, tmp_path):
    _, manifest, _ = project
    _eval(["--ground-truth", "--run-dir", str(tmp_path / "gt"), "--projects", str(manifest.parent)])
    report = json.loads((tmp_path / "gt" / "report.json").read_text())
    assert report["overall"]["pass@k"]["1"] == 1.0
    assert report["overall"]["acc@k"]["1"]["overall"] == 1.0
    # One code per task: no pytest template is kept for codes that will not come.
    assert not any("configured once" in p.read_text() for p in (tmp_path / "gt" / "logs").rglob("*.log"))
    _eval(["--blank", "--run-dir", str(tmp_path / "blank"), "--projects", str(manifest.parent)])
    report = json.loads((tmp_path / "blank" / "report.json").read_text())
    assert report["overall"]["pass@k"]["1"] == 0.0
    assert report["overall"]["acc@k"]["1"]["overall"] == 0.0


@pytest.mark.slow
def test_samples_are_graded_deduplicated_and_bad_lines_reported(project, tmp_path):
    _, manifest, tasks = project
    samples = _samples_file(tmp_path / "s.jsonl", tasks, [
        ("mean", MEAN_OK), ("mean", MEAN_WRONG), ("mean", MEAN_OK + "\n\n"),  # the third repeats the first
        "{not json", '{"task_id": "nope", "solution": "def f(): pass"}',
        ("span", SPAN_OK), ("span", SPAN_SYNTAX)])
    res = _eval(["--samples", str(samples), "--run-dir", str(tmp_path / "run"), "--projects", str(manifest.parent)])
    assert "s.jsonl:4: malformed" in res.output and "s.jsonl:5: unknown_task" in res.output
    assert "2 input problems (1 malformed, 1 unknown_task)" in res.output
    assert "s.jsonl:5: unknown_task" in (tmp_path / "run" / "problems.txt").read_text()
    verdicts = _verdicts(tmp_path / "run")
    mean, span = tasks["mean"].task_id, tasks["span"].task_id
    assert verdicts[(mean, 0)][0] == "pass" and verdicts[(mean, 2)][0] == "pass"
    assert verdicts[(mean, 1)][0] == "fail" and verdicts[(mean, 1)][1].startswith("functional")
    assert verdicts[(span, 0)][0] == "pass"
    assert verdicts[(span, 1)][0] == "fail" and verdicts[(span, 1)][1].startswith("syntax")
    run = tmp_path / "run"
    logs = sorted(p.name for p in (run / "logs").rglob("*.log"))
    assert len(logs) == 3  # the duplicate ran once; the syntax failure never ran
    # mean's two codes share a pytest template in their worker (the first sets it up).
    mean_logs = [p.read_text() for p in (run / "logs").rglob("*.log") if "mean" in p.parent.name]
    assert len(mean_logs) == 2 and all("configured once" in text for text in mean_logs)
    assert (run / "report.md").is_file() and list((run / "spliced").rglob("*.py"))
    per_sample = CliRunner().invoke(app, ["report", str(run), "--per-sample", "--format", "json"])
    rows = [json.loads(line) for line in per_sample.stdout.splitlines() if line.strip()]
    assert len(rows) == 5 and {r["verdict"] for r in rows} == {"pass", "fail"}


def _count_results(db):
    try:
        with sqlite3.connect(db) as conn:
            return conn.execute("select count(*) from results").fetchone()[0]
    except sqlite3.Error:
        return 0


@pytest.mark.slow
def test_killed_run_resumes_without_losing_or_duplicating(project, tmp_path):
    """SIGKILL mid-run, then --resume: every sample graded once, verdicts as in an uninterrupted run."""
    tmp, manifest, tasks = project
    rows = [("mean", MEAN_OK if i % 2 else MEAN_WRONG + f"# {i}\n") for i in range(6)]
    rows += [("span", SPAN_OK + f"\n# {i}") for i in range(4)]
    samples = _samples_file(tmp_path / "s.jsonl", tasks, rows)
    killed = tmp_path / "killed"
    env = {**os.environ, "CODERUN_HOME": str(tmp / "home"), "CODERUN_PROJECTS": str(manifest.parent)}
    proc = subprocess.Popen([sys.executable, "-m", "coderun", "eval", "--backend", "local", "-j", "1",
                             "--samples", str(samples), "--run-dir", str(killed)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 300
    while _count_results(killed / "run.sqlite") < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = _verdicts(killed)
    assert 2 <= len(partial) < len(rows), "the kill must land mid-run"
    _eval(["--resume", str(killed), "--projects", str(manifest.parent)])
    _eval(["--samples", str(samples), "--run-dir", str(tmp_path / "whole"), "--projects", str(manifest.parent)])
    resumed, whole = _verdicts(killed), _verdicts(tmp_path / "whole")
    assert resumed == whole and len(resumed) == len(rows)
    assert {k: resumed[k] for k in partial} == partial  # finished verdicts were kept, not redone


def _pytest_version(env_dir: Path) -> str:
    """pytest's version as the project env's own interpreter imports it."""
    return subprocess.run([str(env_dir / "venv" / "bin" / "python"), "-c", "import pytest; print(pytest.__version__)"],
                          capture_output=True, text=True, check=True).stdout.strip()


@pytest.mark.slow
def test_run_folder_records_coderun_and_project_versions(project, tmp_path):
    """The versions that produced a run's numbers are in its folder, its store and its md/html report;
    an env built before coderun recorded versions gets its record at run start instead of failing."""
    tmp, manifest, _ = project
    (env_dir,) = [d for d in (tmp / "home" / "envs").iterdir() if d.name.startswith("calc-")]
    (env_dir / "packages.json").unlink(missing_ok=True)   # as an env built before this change
    run = tmp_path / "gt"
    _eval(["--ground-truth", "--run-dir", str(run), "--projects", str(manifest.parent)])
    assert (env_dir / "packages.json").is_file()
    with RunStore.open(run) as store:
        env = store.environment()
    deps = {p.name.lower(): p.version for p in env.coderun.packages}
    assert deps["pydantic"] == metadata.version("pydantic") and env.coderun.coderun == metadata.version("coderun")
    calc = env.projects["calc"]
    pytest_version = _pytest_version(env_dir)
    assert calc.backend == "local" and calc.where == str(env_dir) and calc.version_of("pytest") == pytest_version
    text = (run / "environment.txt").read_text()
    assert f"pydantic=={metadata.version('pydantic')}" in text and f"pytest=={pytest_version}" in text
    md = CliRunner().invoke(app, ["report", str(run), "--format", "md"]).stdout
    env_md = md[md.index("## Environment"):]
    assert f"| pydantic | {metadata.version('pydantic')} |" in env_md
    assert "### Project calc" in env_md and f"| pytest | {pytest_version} |" in env_md
    html = CliRunner().invoke(app, ["report", str(run), "--format", "html"]).stdout
    assert "<h2>Environment</h2>" in html and f"<td>pytest</td><td>{pytest_version}</td>" in html
    assert "project calc: local" in html
    table = CliRunner().invoke(app, ["report", str(run)]).stdout
    assert "pydantic" not in table  # the terminal table stays as it was


@pytest.mark.slow
def test_resumed_run_keeps_its_versions_and_notes_a_changed_env(project, tmp_path):
    """--resume must not rewrite what ran the first samples; a rebuilt env is reported, not recorded."""
    tmp, manifest, tasks = project
    run = tmp_path / "run"
    _eval(["--ground-truth", "--run-dir", str(run), "--projects", str(manifest.parent)])
    with RunStore.open(run) as store:
        before = store.environment()
    text = (run / "environment.txt").read_text()
    with sqlite3.connect(run / "run.sqlite") as conn:   # as a run killed before its last sample
        conn.execute("DELETE FROM results WHERE task_id = ?", (tasks["span"].task_id,))
    packages = Path(before.projects["calc"].where) / "packages.json"
    recorded = packages.read_text()
    changed = json.loads(recorded)
    changed["packages"] = [p for p in changed["packages"] if p["name"].lower() != "pytest"]
    changed["packages"].append({"name": "pytest", "version": "0.0.1"})
    packages.write_text(json.dumps(changed))   # the env was rebuilt with another pytest meanwhile
    try:
        res = _eval(["--resume", str(run), "--projects", str(manifest.parent)])
    finally:
        packages.write_text(recorded)
    assert "calc: the environment differs from the one the run recorded: pytest" in res.output
    with RunStore.open(run) as store:
        assert store.environment() == before and len(store.results()) == 2
    assert (run / "environment.txt").read_text() == text


def test_eval_needs_exactly_one_input(tmp_path, monkeypatch):
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))   # an empty home: usage is checked first
    res = CliRunner().invoke(app, ["eval", "--backend", "local", "--ground-truth", "--blank"])
    assert res.exit_code == 2 and "exactly one of" in res.output


@pytest.mark.parametrize(("option", "value", "choices"), [("--backend", "podman", "use local or docker"),
                                                       ("--executor", "threads", "use workers or naive")])
def test_a_bad_backend_or_executor_is_a_usage_error_naming_the_choices(tmp_path, monkeypatch, option, value,
                                                                      choices):
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    res = CliRunner().invoke(app, ["eval", "--backend", "local", "--ground-truth", option, value])
    assert res.exit_code == 2 and f"unknown {option[2:]} {value!r}" in res.output and choices in res.output


@pytest.mark.slow
def test_a_project_given_as_a_manifest_path(project, tmp_path):
    """`--project PATH/TO/manifest.yaml` selects that project's tasks (it was compared with task names)."""
    _, manifest, tasks = project
    res = CliRunner().invoke(app, ["eval", "--backend", "local", "--ground-truth", "--project", str(manifest),
                                   "--run-dir", str(tmp_path / "run")])
    assert res.exit_code == 0, res.output
    assert "no tasks stored" not in res.output
    verdicts = _verdicts(tmp_path / "run")
    assert {t for t, _ in verdicts} == {t.task_id for t in tasks.values()}
    assert {v for v, _ in verdicts.values()} == {"pass"}


@pytest.mark.slow
def test_a_capitalised_project_name_found_by_its_file_name(tmp_path, monkeypatch):
    """`--project cerberus` for `cerberus.yaml` with `name: Cerberus` crashed with KeyError: 'Cerberus'."""
    write_tree(tmp_path / "calc", PROJECT)
    (tmp_path / "projects").mkdir()
    (tmp_path / "projects" / "calc.yaml").write_text(
        "name: Calc\nsource: {path: ../calc}\npython: '3.11'\ntests:\n  paths: [tests]\n")
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    res = CliRunner().invoke(app, ["eval", "--backend", "local", "--ground-truth", "--project", "calc",
                                   "--projects", str(tmp_path / "projects"), "--run-dir", str(tmp_path / "run")])
    assert res.exit_code == 0, res.output
    assert {v for v, _ in _verdicts(tmp_path / "run").values()} == {"pass"}
