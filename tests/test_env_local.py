import json
import subprocess

import pytest
from typer.testing import CliRunner

from coderun.cli.main import app
from coderun.config import load_settings
from coderun.envs.local import build_local_env, find_local_env, load_baseline, local_packages
from coderun.errors import EnvironmentBuildError
from coderun.events import Note
from coderun.manifests.schema import load_manifest
from coderun.tasks.coverage_map import collect_coverage
from tests.helpers import HANGING_TESTS, TINY_PROJECT, write_tree

runner = CliRunner()


def tiny_manifest(tmp_path, extra_tests=""):
    write_tree(tmp_path / "calc", TINY_PROJECT)
    f = tmp_path / "calc.yaml"
    f.write_text(f"name: calc\nsource: {{path: calc}}\npython: '3.11'\ntests:\n  paths: [tests]\n{extra_tests}")
    return load_manifest(f)


@pytest.mark.slow
def test_build_records_baseline_and_is_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    s = load_settings()
    m = tiny_manifest(tmp_path, "  ignore:\n    - {test: tests/test_ops.py::test_unrelated, reason: demo}\n")
    env = build_local_env(m, s)
    baseline = load_baseline(env)
    assert {t.nodeid for t in baseline.tests} == {"tests/test_ops.py::test_add",
                                                   "tests/test_ops.py::test_add_negative"}
    assert baseline.counts()["passed"] == 2 and baseline.ignored == ["tests/test_ops.py::test_unrelated"]
    assert find_local_env(m, s) == env
    meta = json.loads((env.path / "env.json").read_text())
    assert meta["build_seconds"] > 0
    # What the venv holds is recorded with it, as the venv's own python sees it.
    recorded = local_packages(env)
    pytest_in_env = subprocess.run([str(env.python), "-c", "import pytest; print(pytest.__version__)"],
                                   capture_output=True, text=True, check=True).stdout.strip()
    assert env.packages_path.is_file() and recorded.version_of("pytest") == pytest_in_env
    assert recorded.version_of("coverage") and recorded.python.startswith("3.11.")
    # The project is imported from the tree, never installed into the venv.
    assert not list((env.path / "venv").glob("lib/python*/site-packages/calc"))
    # uv resolved and installed the named tooling (pytest, coverage): pip was not needed.
    assert "pytest" in (env.logs / "uv.log").read_text() and not (env.logs / "pip.log").exists()
    # A changed `tests` section records the baseline again and keeps the venv.
    pip_log = (env.logs / "uv.log").stat().st_mtime_ns
    again = build_local_env(tiny_manifest(tmp_path), s)
    assert again.path == env.path and (env.logs / "uv.log").stat().st_mtime_ns == pip_log
    assert load_baseline(again).counts()["passed"] == 3 and find_local_env(tiny_manifest(tmp_path), s) == again


@pytest.mark.slow
def test_env_build_cli_and_failing_install(tmp_path, monkeypatch):
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    tiny_manifest(tmp_path)
    result = runner.invoke(app, ["env", "build", str(tmp_path / "calc.yaml"), "--json"])
    assert result.exit_code == 0, result.output
    row = json.loads(result.stdout.strip().splitlines()[-1])[0]
    assert row["passed"] == 3 and row["failed"] == 0
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nsource: {path: calc}\npython: '3.11'\n"
                   "install:\n  requirements: ['no-such-package-coderun-xyz==9.9']\n")
    result = runner.invoke(app, ["env", "build", str(bad)])
    assert result.exit_code == EnvironmentBuildError.exit_code
    assert "pip install failed" in result.output and "full log:" in result.output


def test_inherited_tests_get_pytests_node_ids(tmp_path):
    """junit's `file` names a mixin's module for inherited tests; node ids must name the collecting module."""
    from coderun.envs.testrun import parse_junit

    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "__init__.py").write_text("class Mixin:\n    def test_a(self):\n        pass\n")
    (tmp_path / "tests" / "test_x.py").write_text("")
    junit = tmp_path / "j.xml"
    junit.write_text('<testsuites><testsuite><testcase classname="tests.test_x.XTest" name="test_a" '
                     'file="tests/__init__.py" line="1" time="0.1"/><testcase classname="tests.test_x" '
                     'name="test_b[1]" file="tests/test_x.py" time="0.2"><failure message="boom"/></testcase>'
                     '</testsuite></testsuites>')
    got = {t.nodeid: t.outcome for t in parse_junit(junit, rootdir=tmp_path)}
    assert got == {"tests/test_x.py::XTest::test_a": "passed", "tests/test_x.py::test_b[1]": "failed"}


GENERATED_PROJECT = {
    "gen/__init__.py": "",
    "gen/scale.py": '''"""Scaling with a factor generated at install time."""
from gen._factor import FACTOR


def scale(values):
    """Return every value multiplied by the generated factor."""
    out = []
    for v in values:
        out.append(v * FACTOR)
    return out
''',
    "tests/test_scale.py": '''from gen.scale import scale


def test_scale():
    assert scale([1, 2]) == [3, 6]


def test_scale_empty():
    assert scale([]) == []
''',
}


@pytest.mark.slow
def test_pre_install_output_is_seen_by_tasks_and_evaluation(tmp_path, monkeypatch):
    """pre_install changed only the baseline's copy: tasks build and eval ran on the untouched checkout."""
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    write_tree(tmp_path / "gen", GENERATED_PROJECT)
    manifest = tmp_path / "gen.yaml"
    manifest.write_text("name: gen\nsource: {path: gen}\npython: '3.11'\n"
                        "install:\n  pre_install: [\"printf 'FACTOR = 3\\\\n' > gen/_factor.py\"]\n"
                        "tests:\n  paths: [tests]\n")
    res = runner.invoke(app, ["env", "build", str(manifest), "--backend", "local", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout.strip().splitlines()[-1])[0]["passed"] == 2
    res = runner.invoke(app, ["tasks", "build", str(manifest), "--json"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["tasks", "list", "--project", "gen", "--json"])
    assert [json.loads(line)["name"] for line in res.stdout.splitlines()] == ["scale"], res.output
    res = runner.invoke(app, ["eval", "--backend", "local", "--ground-truth", "--run-dir", str(tmp_path / "gt"),
                              "--projects", str(tmp_path), "--project", "gen"])
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "gt" / "report.json").read_text())
    assert report["overall"]["pass@k"]["1"] == 1.0
    # The source checkout itself stays as the commit has it.
    assert not list((tmp_path / "home" / "src").glob("gen-*/gen/_factor.py"))


@pytest.mark.slow
def test_a_failed_baseline_is_run_again_in_the_installed_venv(tmp_path, monkeypatch):
    """A build that failed at the baseline reinstalled every dependency once tests.* was fixed (4-6 minutes on
    a large project): the venv was recorded only with a passing baseline. The failure names its cause."""
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    s = load_settings()
    write_tree(tmp_path / "calc", TINY_PROJECT)
    f = tmp_path / "calc.yaml"
    f.write_text("name: calc\nsource: {path: calc}\npython: '3.11'\ntests:\n  paths: [tset]\n")
    with pytest.raises(EnvironmentBuildError) as e:
        build_local_env(load_manifest(f), s)
    assert "tset is not in the tree" in e.value.message and "tests.paths" in e.value.hint
    env_dirs = list(s.envs.iterdir())
    pip_log = (env_dirs[0] / "logs" / "uv.log").stat().st_mtime_ns
    env = build_local_env(tiny_manifest(tmp_path), s)
    assert [env.path] == env_dirs and (env.logs / "uv.log").stat().st_mtime_ns == pip_log
    assert load_baseline(env).counts()["passed"] == 3


@pytest.mark.slow
def test_supplementary_tests_do_not_rebuild_the_environment(tmp_path, monkeypatch):
    """The env key came from the overlay commit, so adding a supplementary test file reinstalled everything."""
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    s = load_settings()
    write_tree(tmp_path / "src", TINY_PROJECT)
    f = tmp_path / "m" / "calc.yaml"
    write_tree(tmp_path / "m", {"calc.yaml": "name: calc\nsource: {path: ../src}\npython: '3.11'\n"
                                             "tests:\n  paths: [tests]\n"})
    env = build_local_env(load_manifest(f), s)
    pip_log = (env.logs / "uv.log").stat().st_mtime_ns
    write_tree(tmp_path / "m", {"calc/tests/test_more.py": "from calc.ops import add\n\n\n"
                                                          "def test_more():\n    assert add(1, 1) == 2\n"})
    f.write_text(f.read_text() + "  supplementary: [tests/test_more.py]\n")
    again = build_local_env(load_manifest(f), s)
    assert again.path == env.path and (env.logs / "uv.log").stat().st_mtime_ns == pip_log
    assert again.checkout.commit != env.checkout.commit and again.checkout.upstream_commit == env.checkout.commit
    assert "tests/test_more.py::test_more" in {t.nodeid for t in load_baseline(again).tests}


@pytest.mark.integration
def test_baseline_test_that_hangs_is_stopped_and_left_out(tmp_path, monkeypatch):
    """A network test that hung stalled an environment build for 15 minutes: the baseline had no per-test limit."""
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    s = load_settings()
    m = tiny_manifest(tmp_path, "  timeout_per_test: 2\n  timeout: 300\n")
    write_tree(tmp_path, HANGING_TESTS)
    events = []
    env = build_local_env(m, s, on_event=events.append)
    warnings = [e.text for e in events if isinstance(e, Note) and e.level == "warning"]
    baseline = load_baseline(env)
    hung = {"tests/test_hang.py::test_sleeps_forever", "tests/test_hang.py::test_swallows_the_alarm"}
    assert set(baseline.timed_out) == hung
    assert baseline.passing() == {"tests/test_ops.py::test_add", "tests/test_ops.py::test_add_negative",
                                  "tests/test_ops.py::test_unrelated"}
    assert baseline.counts()["timed_out"] == 2 and "test_swallows_the_alarm" in warnings[0]
    # The coverage run of the task build leaves them out too, instead of waiting on them.
    covmap = collect_coverage(m, env.python, env.checkout.path, baseline)
    assert covmap.kind == "coverage" and not hung & set(covmap.outcomes)


@pytest.mark.slow
def test_the_coverage_map_records_the_candidates_files_and_asks_the_whole_tree_when_none_ran(tmp_path, monkeypatch):
    """The mapping reads the candidates' files only, so only they are measured (rdflib's run: 160 s for the
    tree, 122 s for them). When none of their lines ran, the whole tree is measured again: whether any file of
    the project ran decides between the coverage map and matching by file name, as before."""
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    m = tiny_manifest(tmp_path)
    write_tree(tmp_path / "calc", {"calc/idle.py": "def never():\n    return 1\n"})
    env = build_local_env(m, load_settings())
    baseline = load_baseline(env)
    whole = collect_coverage(m, env.python, env.checkout.path, baseline)
    assert {"calc/ops.py", "tests/test_ops.py"} <= set(whole.lines)
    ops = collect_coverage(m, env.python, env.checkout.path, baseline, measure={"calc/ops.py"})
    assert set(ops.lines) == {"calc/ops.py"} and ops.lines["calc/ops.py"] == whole.lines["calc/ops.py"]
    idle = collect_coverage(m, env.python, env.checkout.path, baseline, measure={"calc/idle.py"})
    assert idle.kind == "coverage" and idle.lines == whole.lines   # the whole run: ops.py ran
