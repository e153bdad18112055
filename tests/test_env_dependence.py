"""Tests that depend on the environment are found, not trusted: network use in the task build, a `pass`
body the tests accept, and tests.configurations (verified and evaluated in each). A real project, venv,
coverage run and sandbox runs."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from coderun.cli.main import app
from coderun.config import load_settings
from coderun.envs import testrun
from coderun.envs.local import baseline_tests_key
from coderun.errors import ManifestError, TaskError
from coderun.evaluation.store import RunStore
from coderun.manifests.schema import load_manifest
from coderun.records import TaskStatus
from coderun.tasks import build_tasks, load_tasks
from tests.helpers import write_tree

DOC = '"""Return the {what}, computed step by step for the caller."""'

DOUBLE = f'''def double(x):
    {DOC.format(what="double of x")}
    twice = x
    twice = twice + x
    result = twice
    return result
'''

PROJECT = {
    "modes/__init__.py": "",
    "modes/flags.py": f'''import os
import socket


def fast_enabled():
    {DOC.format(what="whether MODES_FAST asks for the fast path")}
    value = os.environ.get("MODES_FAST")
    wanted = value == "1"
    result = wanted
    return result


def probe(address):
    {DOC.format(what='"up" when a TCP connection to address opens in a fifth of a second, else "down"')}
    try:
        conn = socket.create_connection(address, timeout=0.2)
    except OSError:
        return "down"
    conn.close()
    return "up"


{DOUBLE}''',
    "tests/test_flags.py": '''import os
import socket

from modes.flags import double, fast_enabled, probe


def test_fast_matches_the_variable():
    assert bool(fast_enabled()) == (os.environ.get("MODES_FAST") == "1")


def test_probe_of_an_unroutable_address():
    # 192.0.2.0/24 is TEST-NET-1: passes only where nothing answers there (a network-less sandbox)
    assert probe(("192.0.2.1", 9)) == "down"
    server = socket.socket()  # and a second value, so a body returning a constant does not pass
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    assert probe(server.getsockname()) == "up"
    server.close()


def test_double_over_loopback():
    # A connection to a server the test starts on 127.0.0.1 stays on this machine: not flagged.
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    client = socket.create_connection(server.getsockname())
    client.close()
    server.close()
    assert double(3) == 6
''',
}

BASE = "name: modes\nsource: {path: modes}\npython: '3.11'\ntests:\n  paths: [tests]\n"
CONFIGURED = BASE + ("  configurations:\n    - {name: slow, env: {MODES_FAST: null}}\n"
                     "    - {name: fast, env: {MODES_FAST: '1'}}\n")


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """One source, built first without configurations (tasks kept), then with them (same venv)."""
    tmp = tmp_path_factory.mktemp("modes")
    write_tree(tmp / "modes", PROJECT)
    plain_dir, conf_dir = tmp / "plain", tmp / "configured"
    plain_dir.mkdir()
    conf_dir.mkdir()
    (plain_dir / "modes.yaml").write_text(BASE.replace("{path: modes}", f"{{path: {tmp / 'modes'}}}"))
    (conf_dir / "modes.yaml").write_text(CONFIGURED.replace("{path: modes}", f"{{path: {tmp / 'modes'}}}"))
    mp = pytest.MonkeyPatch()
    mp.setenv("CODERUN_HOME", str(tmp / "home"))
    settings = load_settings()
    plain_report = build_tasks(load_manifest(plain_dir / "modes.yaml"), settings).projects[0]
    plain = {t.name: t for t in load_tasks(settings, status="all")}
    listing = CliRunner().invoke(app, ["tasks", "list", "--project", "modes"], env={"COLUMNS": "200"})
    conf_report = build_tasks(load_manifest(conf_dir / "modes.yaml"), settings).projects[0]
    configured = {t.name: t for t in load_tasks(settings, status="all")}
    yield {"plain": plain, "plain_report": plain_report, "listing": listing, "configured": configured,
           "conf_report": conf_report, "conf_dir": conf_dir, "tmp": tmp}
    mp.undo()


@pytest.mark.slow
def test_a_test_reaching_a_non_loopback_address_flags_its_task(project):
    """federation's case: a test that passes only because the sandbox has no route is flagged, loopback not."""
    probe = project["plain"]["probe"]
    assert probe.status is TaskStatus.VERIFIED and probe.environment_dependent
    assert [(a.nodeid, a.addresses) for a in probe.network_tests] == [
        ("tests/test_flags.py::test_probe_of_an_unroutable_address", ["192.0.2.1:9"])]
    double = project["plain"]["double"]
    assert double.tests == ["tests/test_flags.py::test_double_over_loopback"]
    assert not double.network_tests  # its test connects to 127.0.0.1 only
    assert project["plain_report"].network_tests == {
        "tests/test_flags.py::test_probe_of_an_unroutable_address": ["192.0.2.1:9"]}
    assert project["plain_report"].network_note == ""


@pytest.mark.slow
def test_tests_a_pass_body_passes_mark_the_task_weak_but_keep_it(project):
    """zope's `_c_optimizations_required`: with one setting, a body returning None passes its test."""
    plain = project["plain"]
    assert plain["fast_enabled"].status is TaskStatus.VERIFIED and plain["fast_enabled"].pass_stub_passes
    assert not plain["double"].pass_stub_passes and not plain["probe"].pass_stub_passes
    assert project["plain_report"].pass_stub_passes == ["modes/modes/flags.py::fast_enabled"]
    assert "fast_enabled" in {t.name for t in load_tasks(load_settings())}  # still in the benchmark


@pytest.mark.slow
def test_tasks_list_shows_the_flags(project):
    res = project["listing"]
    assert res.exit_code == 0, res.output
    rows = {line.split()[0].rsplit("::", 1)[-1]: line for line in res.stdout.splitlines() if "::" in line}
    assert "weak" in rows["fast_enabled"] and "network" in rows["probe"]
    assert "weak" not in rows["double"] and "network" not in rows["double"]
    assert "test_probe_of_an_unroutable_address" in res.stdout


@pytest.mark.slow
def test_configurations_catch_the_stub_one_setting_lets_through(project):
    """Run with and without the variable, the `pass` body fails where the variable is set."""
    t = project["configured"]["fast_enabled"]
    assert t.status is TaskStatus.VERIFIED and not t.pass_stub_passes
    assert [(c.name, c.tests) for c in t.configurations] == [
        ("slow", ["tests/test_flags.py::test_fast_matches_the_variable"]),
        ("fast", ["tests/test_flags.py::test_fast_matches_the_variable"])]
    assert project["conf_report"].configurations == ["slow", "fast"]


@pytest.mark.slow
def test_eval_in_every_configuration(project, tmp_path):
    """Ground truth passes everywhere, blank nowhere, and a sample right in one configuration only fails,
    naming the configuration; the report says which tasks are environment-dependent."""
    conf_dir, tasks = project["conf_dir"], project["configured"]
    for kind, expected in (("--ground-truth", 1.0), ("--blank", 0.0)):
        res = CliRunner().invoke(app, ["eval", "--backend", "local", kind, "--run-dir", str(tmp_path / kind),
                                       "--projects", str(conf_dir), "--project", "modes"])
        assert res.exit_code == 0, res.output
        assert json.loads((tmp_path / kind / "report.json").read_text())["overall"]["pass@k"]["1"] == expected
    samples = tmp_path / "samples.jsonl"
    samples.write_text(json.dumps({"task_id": tasks["fast_enabled"].task_id,
                                   "solution": "def fast_enabled():\n    return False\n"}) + "\n")
    res = CliRunner().invoke(app, ["eval", "--backend", "local", "--samples", str(samples), "--run-dir",
                                   str(tmp_path / "one"), "--projects", str(conf_dir)])
    assert res.exit_code == 0, res.output
    with RunStore.open(tmp_path / "one") as store:
        (result,) = store.results()
    assert result.verdict.value == "fail" and "configuration fast" in result.reason
    md = CliRunner().invoke(app, ["report", str(tmp_path / "--ground-truth"), "--format", "md"]).stdout
    assert "environment-dependent" in md and "test_probe_of_an_unroutable_address" in md
    html = CliRunner().invoke(app, ["report", str(tmp_path / "--ground-truth"), "--format", "html"]).stdout
    assert 'class="mark"' in html and "env-dependent" in html
    table = CliRunner().invoke(app, ["report", str(tmp_path / "--ground-truth"), "--wide"]).stdout
    assert "environment-dependent" in " ".join(table.split())


def test_configuration_env_goes_over_tests_env_and_null_removes(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text("name: m\nsource: {path: .}\npython: '3.11'\ntests:\n  env: {A: '1', B: '2'}\n"
                    "  configurations:\n    - {name: one, env: {A: null, C: '3'}}\n")
    manifest = load_manifest(path)
    env = testrun.test_env(manifest, tmp_path, "one")
    assert "A" not in env and env["B"] == "2" and env["C"] == "3"
    assert testrun.test_env(manifest, tmp_path)["A"] == "1"
    with pytest.raises(TaskError, match="no configuration 'two'"):
        testrun.test_env(manifest, tmp_path, "two")


def test_configuration_names_must_differ(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text("name: m\nsource: {path: .}\npython: '3.11'\ntests:\n  configurations:\n"
                    "    - {name: one}\n    - {name: one, env: {A: '1'}}\n")
    with pytest.raises(ManifestError, match="one given twice"):
        load_manifest(path)


def test_configurations_leave_the_baseline_key_alone(tmp_path):
    """The baseline runs in tests.env alone: adding configurations must not rebuild it."""
    base = "name: m\nsource: {path: .}\npython: '3.11'\ntests:\n  env: {A: '1'}\n"
    a, b, c = tmp_path / "a.yaml", tmp_path / "b.yaml", tmp_path / "c.yaml"
    a.write_text(base)
    b.write_text(base + "  configurations:\n    - {name: one, env: {A: null}}\n")
    c.write_text(base.replace("'1'", "'2'"))
    key = baseline_tests_key(load_manifest(a))
    assert baseline_tests_key(load_manifest(b)) == key != baseline_tests_key(load_manifest(c))


TOOL = {
    "tool/__init__.py": "",
    "tool/ops.py": DOUBLE,
    "tests/test_ops.py": '''import os

import pytest

from tool.ops import double


@pytest.mark.skipif(os.environ.get("TOOL_CC") != "1", reason="no C compiler")  # lithium's test_crashes_2
def test_double_of_a_compiled_value():
    assert double(21) == 42


def test_double():
    assert double(3) == 6
''',
}


@pytest.mark.slow
def test_a_task_whose_tests_do_not_pass_in_this_environment_is_not_graded(tmp_path):
    """lithium's tasks, verified where a compiler makes test_crashes_2 run, on an image without one: the test
    skips in that environment's baseline, so every sample failed whatever its code. Now no sample runs: each
    is an infrastructure error naming the test, and the run says how to make the tasks runnable."""
    write_tree(tmp_path / "tool", TOOL)
    base = f"name: tool\nsource: {{path: {tmp_path / 'tool'}}}\npython: '3.11'\ntests:\n  paths: [tests]\n"
    built_dir, here_dir = tmp_path / "built", tmp_path / "here"
    built_dir.mkdir()
    here_dir.mkdir()
    (built_dir / "tool.yaml").write_text(base + "  env: {TOOL_CC: '1'}\n")
    (here_dir / "tool.yaml").write_text(base)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CODERUN_HOME", str(tmp_path / "home"))
        build_tasks(load_manifest(built_dir / "tool.yaml"), load_settings())
        (task,) = load_tasks(load_settings())
        assert "tests/test_ops.py::test_double_of_a_compiled_value" in task.tests
        res = CliRunner().invoke(app, ["eval", "--backend", "local", "--ground-truth", "--run-dir",
                                       str(tmp_path / "run"), "--projects", str(here_dir)],
                                 env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    with RunStore.open(tmp_path / "run") as store:
        (result,) = store.results()
    assert result.verdict.value == "infra" and result.evidence is None
    assert "test_double_of_a_compiled_value, skipped in its baseline" in result.reason
    assert "1 task(s) cannot be graded in this environment" in " ".join(res.output.split())
