"""`coderun eval --cluster` on a real multi-node Ray cluster (issue 22), simulated on this machine inside a
loopback-only network namespace (tests/ray_namespace.py, tests/ray_cluster_driver.py).

The samples are CoderEval's released CodeGen samples for the built-in cachetools project (140, 14 tasks); the
reference is the local workers executor on the same samples and backend. Every verdict through Ray must be
identical to it, no sample missing, none recorded twice, also when a node is removed mid-run and when the
driver is killed mid-run and the run is resumed.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
from contextlib import contextmanager, nullcontext
from pathlib import Path

import pytest
from ray_namespace import run_isolated, skip_reason

from coderun.evaluation.store import RunStore
from tests.helpers import codegen_local_run, codegen_samples

DRIVER = Path(__file__).parent / "ray_cluster_driver.py"
PROJECT = "cachetools"
TIMEOUT = 240   # a run here takes about 40 s; a hang ends as a failure, not a stuck suite

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True, scope="module")
def _namespace_and_ray():
    """Skip, saying why, where Ray is missing or a network namespace cannot be made."""
    if reason := skip_reason():
        pytest.skip(reason)


@pytest.fixture(scope="module")
def samples(tmp_path_factory) -> Path:
    """CoderEval's CodeGen records of cachetools' tasks (tests/helpers.py)."""
    return codegen_samples(tmp_path_factory.mktemp("cluster"), PROJECT)


def eval_args(samples: Path, backend: str) -> list[str]:
    return ["--samples", str(samples), "--project", PROJECT, "--backend", backend, "--json"]


def local_workers(samples: Path, backend: str, run_dir: Path) -> subprocess.CompletedProcess:
    """The reference: `coderun eval` with the local workers executor, two slots (this machine's cores)."""
    return subprocess.run([sys.executable, "-m", "coderun", "eval", *eval_args(samples, backend), "--run-dir",
                           str(run_dir), "--executor", "workers", "-j", "2"],
                          capture_output=True, text=True, timeout=TIMEOUT, env=os.environ)


def through_ray(samples: Path, backend: str, work: Path, *options: str, nodes: int = 2) -> dict:
    """The driver script in its namespace: a cluster of `nodes`, `coderun eval ... --cluster ADDRESS`; its
    JSON report, with each eval's stderr read in."""
    done = run_isolated(DRIVER, "--nodes", str(nodes), "--run-dir", str(work / "run"), "--out", str(work / "out"),
                        "--timeout", str(TIMEOUT - 60), *options, "--", *eval_args(samples, backend),
                        timeout=TIMEOUT)
    assert done.returncode == 0 and done.stdout.strip(), f"driver failed ({done.returncode}):\n{done.stderr[-4000:]}"
    report = json.loads(done.stdout.strip().splitlines()[-1])
    for ev in report["evals"]:
        ev["stderr_text"] = Path(ev["stderr"]).read_text()
    return report


def verdicts(run_dir: Path) -> dict[tuple[str, int], tuple[str, str | None]]:
    with RunStore.open(run_dir) as store:
        return {(r.task_id, r.index): (r.verdict.value, r.failure) for r in store.results()}


def rows_per_sample(run_dir: Path) -> tuple[int, dict[tuple[str, int], int]]:
    """(samples in the run, result rows per (task_id, idx)), read straight from run.sqlite."""
    with sqlite3.connect(f"file:{run_dir / 'run.sqlite'}?mode=ro", uri=True) as con:
        n = con.execute("SELECT count(*) FROM samples").fetchone()[0]
        rows = con.execute("SELECT task_id, idx, count(*) FROM results GROUP BY task_id, idx").fetchall()
    return n, {(t, i): c for t, i, c in rows}


def assert_not_run_again(run_dir: Path, before: dict[str, str]) -> None:
    """The results committed before the event were not written again (a sample run twice would be: the store
    replaces a result by its key, so a second row can never appear, but its finished_at, to the second, would
    change: the resume starts seconds after the kill)."""
    with sqlite3.connect(f"file:{run_dir / 'run.sqlite'}?mode=ro", uri=True) as con:
        now = {f"{t}#{i}": at for t, i, at in con.execute("SELECT task_id, idx, finished_at FROM results")}
    again = [k for k, at in before.items() if now.get(k) != at]
    assert before and not again, f"{len(again)} of {len(before)} earlier results were written again: {again[:5]}"


def assert_complete_and_identical(run_dir: Path, reference: dict) -> None:
    total, rows = rows_per_sample(run_dir)
    assert total == len(reference), f"{total} samples in the cluster run, {len(reference)} in the reference"
    missing = set(reference) - set(rows)
    assert not missing, f"{len(missing)} samples without a result: {sorted(missing)[:5]}"
    twice = {k: c for k, c in rows.items() if c != 1}
    assert not twice, f"samples recorded more than once: {twice}"
    got = verdicts(run_dir)
    differ = {k: (reference[k], got.get(k)) for k in reference if got.get(k) != reference[k]}
    assert not differ, f"{len(differ)} verdicts differ from the local workers executor: {list(differ.items())[:5]}"


@contextmanager
def watching_containers(client):
    """The `org.coderun.run` labels of the sandbox containers seen while the block runs (polled each 0.5 s)."""
    seen: set[str] = set()
    done = threading.Event()

    def poll():
        while not done.wait(0.5):
            for c in client.api.containers(filters={"label": "org.coderun.managed=1"}):
                seen.add(c["Labels"].get("org.coderun.run", ""))

    t = threading.Thread(target=poll, daemon=True)
    t.start()
    try:
        yield seen
    finally:
        done.set()
        t.join()


def assert_no_containers_left(client, run_dir: Path, seen: set[str]) -> None:
    """No sandbox container of the run is left: those of the lost node's actors went with them (a container's
    life is tied to its owner's connection, sandbox/docker.py), the others closed at the end. The run's
    label picks them (another test's containers may be running now, under pytest-xdist); that the run's
    containers carried it was seen while it ran."""
    with RunStore.open(run_dir) as store:
        run_id = store.info().run_id
    assert run_id in seen, f"no container labelled org.coderun.run={run_id} seen during the run (saw {seen})"
    left = [c["Id"][:12] for c in client.api.containers(all=True, filters={"label": f"org.coderun.run={run_id}"})]
    assert not left, f"{len(left)} sandbox containers outlived the run: {left}"


@pytest.fixture(scope="module")
def reference(samples, tmp_path_factory):
    """Verdicts of the local workers executor per backend, computed once."""
    cache: dict[str, dict] = {}

    def get(backend: str) -> dict:
        if backend == "local" and backend not in cache:  # the same run as tests/test_serve.py's reference
            cache[backend] = verdicts(codegen_local_run(tmp_path_factory, PROJECT))
        if backend not in cache:
            run_dir = tmp_path_factory.mktemp(f"reference-{backend}") / "run"
            done = local_workers(samples, backend, run_dir)
            assert done.returncode == 0, done.stderr[-4000:]
            cache[backend] = verdicts(run_dir)
            assert cache[backend], "the reference run recorded no verdict"
            assert not [k for k, v in cache[backend].items() if v[0] == "infra"], "infra in the reference run"
        return cache[backend]

    return get


def some_tasks(samples: Path, dest: Path, n: int) -> tuple[Path, set[str]]:
    """The samples of the first `n` of their tasks (all of each one's samples, so indices stay), and those
    tasks' ids: a run that needs no time for a node to go mid-run takes half the samples."""
    from coderun.config import load_settings
    from coderun.manifests.schema import find_manifest

    task_of = {a: f"{PROJECT}/{t.function}" for t in find_manifest(PROJECT, load_settings()).tasks.targets
               for a in t.aliases}
    rows = samples.read_text().splitlines()
    chosen = set(sorted({task_of[json.loads(r)["_id"]] for r in rows})[:n])
    dest.write_text("\n".join(r for r in rows if task_of[json.loads(r)["_id"]] in chosen) + "\n")
    return dest, chosen


@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_two_nodes_give_the_workers_verdicts(backend, samples, reference, tmp_path, request):
    """Every verdict through a 2-node Ray cluster is the local workers executor's, on each backend (half the
    tasks: the node and driver tests below run all of them)."""
    if backend == "docker":
        request.getfixturevalue("docker_engine")
    half, tasks = some_tasks(samples, tmp_path / "samples.jsonl", 7)
    expected = {k: v for k, v in reference(backend).items() if k[0] in tasks}
    assert len(expected) >= 50, f"{len(expected)} samples of {sorted(tasks)}"
    report = through_ray(half, backend, tmp_path)
    (ev,) = report["evals"]
    assert ev["returncode"] == 0, ev["stderr_text"][-4000:]
    assert report["address"].startswith("127.0.0.1:")
    assert_complete_and_identical(tmp_path / "run", expected)


@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_node_removed_mid_run_loses_and_duplicates_nothing(backend, samples, reference, tmp_path, request):
    """A worker node removed while units run on it: they are re-run elsewhere (said in the log), the run
    completes, every sample has exactly one result and the verdicts are the local executor's. With docker,
    the lost actors' containers do not outlive the run."""
    if backend == "docker":
        request.getfixturevalue("docker_engine")
    expected = reference(backend)
    with watching_containers(request.getfixturevalue("docker_engine")) if backend == "docker" \
            else nullcontext(set()) as seen:
        report = through_ray(samples, backend, tmp_path, "--remove-after", "30")
    (removed,) = [e for e in report["events"] if e["event"] == "node removed"]
    assert removed["committed_after"] < len(expected), "the node was removed after the run had finished"
    (ev,) = report["evals"]
    assert ev["returncode"] == 0, f"the run did not complete after the node was lost:\n{ev['stderr_text'][-4000:]}"
    assert "re-run" in ev["stderr_text"], "no re-run said in the log after the node was lost"
    assert_complete_and_identical(tmp_path / "run", expected)
    assert_not_run_again(tmp_path / "run", removed["finished"])
    if backend == "docker":
        assert_no_containers_left(request.getfixturevalue("docker_engine"), tmp_path / "run", seen)


@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_driver_killed_then_resume_finishes_identically(backend, samples, reference, tmp_path, request):
    """The driver killed (SIGKILL) mid-run: `coderun eval --resume RUN --cluster ADDRESS` finishes the run with
    the local executor's verdicts, no sample missing and none recorded twice."""
    if backend == "docker":
        request.getfixturevalue("docker_engine")
    expected = reference(backend)
    with watching_containers(request.getfixturevalue("docker_engine")) if backend == "docker" \
            else nullcontext(set()) as seen:
        report = through_ray(samples, backend, tmp_path, "--kill-after", "40")
    (killed,) = [e for e in report["events"] if e["event"] == "driver killed"]
    assert killed["committed_after"] < len(expected), "the driver was killed after the run had finished"
    first, resume = report["evals"]
    assert first["returncode"] == -9
    assert resume["returncode"] == 0, resume["stderr_text"][-4000:]
    said = " ".join(resume["stderr_text"].split())  # rich wraps lines at the terminal's width
    assert f"{killed['committed_after']} of {len(expected)} samples already have a verdict" in said
    assert_complete_and_identical(tmp_path / "run", expected)
    assert_not_run_again(tmp_path / "run", killed["finished"])
    if backend == "docker":
        assert_no_containers_left(request.getfixturevalue("docker_engine"), tmp_path / "run", seen)
