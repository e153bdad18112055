"""A sandbox lives no longer than the `coderun eval` that made it: SIGKILL the eval mid-sample (as a
timeout does) and, without any other run, its containers, sandbox folders and every process its samples
started (one that left the session included) are gone within a few seconds, on both backends and with
both executors."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from coderun.config import load_settings
from coderun.manifests.schema import load_manifest
from coderun.tasks import build_tasks, load_tasks
from tests.helpers import TINY_PROJECT, write_tree

pytestmark = pytest.mark.slow
HOST_PYTHON = f"{sys.version_info[0]}.{sys.version_info[1]}"
POLL = 20.0   # seconds allowed for the sandboxes to go; only a bound on the poll, not a speed assertion


def _sample(mark: str) -> str:
    """`add` that starts a process leaving its session, then sleeps past the per-test limit (it swallows
    the alarm): the kill lands while both run, and the sample's own limits do not end them in time."""
    return ("import subprocess, sys, time\n\n"
            "def add(a, b):\n"
            f"    subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', '{mark}'],\n"
            "                     start_new_session=True)\n"
            "    while True:\n"
            "        try:\n"
            "            time.sleep(300)\n"
            "        except BaseException:\n"
            "            pass\n")


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """The tiny hand-made project under a name of its own (image tags are global to the engine)."""
    root = tmp_path_factory.mktemp("lifetime")
    write_tree(root / "calc", TINY_PROJECT)
    name = f"calc-{uuid.uuid4().hex[:8]}"
    manifest = root / f"{name}.yaml"
    manifest.write_text(f"name: {name}\nsource: {{path: calc}}\npython: '{HOST_PYTHON}'\n"
                        "tests:\n  paths: [tests]\n")
    return root, manifest


def _build(root: Path, manifest: Path, backend: str) -> str:
    mp = pytest.MonkeyPatch()
    mp.setenv("CODERUN_HOME", str(root / "home"))
    try:
        settings = load_settings()
        build_tasks(load_manifest(manifest), settings, backend=backend)
        (task,) = [t for t in load_tasks(settings) if t.name == "add"]
    finally:
        mp.undo()
    return task.task_id


def _processes_with(needle: bytes) -> list[int]:
    """Live (not zombie) processes of this host whose command line or initial environment holds `needle`."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X"):
                    continue
            text = Path(f"/proc/{entry.name}/cmdline").read_bytes() + Path(f"/proc/{entry.name}/environ").read_bytes()
        except (OSError, IndexError):
            continue
        if needle in text:
            found.append(int(entry.name))
    return found


def _containers(owner_pid: int) -> list[str]:
    out = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=org.coderun.owner={socket.gethostname()}:"
                          f"{owner_pid}"], capture_output=True, text=True, check=True).stdout
    return out.split()


def _left(proc: subprocess.Popen, tmp: Path, mark: str, backend: str) -> list[str]:
    """What the killed run still has: containers, sandbox folders, processes."""
    left = [f"container {c}" for c in _containers(proc.pid)] if backend == "docker" else []
    folders = sorted(tmp.glob("coderun-sbx-*"))
    left += [f"folder {f}" for f in folders]
    for needle in [mark.encode(), *(str(f).encode() for f in folders), str(tmp).encode() + b"/coderun-sbx-"]:
        left += [f"process {p} ({needle.decode()})" for p in _processes_with(needle)]
    return left


def _wait_for(check, what: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


@pytest.mark.parametrize("executor", ["workers", "naive"])
@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_sigkilled_eval_leaves_no_sandbox(project, backend, executor, tmp_path, request):
    """A SIGKILLed eval left its worker containers idle until the next run cleaned them (issue 20)."""
    if backend == "docker":
        request.getfixturevalue("docker_engine")
    root, manifest = project
    task_id = _build(root, manifest, backend)
    mark = f"coderun-lifetime-{uuid.uuid4().hex[:10]}"
    samples = tmp_path / "samples.jsonl"
    samples.write_text(json.dumps({"task_id": task_id, "solution": _sample(mark)}) + "\n")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "CODERUN_HOME": str(root / "home"), "CODERUN_PROJECTS": str(root), "TMPDIR": str(tmp)}
    proc = subprocess.Popen([sys.executable, "-m", "coderun", "eval", "--backend", backend, "--executor", executor,
                             "-j", "1", "--samples", str(samples), "--run-dir", str(tmp_path / "run")],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait_for(lambda: _processes_with(mark.encode()) or proc.poll() is not None, "the sample to start")
        assert proc.poll() is None, "the run ended before its sample started"
        assert _left(proc, tmp, mark, backend), "the run's sandbox is not where the test looks"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + POLL
        while (left := _left(proc, tmp, mark, backend)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not left, f"left behind by the killed run: {left}"
    finally:
        _cleanup(proc, tmp, mark, backend)


def _cleanup(proc: subprocess.Popen, tmp: Path, mark: str, backend: str) -> None:
    """Whatever the assertion found, do not leave it to the next test."""
    with_pids = _processes_with(mark.encode()) + _processes_with(str(tmp).encode() + b"/coderun-sbx-")
    for pid in [proc.pid, *with_pids]:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    if backend == "docker":
        for cid in _containers(proc.pid):
            subprocess.run(["docker", "rm", "-f", cid], capture_output=True)
