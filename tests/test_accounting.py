"""Every declared target accounted for, and supplementary tests: a real project built end to end in a temp dir."""

from __future__ import annotations

import json

import git
import pytest
from typer.testing import CliRunner

from coderun.cli.main import app
from coderun.config import load_settings
from coderun.errors import ManifestError
from coderun.manifest import load_manifest
from coderun.records import TaskStatus, Unverified
from coderun.sources import checkout
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
    "tests/test_ops.py": "from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
}

SUPPLEMENTARY = "from calc.ops import scaled\n\n\ndef test_scaled():\n    assert scaled(2, 3) == 6\n"

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
    report = build_tasks(load_manifest(manifest_file), settings, progress=False, jobs=1)
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
    lines = {ln.split()[0]: ln for ln in res.stdout.splitlines() if ln.split() and ln.split()[0] in
             ("calc", "broken")}
    assert "2/4" in lines["calc"] and "built" in lines["calc"]
    assert "none" in lines["broken"] and "0/1" in lines["broken"]
    (broken_target,) = load_targets(settings, "broken")
    assert broken_target.reason is Unverified.ENV_FAILED and "pip install" in broken_target.detail
