"""Task builds that scale: caps on mapped tests, parallel verification, progress lines without a terminal,
resuming an interrupted build, and pruning tasks whose project is gone. Real venvs, real subprocesses."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from coderun.cli.main import app
from coderun.config import Settings, load_settings
from coderun.errors import TaskError
from coderun.evaluation.evaluate import EvalRequest, start_run
from coderun.parallel import SLOTS_VARIABLE, JobSlots, parallel
from coderun.records import Task, TaskStatus
from coderun.tasks import load_tasks, store
from coderun.tasks.coverage_map import cap_tests
from coderun.tasks.verify import TaskTests, Verification
from tests.helpers import write_tree
from tests.shared_home import built_once, home_view

DOC = '"""Return the {what} of the given value, computed step by step for the caller."""'
N_FUNCS = 6


def _project() -> dict[str, str]:
    funcs, tests = [], ["import time\n\nfrom slow import work\n"]
    for i in range(N_FUNCS):
        funcs.append(f'''

def step{i}(x):
    {DOC.format(what=f"step {i} result")}
    y = x + {i}
    y = y * 2
    y = y - {i}
    return y
''')
        for variant in ("a", "b"):
            tests.append(f'''

def test_step{i}_{variant}():
    time.sleep(0.3)
    assert work.step{i}(1) == {(1 + i) * 2 - i}
''')
    funcs.append(f'''

def slowpoke(x):
    {DOC.format(what="slowly computed")}
    y = x * 3
    y = y + 1
    y = y - 1
    return y
''')
    tests.append('''

def test_slowpoke_quick():
    assert work.slowpoke(2) == 6


def test_slowpoke_slow():
    time.sleep(1.5)
    assert work.slowpoke(3) == 9
''')
    return {"slow/__init__.py": "", "slow/work.py": '"""Steps."""\n' + "".join(funcs),
            "tests/test_work.py": "".join(tests)}


def _manifest(root: Path, max_seconds: float = 1.0) -> Path:
    write_tree(root / "slow", _project())
    f = root / "projects" / "slow.yaml"
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(f"name: slow\nsource: {{path: {root / 'slow'}}}\npython: '3.11'\n"
                 "tests:\n  paths: [tests]\n"
                 f"tasks:\n  max_seconds_per_task: {max_seconds}\n")
    return f


NO_RIGOR = ("--no-rigor",)  # the kept decisions are verification's; pass+ derivation is tested on its own


def _cli(home: Path, projects: Path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "CODERUN_HOME": str(home), "CODERUN_PROJECTS": str(projects), "COLUMNS": "200"}
    return subprocess.Popen([sys.executable, "-m", "coderun", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _env_built(root: Path) -> None:
    """The project's environment, built once for both interruptions (each gets a home_view of it)."""
    manifest = _manifest(root)
    env_build = _cli(root / "home", manifest.parent, "env", "build", "slow")
    assert env_build.wait(600) == 0, env_build.stderr.read()


def _decided(home: Path) -> set[str]:
    db = home / "store.sqlite"
    if not db.is_file():
        return set()
    try:
        with sqlite3.connect(db, timeout=30) as conn:
            rows = conn.execute("SELECT key FROM task_progress WHERE key LIKE '%::%'")  # task ids only
            return {r[0] for r in rows}
    except sqlite3.OperationalError:  # the table is not there yet
        return set()


def _tests_in_logs(logs: list[Path]) -> set[str]:
    out = set()
    for log in logs:
        for line in log.read_text().splitlines():
            if line.startswith("# tests: "):
                out |= set(line.removeprefix("# tests: ").split())
    return out


# ------------------------------------------------------------------------------------ caps


def test_cap_drops_the_slowest_tests_first():
    durations = {"a": 0.1, "b": 5.0, "c": 1.0, "d": 0.2}
    assert cap_tests(["a", "b", "c", "d"], durations, 3, 100) == (["a", "c", "d"], ["b"])
    assert cap_tests(["a", "b", "c", "d"], durations, 10, 1.5) == (["a", "c", "d"], ["b"])
    assert cap_tests(["a", "b", "c", "d"], durations, 10, 0.25) == (["a"], ["b", "c", "d"])


def test_without_a_count_cap_only_the_time_budget_drops():
    durations = {"a": 0.1, "b": 2.0, "c": 0.2}
    assert cap_tests(["a", "b", "c"], durations, None, 1.0) == (["a", "c"], ["b"])
    assert cap_tests(["a", "b", "c"], durations, None, 10.0) == (["a", "b", "c"], [])


def test_cap_never_drops_the_last_test():
    """A task whose fastest test alone is over the budget keeps that test: the cap trims, never empties."""
    assert cap_tests(["slow", "slower"], {"slow": 9.0, "slower": 20.0}, 5, 1.0) == (["slow"], ["slower"])
    assert cap_tests(["x", "y"], {}, 1, 1.0) == (["x"], ["y"])  # unknown durations count as 0; ties by id


def test_kept_decisions_of_other_inputs_are_discarded(tmp_path):
    """A changed input (commit, manifest, environment) redoes every task: its kept decisions go."""
    settings = Settings(home=tmp_path)
    spec = TaskTests("p/m.py::f", "m.py", "f", 1, ("t::a",))
    v = Verification(spec.task_id, TaskStatus.VERIFIED, ("t::a",), (), ("t::a",))
    store.keep_progress(settings, "p", "inputs-1", spec.task_id, v.to_json(spec))
    assert Verification.from_json(store.progress(settings, "p", "inputs-1")[spec.task_id], spec) == v
    other = TaskTests(spec.task_id, "m.py", "f", 1, ("t::a", "t::b"))
    assert Verification.from_json(v.to_json(spec), other) is None  # decided for other tests
    assert store.progress(settings, "p", "inputs-2") == {}
    assert store.progress(settings, "p", "inputs-1") == {}


# ---------------------------------------------------------------------- build, kill, resume


def test_ctrl_c_while_the_caller_handles_a_result_still_finishes_the_tasks_under_way():
    """CI, loaded: the Ctrl-C came while the build was saving a decision (the caller's code, between two
    results), closed the generator there, and the task under way was lost with no word said."""
    release, events, got, handler = threading.Event(), [], [], signal.getsignal(signal.SIGINT)

    def work(i: int) -> int:
        if i == 1:
            release.wait(10)  # under way when Ctrl-C comes
        return i * 10

    with pytest.raises(KeyboardInterrupt):
        for item, result in parallel(work, [0, 1, 2], 2, on_event=events.append):
            got.append((item, result))
            if item == 0:
                signal.raise_signal(signal.SIGINT)  # in the caller's code, between two results
                release.set()
    assert got == [(0, 0), (1, 10)]  # 1 finished and handed over; 2 never started
    assert [e.text for e in events if "interrupted" in e.text] == [
        "interrupted: finishing the 1 tasks under way; every decision made is kept, and running the same build "
        "again resumes"]
    assert signal.getsignal(signal.SIGINT) is handler  # put back


def test_ctrl_c_between_two_tasks_says_so():
    """CI, loaded: with -j 1 a Ctrl-C that came while a decision was saved found no task under way, and the
    build stopped without a word."""
    events, got = [], []
    with pytest.raises(KeyboardInterrupt):
        for item, result in parallel(lambda i: i, [0, 1, 2], 1, on_event=events.append):
            got.append((item, result))
            signal.raise_signal(signal.SIGINT)  # the next task is not started yet
    assert got == [(0, 0)]
    assert [e.text for e in events if "interrupted" in e.text] == [
        "interrupted: every decision made is kept, and running the same build again resumes"]


def test_builds_side_by_side_share_the_cores(tmp_path):
    """make's jobserver, for two builds: a build with nothing running takes a free core at once; one that
    runs a task already takes another only once it has stayed free for a while (a build waiting for its first
    is not outrun); a core is given back when its task ends, and by a process that ends."""
    JobSlots.create(tmp_path, 2)
    a, b = JobSlots(str(tmp_path)), JobSlots(str(tmp_path))
    assert a.take(0) and b.take(0)
    assert not a.take(1) and not b.take(1)   # both cores held
    b.give()
    assert not a.take(1)                     # free just now: b, or a third build, may want it back
    time.sleep(JobSlots.SPARE_SECONDS + 0.1)
    assert a.take(1) and len(a.held) == 2
    assert not b.take(0)
    a.give_all()
    assert b.take(0)
    assert JobSlots(None).take(5)             # not side by side: -j is the only limit

    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys, time\n"
                               f"fd = os.open({str(tmp_path / 'slot-1')!r}, os.O_RDWR)\n"
                               "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(60)"],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "held\n"
    b.give_all()
    c = JobSlots(str(tmp_path))
    assert c.take(0) and not JobSlots(str(tmp_path)).take(0)
    holder.kill()
    holder.wait()
    assert JobSlots(str(tmp_path)).take(0)   # the dead process's core is free


def test_a_build_holds_a_core_of_its_own_and_takes_more_when_they_are_free(tmp_path, monkeypatch):
    """make's implicit token: a build holds one core all its life (its one-core stages, then its first task,
    run on it: another build's tasks cannot slow them); each further task takes a free core. A build that
    starts while every core is held waits, and says so."""
    JobSlots.create(tmp_path, 2)
    monkeypatch.setenv(SLOTS_VARIABLE, str(tmp_path))
    monkeypatch.setattr(JobSlots, "_own", None)
    other = JobSlots(str(tmp_path))
    assert other.take(0)                      # another build's task on the second core
    waits: list[str] = []
    JobSlots.hold_own(lambda: waits.append("waiting"))
    assert JobSlots._own is not None and waits == []
    mine = JobSlots.shared()
    assert mine.take(0) and not mine.held     # the first task runs on the build's own core
    assert not mine.take(1)                   # no other is free
    other.give()
    assert not mine.take(1)                   # free just now: a build starting may want it
    time.sleep(JobSlots.SPARE_SECONDS + 0.1)
    assert mine.take(1) and len(mine.held) == 1
    mine.give_all()
    os.close(JobSlots._own)
    monkeypatch.setattr(JobSlots, "_own", None)

    a, b = JobSlots(str(tmp_path)), JobSlots(str(tmp_path))
    assert a.take(0) and b.take(0)            # every core held: a build starting waits for one
    threading.Timer(0.3, a.give).start()
    JobSlots.hold_own(lambda: waits.append("waiting"))
    assert waits == ["waiting"] and JobSlots._own is not None
    os.close(JobSlots._own)
    b.give()


def test_parallel_waits_for_a_core_another_build_holds(tmp_path, monkeypatch):
    """With every shared core held by another build, no task starts; each starts as a core comes free."""
    JobSlots.create(tmp_path, 1)
    monkeypatch.setenv(SLOTS_VARIABLE, str(tmp_path))
    other = JobSlots(str(tmp_path))
    assert other.take(0)
    given = threading.Event()

    def give_back():
        given.set()
        other.give()

    threading.Timer(0.5, give_back).start()
    got = [(item, seen) for item, seen in parallel(lambda i: given.is_set(), [0, 1, 2], 2)]
    assert sorted(got) == [(0, True), (1, True), (2, True)]   # none started before the core was given back
    assert other.take(0)                     # every core given back when the work is done


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "kill-9"])
def test_interrupted_build_resumes_without_verifying_finished_tasks_again(tmp_path, tmp_path_factory, sig):
    """A 37-minute build stopped by Ctrl-C kept nothing: now each decision is kept as it is made (a kill
    loses only the tasks under way) and the next build with the same inputs does not run the tests of a
    decided task again."""
    shared = built_once(tmp_path_factory, "tasks-scale-env", _env_built)
    home, projects = home_view(shared / "home", tmp_path / "home"), shared / "projects"

    first = _cli(home, projects, "tasks", "build", "slow", "-j", "1", *NO_RIGOR)
    deadline = time.monotonic() + 600
    while len(_decided(home)) < 2 and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert first.poll() is None, f"the build ended before it could be interrupted: {first.stderr.read()}"
    first.send_signal(sig)
    _, err1 = first.communicate(timeout=300)
    assert first.returncode != 0
    # Ctrl-C says so, also when it comes between two tasks (-j 1: none under way; it said nothing then)
    assert sig == signal.SIGKILL or ("interrupted: " in err1 and "every decision made is kept" in err1), err1
    decided = _decided(home)
    assert 2 <= len(decided) < N_FUNCS + 1, err1
    logs = home / "runs" / "tasks" / "slow"
    before = set(logs.glob("run-*.log"))
    coverage_log = (logs / "coverage.log").read_text()

    second = _cli(home, projects, "tasks", "build", "slow", "-j", "2", *NO_RIGOR)
    out2, err2 = second.communicate(timeout=600)
    assert second.returncode == 0, err2
    assert f"{len(decided)} tasks taken from the interrupted build" in out2
    report = json.loads(store.build_reports(Settings(home=home))["slow"])
    assert report["resumed"] == len(decided) and report["jobs"] == 2
    new_logs = set(logs.glob("run-*.log")) - before
    rerun = _tests_in_logs(sorted(new_logs))
    names = {t.task_id: t for t in load_tasks(Settings(home=home), status="all")}
    for tid in decided:
        assert not set(names[tid].tests) & rerun, f"{tid} was verified again"
    # The test mapping and the shared runs of the original were kept too: only what was left ran.
    assert "test mapping taken from the interrupted build" in err2 and "running the original" not in err2
    assert (logs / "coverage.log").read_text() == coverage_log
    assert rerun and rerun <= {n for t in names.values() for n in t.tests if t.task_id not in decided}
    assert {t.status for t in names.values()} == {TaskStatus.VERIFIED}
    assert _decided(home) == set()  # a finished build leaves no progress rows
    # Without a terminal, progress comes as lines.
    assert f"slow: {N_FUNCS + 1}/{N_FUNCS + 1} tasks done ({N_FUNCS + 1} verified)" in err2

    # The cap: slowpoke's slow test (1.5 s in the baseline) is over the 1 s budget and dropped, reported.
    slow = names["slow/slow/work.py::slowpoke"]
    assert slow.tests == ["tests/test_work.py::test_slowpoke_quick"]
    assert report["capped"] == {"slow/slow/work.py::slowpoke": ["tests/test_work.py::test_slowpoke_slow"]}
    assert "1 tasks capped" in out2 and "slowpoke: 1 dropped, slowest tests/test_work.py::test_slowpoke_slow" in out2


# ------------------------------------------------------------------------------------ prune


def _fake_task(project: str, name: str) -> Task:
    return Task(task_id=f"{project}/m.py::{name}", project=project, commit="0" * 40, file="m.py", qualname=name,
                name=name, lineno=1, end_lineno=5, signature=f"def {name}():", docstring="Doc.",
                source=f"def {name}():\n    return 1\n", level="self_contained", tests=["t.py::test"],
                status=TaskStatus.VERIFIED)


@pytest.mark.integration
def test_eval_skips_tasks_of_a_project_whose_manifest_is_gone(tmp_path, monkeypatch):
    """`eval --samples` failed with "no project named 'x'" for stored tasks no sample was about."""
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CODERUN_PROJECTS", raising=False)
    settings = load_settings()
    store.save_project(settings, "gone", "0" * 40, [_fake_task("gone", "f")], "{}")
    store.save_project(settings, "shortuuid", "0" * 40, [_fake_task("shortuuid", "g")], "{}")
    samples = tmp_path / "samples.jsonl"
    samples.write_text(json.dumps({"task_id": "shortuuid/m.py::g", "solution": "def g():\n    return 2\n"}) + "\n")
    seen: list[str] = []
    run, summary = start_run(EvalRequest(samples=samples, run_dir=tmp_path / "run"), settings,
                             load_tasks(settings), on_problem=seen.append)
    assert [t.task_id for t in run.tasks()] == ["shortuuid/m.py::g"]
    assert len(seen) == 1 and seen[0].startswith("gone: unknown project: 1 stored tasks left out")
    assert summary.problems == seen
    with pytest.raises(TaskError, match="no tasks selected"):  # only tasks of the gone project
        start_run(EvalRequest(samples=samples, run_dir=tmp_path / "run2"), settings,
                  load_tasks(settings, project="gone"))


@pytest.mark.integration
def test_prune_removes_tasks_of_unknown_projects_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CODERUN_PROJECTS", raising=False)
    settings = load_settings()
    store.save_project(settings, "gone", "0" * 40, [_fake_task("gone", "f"), _fake_task("gone", "h")], "{}")
    store.save_project(settings, "shortuuid", "0" * 40, [_fake_task("shortuuid", "g")], "{}")
    store.keep_progress(settings, "half-built", "k", "half-built/m.py::f", "{}")
    res = CliRunner().invoke(app, ["tasks", "prune"])
    assert res.exit_code == 0, res.output
    assert "removed 2 tasks of gone" in res.output and "removed 0 tasks of half-built" in res.output
    assert store.stored_projects(settings) == {"shortuuid": 1}
    again = CliRunner().invoke(app, ["tasks", "prune"])
    assert again.exit_code == 0 and "nothing to prune" in again.output
