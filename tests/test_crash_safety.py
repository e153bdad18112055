"""Crash safety of `coderun eval` on the built-in cachetools project: the runner killed with SIGKILL at
several points, a Docker engine that goes away mid-run, a disk that fills up mid-run. In every case the
store keeps each finished verdict, and `--resume` ends with results identical to an uninterrupted run,
one per sample, none lost, none duplicated."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

import pytest
from hostile_corpus import TARGET, TYPEDKEY_OK, TYPEDKEY_UNTYPED, eval_popen, run_eval, user_manifests

from coderun.evaluation.store import RunStore

pytestmark = pytest.mark.slow

# Slow but correct: every key costs 0.1 s, so a sample's test run lasts about 13 s (the kill points need it
# running for more than 2 s; 0.3 s made each of the many runs here 40 s long).
SLOW_OK = TYPEDKEY_OK.replace('    key = hashkey(', '    __import__("time").sleep(0.1)\n    key = hashkey(')
N_SAMPLES = 10


def _samples(path: Path) -> Path:
    rows = [SLOW_OK + "# slow 0\n", SLOW_OK + "# slow 1\n"]
    rows += [(TYPEDKEY_OK if i % 3 else TYPEDKEY_UNTYPED) + f"# copy {i}\n" for i in range(N_SAMPLES - 2)]
    path.write_text("".join(json.dumps({"task_id": TARGET, "solution": c}) + "\n" for c in rows))
    return path


def _counts(run_dir: Path) -> tuple[int, int]:
    """(samples, results) in the run's store, (0, 0) while it does not exist yet."""
    try:
        with sqlite3.connect(f"file:{run_dir / 'run.sqlite'}?mode=ro", uri=True, timeout=5) as conn:
            return (conn.execute("select count(*) from samples").fetchone()[0],
                    conn.execute("select count(*) from results").fetchone()[0])
    except sqlite3.Error:
        return 0, 0


def _verdicts(run_dir: Path) -> dict[tuple[str, int], tuple[str, str | None]]:
    with RunStore.open(run_dir) as store:
        rows = store._conn.execute("select task_id, idx, count(*) from results group by task_id, idx").fetchall()
        assert all(n == 1 for *_, n in rows), "a sample has more than one result row"
        return {(r.task_id, r.index): (r.verdict.value, r.failure) for r in store.results()}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("crash")
    return tmp, _samples(tmp / "samples.jsonl"), user_manifests(tmp / "projects")


@pytest.fixture(scope="module")
def reference(setup):
    """Verdicts of an uninterrupted run, per backend (computed once, when a test asks for it)."""
    tmp, samples, projects = setup
    cache: dict[str, dict] = {}

    def get(backend: str) -> dict:
        if backend not in cache:
            run = run_eval(samples, tmp / f"reference-{backend}", backend, projects)
            assert run.returncode == 0, run.stderr[-3000:]
            cache[backend] = _verdicts(tmp / f"reference-{backend}")
            assert len(cache[backend]) == N_SAMPLES
            assert {v for v, _ in cache[backend].values()} == {"pass", "fail"}
        return cache[backend]

    return get


def _kill_when(proc: subprocess.Popen, run_dir: Path, ready, timeout: float = 600) -> int:
    """SIGKILL the runner (its whole session) as soon as `ready(samples, results)`; returns the number of
    results at that moment."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        samples, results = _counts(run_dir)
        if samples and ready(samples, results):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return results
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    raise AssertionError(f"the kill point was not reached (exit code {proc.returncode})")


def _during_first_test_runs():
    """Before any result: the two slow samples are in their test runs for several seconds."""
    first_seen: list[float] = []

    def ready(samples: int, results: int) -> bool:
        if not first_seen:
            first_seen.append(time.monotonic())
        return results == 0 and time.monotonic() - first_seen[0] > 2.0

    return ready


KILL_POINTS = {
    "at_start": lambda: (lambda samples, results: True),          # the store exists, nothing ran yet
    "during_a_test_run": _during_first_test_runs,
    "after_one_result": lambda: (lambda samples, results: results >= 1),
    "after_several_results": lambda: (lambda samples, results: results >= 6),
}


def _leftovers_of(pid: int) -> list[str]:
    import tempfile

    found = []
    for p in Path(tempfile.gettempdir()).glob("coderun-sbx-*"):
        try:
            if (p / "owner.pid").read_text().strip() == str(pid):
                found.append(str(p))
        except OSError:
            continue
    return found


@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_sigkill_then_resume_gives_the_uninterrupted_results(setup, reference, point, tmp_path):
    """SIGKILL at a point of a real run; --resume keeps the finished verdicts and completes the rest."""
    _, samples, projects = setup
    run_dir = tmp_path / "run"
    proc = eval_popen(samples, run_dir, "local", projects, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    at_kill = _kill_when(proc, run_dir, KILL_POINTS[point]())
    if point == "during_a_test_run":
        assert at_kill == 0
    partial = _verdicts(run_dir)
    assert len(partial) >= at_kill  # committed results survive the kill
    resumed = run_eval(samples, run_dir, "local", projects, resume=True)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    final = _verdicts(run_dir)
    assert final == reference("local")
    assert {k: final[k] for k in partial} == partial
    assert _leftovers_of(proc.pid) == []  # the killed run's sandbox folders went with the next run


@pytest.mark.docker
def test_sigkill_during_a_docker_run_then_resume_removes_its_containers(setup, reference, tmp_path, docker_engine):
    _, samples, projects = setup
    run_dir = tmp_path / "run"
    proc = eval_popen(samples, run_dir, "docker", projects, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _kill_when(proc, run_dir, lambda samples, results: results >= 1)
    owner = f"{socket.gethostname()}:{proc.pid}"
    assert docker_engine.containers.list(all=True, filters={"label": f"org.coderun.owner={owner}"})
    resumed = run_eval(samples, run_dir, "docker", projects, resume=True)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert _verdicts(run_dir) == reference("docker")
    assert docker_engine.containers.list(all=True, filters={"label": f"org.coderun.owner={owner}"}) == []
    with RunStore.open(run_dir) as store:  # the image's versions, recorded by the killed run and kept
        [image] = store.environment().projects.values()
    assert image.backend == "docker" and image.version_of("pytest")
    assert f"pytest=={image.version_of('pytest')}" in (run_dir / "environment.txt").read_text()


class DockerProxy:
    """A unix socket that forwards to the real engine, until `cut()`: then the engine is gone for whoever
    was told to use this socket (DOCKER_HOST), without touching the engine other tests use."""

    def __init__(self, path: Path, target: str):
        self.target = target
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(64)
        self.socks: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.connect(self.target)
            with self.lock:
                self.socks += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        self.server.close()
        with self.lock:
            for s in self.socks:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()


@pytest.mark.docker
def test_a_docker_engine_lost_mid_run_stops_the_run_resumably(setup, reference, tmp_path, docker_engine):
    """The engine goes away after the first result: the run stops with a message that says how to resume
    (infra results are not verdicts), and --resume with the engine back gives the uninterrupted results."""
    _, samples, projects = setup
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if not host.startswith("unix://"):
        pytest.skip(f"the engine is not on a unix socket ({host})")
    proxy = DockerProxy(tmp_path / "docker.sock", host.removeprefix("unix://"))
    run_dir = tmp_path / "run"
    proc = eval_popen(samples, run_dir, "docker", projects, env={"DOCKER_HOST": f"unix://{tmp_path / 'docker.sock'}"},
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 600
    while _counts(run_dir)[1] < 1 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proxy.cut()
    out, err = proc.communicate(timeout=900)
    assert proc.returncode != 0, out + err
    assert "--resume" in " ".join(err.split()), err[-3000:]
    partial = _verdicts(run_dir)
    assert 1 <= len([v for v, _ in partial.values() if v != "infra"]) < N_SAMPLES
    resumed = run_eval(samples, run_dir, "docker", projects, resume=True)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert _verdicts(run_dir) == reference("docker")


@pytest.fixture
def small_disk(tmp_path):
    """A 4 MiB tmpfs for the run folder (needs root to mount; skipped otherwise)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_stops_the_run_resumably(setup, reference, small_disk):
    """The run folder's disk fills up after the first results: a clear message, exit code of a store error,
    no half-written result; with space again, --resume gives the uninterrupted results."""
    _, samples, projects = setup
    run_dir = small_disk / "run"
    proc = eval_popen(samples, run_dir, "local", projects, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                      text=True)
    deadline = time.monotonic() + 600
    while _counts(run_dir)[1] < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    filler = small_disk / "filler"
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError:
            pass
    out, err = proc.communicate(timeout=900)
    text = " ".join(err.split())
    assert proc.returncode != 0 and "Traceback" not in err, err[-3000:]
    assert "resume" in text and ("space" in text or "disk" in text), err[-3000:]
    filler.unlink()
    partial = _verdicts(run_dir)
    assert 2 <= len(partial) < N_SAMPLES
    resumed = run_eval(samples, run_dir, "local", projects, resume=True)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert _verdicts(run_dir) == reference("local")
