"""Every declared target accounted for, and supplementary tests: a real project built end to end in a temp dir."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import git
import pytest
from typer.testing import CliRunner

from coderun.cli.main import app
from coderun.config import load_settings
from coderun.envs.sources import checkout
from coderun.errors import ManifestError
from coderun.manifests.schema import load_manifest
from coderun.records import TaskStatus, Unverified
from coderun.tasks import build_tasks, load_targets, load_tasks
from tests.helpers import write_tree

DOC = '"""Return the {what} of a and b, computed step by step for the caller."""'

PROJECT = {
    "calc/__init__.py": "",
    "calc/ops.py": f'''def add(a, b):
    {DOC.format(what="sum")}
    total = a
    total = total + b
    return total


def scaled(a, b):
    {DOC.format(what="product")}
    total = a
    total = total * b
    return total


def lonely(a, b):
    {DOC.format(what="difference")}
    total = a
    total = total - b
    return total
''',
    # Two values each: a trivial body returning the recorded constant would pass one (and leave the headline).
    "tests/test_ops.py": "from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
                         "    assert add(1, 1) == 2\n",
}

SUPPLEMENTARY = ("from calc.ops import scaled\n\n\ndef test_scaled():\n    assert scaled(2, 3) == 6\n"
                 "    assert scaled(1, 4) == 4\n")

MANIFEST = """name: calc
source: {path: upstream}
python: '3.11'
tests:
  paths: [tests]
  supplementary: [tests/test_supp_scaled.py]
tasks:
  discover: {enabled: false}
  targets:
    - function: calc/ops.py::add
      aliases: [CE-add]
      status_note: no test reaches it (an old note)
    - function: calc/ops.py::scaled
      aliases: [CE-scaled]
    - function: calc/ops.py::lonely
      aliases: [CE-lonely]
      status_note: no test reaches it
    - function: calc/ops.py::gone
      aliases: [CE-gone]
      status_note: function absent at the matched commit
"""


def _project(tmp, manifest: str = MANIFEST, supplementary: bool = True):
    write_tree(tmp / "upstream", PROJECT)
    if supplementary:
        write_tree(tmp / "calc", {"tests/test_supp_scaled.py": SUPPLEMENTARY})
    (tmp / "calc.yaml").write_text(manifest)
    return tmp / "calc.yaml"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("accounting")
    manifest_file = _project(tmp)
    mp = pytest.MonkeyPatch()
    mp.setenv("CODERUN_HOME", str(tmp / "home"))
    mp.setenv("CODERUN_PROJECTS", str(tmp))
    settings = load_settings()
    report = build_tasks(load_manifest(manifest_file), settings, jobs=1)
    yield settings, report, manifest_file
    mp.undo()


def test_missing_supplementary_file_is_a_manifest_error_naming_it(tmp_path):
    """A manifest naming a supplementary file that coderun does not ship cannot be read."""
    path = _project(tmp_path, supplementary=False)
    with pytest.raises(ManifestError, match="test_supp_scaled.py"):
        load_manifest(path)


def test_supplementary_file_may_not_replace_a_project_file(tmp_path):
    """A supplementary test that would overwrite one of the project's own files is refused."""
    path = _project(tmp_path, MANIFEST.replace("test_supp_scaled.py", "test_ops.py"))
    write_tree(tmp_path / "calc", {"tests/test_ops.py": SUPPLEMENTARY})
    with pytest.raises(ManifestError, match="would replace"):
        checkout(load_manifest(path), load_settings())


def test_supplementary_files_are_committed_on_top_of_the_source(tmp_path, monkeypatch):
    """Every stage sees one tree: the checkout is a commit adding the files, the source's commit its parent."""
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    path = _project(tmp_path)
    plain = checkout(load_manifest(path).model_copy(update={"tests": load_manifest(path).tests.model_copy(
        update={"supplementary": []})}), load_settings())
    co = checkout(load_manifest(path), load_settings())
    assert co.upstream == plain.commit and co.commit != plain.commit and co.upstream_commit == plain.commit
    assert (co.path / "tests/test_supp_scaled.py").read_text() == SUPPLEMENTARY
    head = git.Repo(co.path).head.commit
    assert [p.hexsha for p in head.parents] == [plain.commit]
    assert checkout(load_manifest(path), load_settings()).commit == co.commit  # the same files, the same commit
    (tmp_path / "calc/tests/test_supp_scaled.py").write_text(SUPPLEMENTARY + "\n# changed\n")
    assert checkout(load_manifest(path), load_settings()).commit != co.commit


@pytest.mark.slow
def test_every_declared_target_has_an_outcome(built):
    settings, _, _ = built
    by_fn = {o.function: o for o in load_targets(settings, "calc")}
    assert list(by_fn) == ["calc/ops.py::add", "calc/ops.py::scaled", "calc/ops.py::lonely", "calc/ops.py::gone"]
    assert by_fn["calc/ops.py::add"].verified and by_fn["calc/ops.py::add"].stale_note
    assert by_fn["calc/ops.py::lonely"].reason is Unverified.NO_TESTS_REACH
    assert by_fn["calc/ops.py::lonely"].status_note == "no test reaches it"
    assert by_fn["calc/ops.py::gone"].reason is Unverified.ABSENT
    assert "not in the source at" in by_fn["calc/ops.py::gone"].detail


@pytest.mark.slow
def test_task_reached_only_by_a_supplementary_test_is_verified_and_marked(built):
    settings, report, _ = built
    tasks = {t.name: t for t in load_tasks(settings, status="all")}
    assert tasks["scaled"].status is TaskStatus.VERIFIED and tasks["scaled"].supplementary
    assert tasks["scaled"].tests == ["tests/test_supp_scaled.py::test_scaled"]
    assert not tasks["add"].supplementary
    p = report.projects[0]
    assert p.upstream_commit and p.upstream_commit != p.commit


@pytest.mark.slow
def test_tasks_list_targets_shows_reasons_and_stale_notes(built):
    runner = CliRunner()
    res = runner.invoke(app, ["tasks", "list", "--targets", "--json"])
    assert res.exit_code == 0, res.output
    rows = {r["function"]: r for r in map(json.loads, res.stdout.splitlines())}
    assert rows["calc/ops.py::gone"]["reason"] == "absent" and not rows["calc/ops.py::gone"]["verified"]
    assert rows["calc/ops.py::add"]["stale_note"] is True
    assert rows["calc/ops.py::scaled"]["supplementary"] is True
    res = runner.invoke(app, ["tasks", "list", "--targets"], env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    assert max(map(len, res.stdout.splitlines())) <= 80
    assert "no_tests_reach" in res.stdout and "stale note (verified anyway)" in res.stdout
    assert "4 declared targets: 2 verified, 2 not" in res.stdout
    res = runner.invoke(app, ["tasks", "list"], env={"COLUMNS": "80"})
    assert "verified*" in res.stdout and "supplementary tests" in res.stdout
    assert "2 targets declared by the manifests are not verified" in res.stdout
    res = runner.invoke(app, ["tasks", "list", "--json"])
    assert {json.loads(r)["name"]: json.loads(r)["supplementary"] for r in res.stdout.splitlines()} == {
        "add": False, "scaled": True}


@pytest.mark.slow
def test_build_all_keeps_going_and_records_why_a_project_failed(built, tmp_path):
    """A project whose environment cannot be built gets env_failed on each target; the others still build,
    the summary table lists both, and the exit code says one failed."""
    settings, _, manifest_file = built
    broken = tmp_path / "broken.yaml"
    write_tree(tmp_path / "broken-src", PROJECT)
    broken.write_text("name: broken\nsource: {path: broken-src}\npython: '3.11'\n"
                      "install: {requirements: ['coderun-no-such-package-anywhere==0.0.1']}\n"
                      "tasks:\n  discover: {enabled: false}\n  targets:\n    - function: calc/ops.py::add\n"
                      "      aliases: [CE-broken]\n")
    runner = CliRunner()
    # Named rather than --all, which would build the built-in projects too; several names go the same way.
    res = runner.invoke(app, ["tasks", "build", str(manifest_file), str(broken), "-j", "1"],
                        env={"COLUMNS": "200"})
    assert res.exit_code != 0
    assert "task builds" in res.stdout
    table = res.stdout[res.stdout.index("task builds"):]
    lines: dict[str, list[str]] = {}
    for ln in table.splitlines():
        if ln.split():
            lines.setdefault(ln.split()[0], ln.split())  # the table's row, not the failure line under it
    assert lines["calc"][1:7] == ["3.11", "built", "2", "0", "2/4", "0"]
    assert lines["broken"][1:7] == ["3.11", "none", "–", "–", "0/1", "0"]
    assert "broken failed: pip install failed" in table
    (broken_target,) = load_targets(settings, "broken")
    assert broken_target.reason is Unverified.ENV_FAILED and "pip install" in broken_target.detail


@pytest.mark.slow
def test_report_marks_tasks_tested_by_supplementary_tests(built, tmp_path):
    from coderun.evaluation.store import Result, RunInfo, RunSample, RunStore, RunTask
    from coderun.records import VerdictKind
    from coderun.report.aggregate import build_report
    from coderun.report.render import to_markdown

    settings, _, _ = built
    store = RunStore.create(tmp_path / "run", RunInfo(run_id="run", label="A"))
    tasks = load_tasks(settings, project="calc")
    store.add_tasks([RunTask.from_task(t) for t in tasks])
    for t in tasks:
        store.add_samples([RunSample(task_id=t.task_id, index=0, code=t.source)])
        store.record_result(Result(task_id=t.task_id, index=0, verdict=VerdictKind.PASS, reason="r"))
    report = build_report(store, [1])
    store.close()
    assert {r.task_id: r.supplementary for r in report.tasks} == {
        "calc/calc/ops.py::add": False, "calc/calc/ops.py::scaled": True}
    assert "1 tasks are tested (also) by supplementary tests" in to_markdown([report], [])


BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def _codereval_data(folder: Path, rows: list[dict]) -> Path:
    """CoderEval's file layout with our own rows (ids, projects, paths, names, docstrings)."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "results-CodeGen-raw.jsonl").open("w") as fh:
        for r in rows:
            fh.write(json.dumps({**r, "docstring": "Return it.", "level": "self_contained"}) + "\n")
    for name in ("CEPythonRaw.jsonl", "CEPythonHumanLabel.jsonl"):
        with (folder / name).open("w") as fh:
            for r in rows:
                fh.write(json.dumps({"question_id": r["_id"], "signature": f"def {r['name']}(a, b):",
                                     "docstring": f"Human words about {r['name']}."}) + "\n")
    return folder


def _script(name: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BENCHMARKS / name), *args], capture_output=True, text=True,
                          timeout=600)


def test_codereval_targets_declares_functions_absent_from_the_tree(tmp_path, monkeypatch):
    """Every CoderEval task of a mapped project is declared: one not in the tree carries a status_note."""
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    write_tree(tmp_path / "upstream", PROJECT)
    path = tmp_path / "calc.yaml"  # written elsewhere (-o): its source path must hold there too
    path.write_text(f"name: calc\nsource: {{path: {tmp_path / 'upstream'}}}\npython: '3.11'\n"
                    "tasks:\n  # discovery stays off\n  discover: {enabled: false}\n")
    data = _codereval_data(tmp_path / "data", [
        {"_id": "X1", "project": "o/calc", "file_path": "calc/ops.py", "name": "add"},
        {"_id": "X2", "project": "o/calc", "file_path": "calc/ops.py", "name": "gone"},
        {"_id": "X3", "project": "o/calc", "file_path": "calc/nowhere.py", "name": "lost"},
        {"_id": "X4", "project": "o/other", "file_path": "x.py", "name": "f"}])
    res = _script("codereval_targets.py", "--data", str(data), "--map", f"o/calc={path}", "-o", str(tmp_path / "out"))
    assert res.returncode == 0, res.stderr
    written = load_manifest(tmp_path / "out" / "calc.yaml")
    targets = {t.function: t for t in written.tasks.targets}
    assert set(targets) == {"calc/ops.py::add", "calc/ops.py::gone", "calc/nowhere.py::lost"}
    assert targets["calc/ops.py::add"].status_note is None
    assert targets["calc/ops.py::add"].human_docstring == "Human words about add."
    assert targets["calc/ops.py::gone"].status_note.startswith("function absent at ")
    assert "not in the file" in targets["calc/ops.py::gone"].status_note
    assert "file not in the tree" in targets["calc/nowhere.py::lost"].status_note
    assert written.tasks.discover.enabled is False  # the rest of the tasks section is kept as written
    assert "# discovery stays off" in (tmp_path / "out" / "calc.yaml").read_text()


@pytest.mark.slow
def test_codereval_coverage_counts_verified_tasks_and_reasons(built, tmp_path):
    data = _codereval_data(tmp_path / "data", [
        {"_id": i, "project": "o/calc", "file_path": "calc/ops.py", "name": n}
        for i, n in (("CE-add", "add"), ("CE-scaled", "scaled"), ("CE-lonely", "lonely"), ("CE-gone", "gone"))
    ] + [{"_id": "CE-elsewhere", "project": "o/elsewhere", "file_path": "x.py", "name": "f"}])
    res = _script("codereval_coverage.py", "--data", str(data), "--markdown")
    assert res.returncode == 0, res.stderr
    calc = next(line for line in res.stdout.splitlines() if line.startswith("| calc |"))
    cells = [c.strip() for c in calc.strip("|").split("|")]
    assert cells[1] == "o/calc" and cells[4] == "yes" and cells[5] == "2/0" and cells[6] == "2/4"
    assert cells[7] == "1 no_tests_reach, 1 absent" and cells[8] == "2"  # both verified tasks are self_contained
    assert "CoderEval's 5 Python tasks: 4 declared by 1 manifests, 2 runnable" in res.stdout
    assert "o/elsewhere 1" in res.stdout


@pytest.mark.slow
def test_eval_runs_the_supplementary_tests_too(built, tmp_path):
    """The evaluation sees the tree with the supplementary file: the task it tests passes as written and
    fails blanked, and the run's report marks it."""
    _, _, manifest_file = built
    for mode, expected in (("--ground-truth", 1.0), ("--blank", 0.0)):
        res = CliRunner().invoke(app, ["eval", "--backend", "local", "-j", "1", mode, "--project",
                                       str(manifest_file), "--run-dir", str(tmp_path / mode)])
        assert res.exit_code == 0, res.output
        report = json.loads((tmp_path / mode / "report.json").read_text())
        rows = {t["task_id"]: t for t in report["tasks"]}
        assert rows["calc/calc/ops.py::scaled"]["supplementary"] is True
        assert rows["calc/calc/ops.py::scaled"]["pass@k"]["1"] == expected


@pytest.mark.slow
def test_eval_of_unverifiable_declared_ids_gives_the_manifests_note(built, tmp_path):
    _, _, manifest_file = built
    samples = tmp_path / "s.jsonl"
    samples.write_text("".join(json.dumps({"task_id": i, "solution": "def f(): pass"}) + "\n"
                               for i in ("CE-lonely", "CE-gone")))
    res = CliRunner().invoke(app, ["eval", "--backend", "local", "-j", "1", "--samples", str(samples),
                                   "--project", str(manifest_file), "--run-dir", str(tmp_path / "run")],
                             env={"COLUMNS": "300"})
    problems = res.output
    assert "uncovered: no test executes the body; the manifest says: no test reaches it" in problems, res.output
    assert "(the manifest says: function absent at the matched commit)" in problems
