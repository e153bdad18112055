"""The run store: typed round trips, resume bookkeeping, no duplicates, nothing finished lost to SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from coderun.choices import Backend, Executor
from coderun.config import Settings
from coderun.errors import StoreError
from coderun.evaluation.store import (
    Result,
    RunConfig,
    RunInfo,
    RunKind,
    RunSample,
    RunStore,
    RunTask,
    code_hash,
    resolve_run_dir,
)
from coderun.records import ContextSet, Evidence, Level, TestOutcome, Verdict, VerdictKind


def _store(tmp_path: Path) -> RunStore:
    store = RunStore.create(tmp_path / "run", RunInfo(run_id="r1", label="m", config=RunConfig(jobs=3, backend=Backend.DOCKER)))
    store.add_tasks([RunTask(task_id="p/a.py::f", project="p", level=Level.SELF_CONTAINED,
                             oracle_context=ContextSet(apis=["len"]))])
    store.add_samples([RunSample(task_id="p/a.py::f", index=i, code=f"def f():\n    return {i}\n") for i in range(3)])
    return store


def test_round_trip(tmp_path):
    store = _store(tmp_path)
    ev = Evidence(expected=["t::a"], outcomes=[TestOutcome(nodeid="t::a", outcome="passed")], exit_code=0)
    spliced = store.path / "spliced" / "x.py"
    store.record_result(Result.of("p/a.py::f", 1, Verdict(verdict=VerdictKind.PASS), evidence=ev,
                                  spliced_path=str(spliced), duration=1.5))
    store.close()
    again = RunStore.open(tmp_path / "run")
    assert again.info().config == RunConfig(jobs=3, backend="docker") and again.info().kind is RunKind.EVAL
    assert again.tasks()[0].oracle_context.apis == ["len"]
    [res] = again.results()
    assert res.index == 1 and res.evidence == ev and res.spliced_path == "spliced/x.py"
    assert again.file(res.spliced_path) == tmp_path / "run" / "spliced" / "x.py"
    assert [s.index for s in again.pending()] == [0, 2]
    assert (tmp_path / "run" / "logs").is_dir()


def test_recording_a_result_twice_does_not_duplicate_it(tmp_path):
    store = _store(tmp_path)
    store.record_result(Result(task_id="p/a.py::f", index=0, verdict=VerdictKind.FAIL, failure="runtime"))
    store.record_result(Result(task_id="p/a.py::f", index=0, verdict=VerdictKind.FAIL, failure="runtime"))
    store.add_samples([RunSample(task_id="p/a.py::f", index=0, code="other")])   # re-adding is ignored
    assert len(store.results()) == 1 and store.counts()["samples"] == 3


def test_result_for_an_unknown_sample_is_refused(tmp_path):
    store = _store(tmp_path)
    with pytest.raises(StoreError):
        store.record_result(Result(task_id="nope", index=0, verdict=VerdictKind.PASS))


def test_concurrent_writers_from_threads(tmp_path):
    store = _store(tmp_path)
    store.add_samples([RunSample(task_id="p/a.py::f", index=i, code="x") for i in range(3, 60)])
    threads = [threading.Thread(target=lambda i=i: store.record_result(
        Result(task_id="p/a.py::f", index=i, verdict=VerdictKind.PASS))) for i in range(60)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(store.results()) == 60 and store.pending() == []


def test_create_refuses_an_existing_run(tmp_path):
    _store(tmp_path).close()
    with pytest.raises(StoreError, match="already holds a run"):
        RunStore.create(tmp_path / "run", RunInfo(run_id="r2"))


def test_open_refuses_what_is_not_a_run(tmp_path):
    with pytest.raises(StoreError):
        RunStore.open(tmp_path)
    (tmp_path / "run.sqlite").write_text("not sqlite at all, just text " * 100)
    with pytest.raises(StoreError):
        RunStore.open(tmp_path)


def test_resolve_by_path_or_run_id(tmp_path):
    settings = Settings(home=tmp_path / "home")
    RunStore.create(settings.runs / "abc", RunInfo(run_id="abc")).close()
    assert resolve_run_dir("abc", settings) == settings.runs / "abc"
    assert resolve_run_dir(str(settings.runs / "abc"), settings) == settings.runs / "abc"
    with pytest.raises(StoreError, match="no run"):
        resolve_run_dir("missing", settings)


def test_code_hash_ignores_meaningless_whitespace_only():
    assert code_hash("def f():\n    return 1\n") == code_hash("def f():  \r\n\n    return 1")
    assert code_hash("def f():\n    return 1\n") != code_hash("def f():\n  return 1\n")


WRITER = textwrap.dedent("""
    import sys
    from coderun.records import VerdictKind
    from coderun.evaluation.store import Result, RunStore
    store = RunStore.open(sys.argv[1])
    for i in range(1000):
        store.record_result(Result(task_id="p/a.py::f", index=i, verdict=VerdictKind.PASS))
        print(i, flush=True)
""")


@pytest.mark.integration
@pytest.mark.parametrize("kill_after", [1, 17, 123])
def test_sigkill_loses_no_finished_result(tmp_path, kill_after):
    """Every result whose record_result returned before the kill is in the store afterwards."""
    store = _store(tmp_path)
    store.add_samples([RunSample(task_id="p/a.py::f", index=i, code="x") for i in range(3, 1000)])
    store.close()
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path / "run")], stdout=subprocess.PIPE,
                            text=True, env={**os.environ})
    confirmed = -1
    for line in proc.stdout:
        confirmed = int(line)
        if confirmed >= kill_after:
            os.kill(proc.pid, signal.SIGKILL)
            break
    proc.wait()
    store = RunStore.open(tmp_path / "run")
    done = {r.index for r in store.results()}
    assert set(range(confirmed + 1)) <= done
    assert len(store.results()) == len(done)
    assert {s.index for s in store.pending()} == set(range(1000)) - done


def test_run_folders_with_a_dict_config_still_open(tmp_path):
    """Runs made before the config was typed stored a plain dict (without `executor` before executors
    existed); `report` and `--resume` must still read them, typed."""
    store = _store(tmp_path)
    old = {"samples": "s.jsonl", "ground_truth": False, "blank": False, "level": "class_runnable",
           "backend": "docker", "jobs": 4, "include_weak": False, "manifests": {"p": "/m/p.yaml"}}
    imported = {"importer": "codereval", "results_sha256": "ab", "dataset": None, "verdicts": "recorded"}
    for config, kind in ((old, "eval"), (imported, "imported")):
        raw = {"run_id": "r1", "kind": kind, "created_at": "2024-01-01T00:00:00+00:00", "label": "m",
               "source": None, "config": config}
        with store.transaction() as c:
            c.execute("INSERT OR REPLACE INTO meta VALUES ('info', ?)", (json.dumps(raw),))
        info = store.info()
        if kind == "eval":
            cfg = info.eval_config()
            assert cfg.backend is Backend.DOCKER and cfg.executor is Executor.WORKERS and cfg.jobs == 4
            assert cfg.level is Level.CLASS_RUNNABLE and cfg.manifests == {"p": "/m/p.yaml"}
            assert json.loads(info.model_dump_json())["config"] == {**old, "executor": "workers", "rigor": "base",
                                                                   "isolation": "auto"}
        else:
            assert info.config.verdicts == "recorded"
            with pytest.raises(StoreError, match="imported"):
                info.eval_config()
