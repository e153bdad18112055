"""The workers executor gives the same verdicts as the naive one, on both backends, for well-behaved and
hostile samples alike; a sample that kills its worker is run again on the naive path, visibly."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest
from sandbox_fixtures import BACKENDS, NODEIDS, PROJECT_FILES, spec_for

from coderun.records import VerdictKind
from coderun.runner.evidence import SampleRun
from coderun.runner.executors import NaivePool, WorkerPool
from coderun.runner.grade import grade

pytestmark = pytest.mark.integration  # a venv, a sandbox or a project's tests in every test

GOOD = "def add(a, b):\n    return a + b\n"
SAMPLES = {
    "correct": GOOD,
    "wrong": "def add(a, b):\n    return a - b\n",
    "timeout": "def add(a, b):\n    while True:\n        pass\n",
    "swallowed_alarm": ("def add(a, b):\n    while True:\n        try:\n            while True:\n"
                        "                pass\n        except BaseException:\n            pass\n"),
    "sys_exit_at_import": "import sys\nsys.exit(0)\n",
    "os_exit_in_test": "import os\n\ndef add(a, b):\n    os._exit(0)\n",
    "writes_conftest": ("import os\nwith open(os.path.join(os.path.dirname(__file__), '..', 'tests', 'conftest.py'),"
                        " 'w') as f:\n    f.write('')\n\ndef add(a, b):\n    return a + b\n"),
    "edits_tests": ("import os\np = os.path.join(os.path.dirname(__file__), '..', 'tests', 'test_mod.py')\n"
                    "open(p, 'a').write('\\n')\n\ndef add(a, b):\n    return a + b\n"),
    "thread_that_never_ends": ("import threading, time\n\ndef _spin():\n    while True:\n        time.sleep(0.1)\n\n"
                               "threading.Thread(target=_spin).start()\n\ndef add(a, b):\n    return a + b\n"),
    "atexit_exits_nonzero": ("import atexit, os\natexit.register(lambda: os._exit(3))\n\n"
                             "def add(a, b):\n    return a + b\n"),
    "background_process": ("import subprocess, sys\nsubprocess.Popen([sys.executable, '-c', "
                           "'import time; time.sleep(600)'], start_new_session=True)\n\n"
                           "def add(a, b):\n    return a + b\n"),
    # Damage that a sloppy reuse of the sample folder would hand on: a valid .pyc of pkg/__init__ that
    # raises (kept bytecode: its header names the source's time and size), a test edited with its size and
    # times kept, a hard link to that test, and a read-only tests folder.
    "poisons_the_next_sample": '''
import importlib.util, os
from importlib._bootstrap_external import _code_to_timestamp_pyc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _pyc():
    init = os.path.join(ROOT, "pkg", "__init__.py")
    st = os.stat(init)
    code = compile("raise ImportError('poisoned by an earlier sample')", init, "exec")
    with open(importlib.util.cache_from_source(init), "wb") as f:
        f.write(_code_to_timestamp_pyc(code, st.st_mtime, st.st_size))


def _test():
    test = os.path.join(ROOT, "tests", "test_mod.py")
    st = os.stat(test)
    with open(test, "rb") as f:
        data = f.read()
    with open(test, "wb") as f:
        f.write(data.replace(b"==", b"!="))
    os.utime(test, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.link(test, os.path.join(ROOT, "pkg", "linked.py"))
    os.chmod(os.path.join(ROOT, "tests"), 0o555)


for step in (_pyc, _test):
    try:
        step()
    except Exception:
        pass


def add(a, b):
    return a + b
''',
    "correct_after_hostile": GOOD,
}


def _run(name: str, source: str) -> SampleRun:
    # 15 s: the thread that never ends costs all of it; the swallowed alarm ends in about 9 s (3 s a test).
    return SampleRun(relfile="pkg/mod.py", new_source=source, nodeids=list(NODEIDS), timeout=15,
                     per_test_timeout=3, env={})


def _verdicts(pool, names) -> dict[str, tuple[str, str | None]]:
    out = {}
    with pool:
        for name in names:
            v = grade(NODEIDS, pool.run("tiny", _run(name, SAMPLES[name])))
            out[name] = (v.verdict.value, v.failure)
    return out


@pytest.fixture(params=BACKENDS, scope="module")
def verdicts(request):
    spec = spec_for(request.param, request)
    names = list(SAMPLES)
    workers = WorkerPool(request.param, {"tiny": spec}, jobs=1)
    return _verdicts(workers, names), _verdicts(NaivePool(request.param, {"tiny": spec}, 1), names), workers


def test_workers_and_naive_give_the_same_verdicts(verdicts):
    workers, naive, _ = verdicts
    assert workers == naive


def test_only_the_correct_samples_pass(verdicts):
    workers, _, _ = verdicts
    passed = {n for n, (v, _) in workers.items() if v == VerdictKind.PASS.value}
    assert passed == {"correct", "correct_after_hostile", "background_process"}
    assert workers["timeout"][1].startswith("timeout")
    assert workers["writes_conftest"][1].endswith("tampering")
    assert workers["edits_tests"][1].endswith("tampering")
    assert workers["poisons_the_next_sample"][1].endswith("tampering")


def test_workers_ran_without_falling_back(verdicts):
    _, _, pool = verdicts
    assert pool.notes == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_sample_that_kills_its_worker_falls_back_to_naive(backend, request, tmp_path):
    """A sample can kill the worker (same user); it must still get the naive path's verdict, visibly."""
    spec = spec_for(backend, request)
    killer = "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n\ndef add(a, b):\n    return a + b\n"
    pool = WorkerPool(backend, {"tiny": spec}, jobs=1)
    with pool:
        run = _run("killer", killer)
        run = SampleRun(**{**run.__dict__, "log_path": tmp_path / "killer.log"})
        evidence = pool.run("tiny", run)
        after = grade(NODEIDS, pool.run("tiny", _run("good", GOOD)))
    with NaivePool(backend, {"tiny": spec}, 1) as naive:
        reference = grade(NODEIDS, naive.run("tiny", _run("killer", killer)))
    got = grade(NODEIDS, evidence)
    # The same verdict and class; the reason's wording (an exit code seen through a killed parent) may differ.
    assert (got.verdict, got.failure) == (reference.verdict, reference.failure)
    assert after.verdict == VerdictKind.PASS
    assert len(pool.notes) == 1 and "naive" in pool.notes[0]
    assert "fallback from workers" in (tmp_path / "killer.log").read_text()


@pytest.mark.parametrize("backend", BACKENDS)
def test_workers_started_ahead_serve_the_first_runs(backend, request, tmp_path):
    """A task build starts its workers while its recording runs: the runs that come then are lent those,
    and asking again starts no more than the count."""
    pool = WorkerPool(backend, {"tiny": spec_for(backend, request)}, jobs=2)
    with pool:
        pool.prestart("tiny", {}, 2)
        pool.prestart("tiny", {}, 2)
        runs = [SampleRun(**{**_run(name, SAMPLES[name]).__dict__, "log_path": tmp_path / f"{name}.log"})
                for name in ("correct", "wrong")]
        with ThreadPoolExecutor(2) as threads:
            got = list(threads.map(lambda r: grade(NODEIDS, pool.run("tiny", r)).verdict, runs))
    assert got == [VerdictKind.PASS, VerdictKind.FAIL] and pool.notes == []
    slots = {re.search(r"slot (\d+)", (tmp_path / f"{n}.log").read_text()).group(1) for n in ("correct", "wrong")}
    assert slots <= {"0", "1"}


def test_a_worker_that_fails_to_start_ahead_sends_its_run_to_the_naive_path(request, tmp_path):
    """The background start's failure reaches the first run lent that worker: the run falls back, visibly,
    and no worker of the project is started again."""
    spec = replace(spec_for("local", request), python=str(tmp_path / "no-such-python"))
    pool = WorkerPool("local", {"tiny": spec}, jobs=1)
    with pool:
        pool.prestart("tiny", {}, 1)
        first, second = (pool.run("tiny", _run("correct", GOOD)) for _ in range(2))
    assert first.infra_error and second.infra_error
    assert len(pool.notes) == 2 and all("naive executor (" in n and "no interpreter at" in n for n in pool.notes)
    assert "the worker could not start" in pool.notes[1], pool.notes


def test_the_test_files_of_the_run_are_primed_with_a_workers_first_sample(request, tmp_path):
    """A worker primes (collects in a pristine copy, keeping the bytecode) each test file it meets; told the
    run's other test files, it collects them with the first sample's, so a later sample needs no priming."""
    files = {**PROJECT_FILES, "tests/test_other.py": PROJECT_FILES["tests/test_mod.py"]}
    project = tmp_path / "project"
    for rel, text in files.items():
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_text(text)
    spec = replace(spec_for("local", request), project_dir=str(project))
    other = [n.replace("test_mod", "test_other") for n in NODEIDS]

    def primed(prime_files: tuple[str, ...]) -> list[float]:
        seconds = []
        with WorkerPool("local", {"tiny": spec}, jobs=1) as pool:
            for i, nodeids in enumerate((NODEIDS, other)):
                log = tmp_path / f"{len(prime_files)}-{i}.log"
                run = SampleRun(relfile="pkg/mod.py", new_source=GOOD, nodeids=nodeids, timeout=20,
                                per_test_timeout=3, env={}, log_path=log, prime_files=prime_files)
                assert grade(nodeids, pool.run("tiny", run)).verdict is VerdictKind.PASS
                seconds.append(float(re.search(r"prime ([\d.]+)s", log.read_text()).group(1)))
        return seconds

    alone = primed(())
    together = primed(("tests/test_mod.py", "tests/test_other.py"))
    assert alone[0] > 0 and alone[1] > 0, alone            # each sample met a file of its own
    assert together[0] > 0 and together[1] == 0, together  # the second file came with the first


def _task_runs(pool, names: list[str], tmp_path, pytest_args: tuple[str, ...] = (),
               templates: list[bool] | None = None) -> list[tuple[str, str]]:
    """(verdict, log text) of each sample, run in order on one worker."""
    out = []
    with pool:
        for i, name in enumerate(names):
            log = tmp_path / f"{i}-{name}.log"
            run = SampleRun(relfile="pkg/mod.py", new_source=SAMPLES[name], nodeids=list(NODEIDS), timeout=20,
                            per_test_timeout=3, env={}, pytest_args=pytest_args, log_path=log,
                            template=templates[i] if templates else True)
            out.append((grade(NODEIDS, pool.run("tiny", run)).verdict.value, log.read_text()))
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_samples_of_a_task_share_one_pytest_configuration(backend, request, tmp_path):
    pool = WorkerPool(backend, {"tiny": spec_for(backend, request)}, jobs=1)
    runs = _task_runs(pool, ["correct", "wrong", "correct"], tmp_path)
    assert [v for v, _ in runs] == ["pass", "fail", "pass"]
    assert all("pytest configured once for the task" in log for _, log in runs)
    assert pool.notes == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_off_runs_configure_pytest_themselves(backend, request, tmp_path):
    """Task verification's runs are never alike: they ask for no template (setting one up per run cost more
    than it saved), and a templated run after them still gets one and the right verdict."""
    pool = WorkerPool(backend, {"tiny": spec_for(backend, request)}, jobs=1)
    runs = _task_runs(pool, ["correct", "wrong", "correct", "wrong", "correct"], tmp_path,
                      templates=[False, False, True, True, False])
    assert [v for v, _ in runs] == ["pass", "fail", "pass", "fail", "pass"]
    assert ["configured once" in log for _, log in runs] == [False, False, True, True, False]
    assert pool.notes == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_project_module_loaded_while_pytest_is_configured_is_never_shared(backend, request, tmp_path):
    """`-p pkg.mod` imports the module under test before the pause: a template would hand every child the
    pristine module, and the wrong sample would pass. The worker must configure pytest per sample."""
    pool = WorkerPool(backend, {"tiny": spec_for(backend, request)}, jobs=1)
    runs = _task_runs(pool, ["correct", "wrong", "correct"], tmp_path, pytest_args=("-p", "pkg.mod"))
    assert [v for v, _ in runs] == ["pass", "fail", "pass"]
    assert not any("configured once" in log for _, log in runs)
    assert pool.notes == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_task_whose_pytest_ends_while_configuring_gets_the_naive_verdict(backend, request, tmp_path):
    """A plugin that cannot be imported ends pytest before the pause: no template, and each sample gets
    what a one-off run gives it."""
    spec = spec_for(backend, request)
    args = ("-p", "coderun_no_such_plugin")
    runs = _task_runs(WorkerPool(backend, {"tiny": spec}, jobs=1), ["correct", "wrong"], tmp_path, args)
    assert not any("configured once" in log for _, log in runs)
    with NaivePool(backend, {"tiny": spec}, 1) as naive:
        reference = [grade(NODEIDS, naive.run("tiny", SampleRun(
            relfile="pkg/mod.py", new_source=SAMPLES[n], nodeids=list(NODEIDS), timeout=20, per_test_timeout=3,
            env={}, pytest_args=args))).verdict.value for n in ("correct", "wrong")]
    assert [v for v, _ in runs] == reference and "pass" not in reference
