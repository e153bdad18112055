"""Several projects' task builds side by side (`tasks build --at-once`), each in its own process: the same
tasks as built alone, a report per project, and a failed one that leaves the others built."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from coderun.cli.main import app
from coderun.config import load_settings
from coderun.tasks import load_tasks
from coderun.tasks.build import default_jobs
from coderun.tasks.side_by_side import Queue
from tests.helpers import write_tree

pytestmark = pytest.mark.slow

ADD = {"calc/__init__.py": "", "calc/ops.py": "def add(a, b):\n    total = a\n    total += b\n    result = total\n    return result\n",
       "tests/test_ops.py": "from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
                           "    assert add(1, 1) == 2\n"}
MUL = {"geo/__init__.py": "", "geo/area.py": "def area(w, h):\n    size = w\n    size *= h\n    result = size\n    return result\n",
       "tests/test_area.py": "from geo.area import area\n\n\ndef test_area():\n    assert area(2, 3) == 6\n"
                             "    assert area(1, 4) == 4\n"}


def _manifest(tmp_path, name: str, files: dict[str, str]) -> str:
    write_tree(tmp_path / name, files)
    f = tmp_path / f"{name}.yaml"
    f.write_text(f"name: {name}\nsource: {{path: {name}}}\npython: '3.11'\ntests:\n  paths: [tests]\n"
                 "tasks:\n  discover: {undocumented: true}\n")
    return str(f)


def test_projects_built_side_by_side_get_their_tasks_and_reports(tmp_path, monkeypatch):
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    manifests = [_manifest(tmp_path, "calc", ADD), _manifest(tmp_path, "geo", MUL)]
    res = CliRunner().invoke(app, ["tasks", "build", *manifests, "--at-once", "2", "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert sorted(p["project"] for p in report["projects"]) == ["calc", "geo"]
    assert {s["project"]: s["discovered"] for s in report["summary"]} == {"calc": 1, "geo": 1}
    settings = load_settings()
    assert sorted(t.qualname for t in load_tasks(settings)) == ["add", "area"]
    for name in ("calc", "geo"):  # each child's whole output is kept
        assert "verified" in (settings.runs / "tasks" / f"{name}.log").read_text()


def test_a_failed_build_beside_others_is_named_with_its_log(tmp_path, monkeypatch):
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    broken = {**MUL, "tests/conftest.py": "import sys\nif 'coverage' in sys.modules:\n    raise SystemExit(3)\n"}
    manifests = [_manifest(tmp_path, "calc", ADD), _manifest(tmp_path, "geo", broken)]
    res = CliRunner().invoke(app, ["tasks", "build", *manifests, "--at-once", "2"])
    out = " ".join(res.output.split())
    assert res.exit_code != 0
    # the words it fails in alone, and where its whole output is
    assert "error: geo: the coverage run that maps tests to functions did not complete (exit 3)" in out, out
    assert f"geo: building its tasks (-j {default_jobs()}, sharing {max(default_jobs(), 2)} slots; log:" in out
    assert "runs/tasks/geo.log" in "".join(out.split())
    assert "calc" in {t.project for t in load_tasks(load_settings())}


SLOW = {"slow/__init__.py": "", "slow/wait.py": "def twice(x):\n    doubled = x\n    doubled *= 2\n    result = doubled\n    return result\n",
        "tests/test_wait.py": "import time\n\nfrom slow.wait import twice\n\n\ndef test_twice():\n"
                              "    time.sleep(1.5)\n    assert twice(2) == 4\n    assert twice(3) == 6\n"}


def test_more_projects_than_at_once_build_their_environments_first(tmp_path, monkeypatch):
    # Four projects two at a time: every environment first (its log beside the task build's), then the task
    # builds, each start naming its suite's time; a project whose environment fails is named with its own
    # error and not built further.
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    broken = _manifest(tmp_path, "nodeps", ADD)
    with open(broken, "a") as f:
        f.write("install:\n  requirements: [coderun-no-such-package-anywhere==0.0.1]\n")
    manifests = [_manifest(tmp_path, "calc", ADD), broken, _manifest(tmp_path, "geo", MUL),
                 _manifest(tmp_path, "slow", SLOW)]
    res = CliRunner().invoke(app, ["tasks", "build", *manifests, "--at-once", "2"])
    out = " ".join(res.output.split())
    assert res.exit_code != 0, out
    assert "1 of 4 task builds failed: nodeps" in out, out
    assert "error: nodeps: pip install failed" in out
    assert "nodeps: building its tasks" not in out
    assert re.search(r"slow: building its tasks \(its suite [0-9]+s, the longest waiting; -j", out), out
    assert out.rindex("building its environment") < min(out.index(f"{p}: building its tasks")
                                                         for p in ("calc", "geo", "slow"))
    runs = load_settings().runs / "tasks"
    for name in ("calc", "geo", "slow"):
        assert json.loads((runs / f"{name}.env.json").read_text())[0]["passed"] == 1
        assert "verified" in (runs / f"{name}.log").read_text()
    assert sorted(t.qualname for t in load_tasks(load_settings())) == ["add", "area", "twice"]


def test_the_queue_starts_every_environment_then_the_longest_suite_built():
    q = Queue(["a", "b", "c", "d"], envs_first=True)
    assert q.waiting() == 4
    assert [q.next() for _ in range(4)] == [("environment", n) for n in "abcd"]
    assert q.next() is None and q.waiting() == 4          # nothing to start until an environment is built
    q.built("b", 1.0)
    q.built("c", None)                                     # failed: no task build
    q.built("a", 5.0)
    assert q.next() == ("tasks", "a") and q.waiting() == 2
    q.built("d", 9.0)
    assert [q.next(), q.next(), q.next()] == [("tasks", "d"), ("tasks", "b"), None]
    assert q.waiting() == 0
    alone = Queue(["x", "y"], envs_first=False)            # no more projects than at once: in the order given
    assert [alone.next(), alone.next(), alone.next()] == [("tasks", "x"), ("tasks", "y"), None]


def test_by_default_two_more_builds_than_cores_run_at_once_none_waiting_for_a_slot(tmp_path, monkeypatch):
    # On 2 cores, three projects all build at once: each holds a slot of its own from the start (a build's
    # tests wait for part of its time, which the builds beyond the cores use), none waits for one.
    import coderun.cli.tasks as cli_tasks
    from coderun.tasks.side_by_side import default_at_once

    assert [default_at_once(c) for c in (1, 2, 8)] == [1, 4, 10]
    monkeypatch.setattr(cli_tasks, "default_jobs", lambda: 2)
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    manifests = [_manifest(tmp_path, "calc", ADD), _manifest(tmp_path, "geo", MUL), _manifest(tmp_path, "slow", SLOW)]
    res = CliRunner().invoke(app, ["tasks", "build", *manifests])
    out = " ".join(res.output.split())
    assert res.exit_code == 0, out
    assert "building its environment" not in out   # no more projects than builds at once: no env phase first
    assert max(out.index(f"{p}: building its tasks (-j 2, sharing 3 slots") for p in ("calc", "geo", "slow")) \
        < out.index("built in"), out
    runs = load_settings().runs / "tasks"
    for name in ("calc", "geo", "slow"):
        assert "waiting for a core" not in (runs / f"{name}.log").read_text()
    assert sorted(t.qualname for t in load_tasks(load_settings())) == ["add", "area", "twice"]
