"""The hostile corpus (tests/hostile) through `coderun eval` on the built-in cachetools project, with both
backends: one run of every hostile sample mixed with benign ones, and one run of the benign ones alone.

For every hostile sample: not a pass (the expected class where the header names one), the run completes,
the benign samples get the verdicts they get without the hostile ones, the pristine worktree is unchanged,
no process, container or sandbox folder is left behind; with docker, and with local in namespaces, also:
nothing reached the host's loopback, and a canary file outside the project was neither read nor changed. The
local backend without namespaces makes no filesystem or network promise (docs/threat-model.md), so there those
two are not asserted.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest
from hostile_corpus import git_status, verdicts_by_code
from hostile_corpus import hostile_run as made_once

pytestmark = pytest.mark.slow

LEFTOVER_MARKS = ("coderun-hostile-bg", "coderun-hostile-escape")


def _processes_with(marks: tuple[str, ...]) -> list[str]:
    """Command lines of live processes on this host (docker's included) left behind by a sample: they
    carry a hostile mark or the local sandbox's marker variable, and their working directory (the
    sample's copy) has been deleted. (Other runs of the corpus may be live on the same machine: their
    processes still have their copy.)"""
    hits = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{entry.name}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()[0]
            environ = Path(f"/proc/{entry.name}/environ").read_bytes()
            cwd = os.readlink(f"/proc/{entry.name}/cwd")
        except OSError:
            continue
        orphan = cwd.endswith(" (deleted)") or not os.path.exists(cwd)
        if state != "Z" and orphan and (any(m in cmd for m in marks) or b"CODERUN_SANDBOX_ID=" in environ):
            hits.append(cmd)
    return hits


def _containers_of(pid: int) -> list[str]:
    """coderun containers (running or not) whose owner is the eval process `pid`."""
    import docker

    client = docker.from_env(timeout=60)
    owner = f"{socket.gethostname()}:{pid}"
    found = client.containers.list(all=True, filters={"label": [f"org.coderun.owner={owner}"]})
    client.close()
    return [c.name for c in found]


def _sandbox_folders_of(pid: int) -> list[Path]:
    return [p for p in Path(tempfile.gettempdir()).glob("coderun-sbx-*") if _owner(p) == str(pid)]


def _owner(folder: Path) -> str:
    try:
        return (folder / "owner.pid").read_text().strip()
    except OSError:
        return ""


def _per_sample(run_dir: Path) -> list[dict]:
    out = subprocess.run(["python", "-m", "coderun", "report", str(run_dir), "--per-sample", "--format", "json"],
                         capture_output=True, text=True, check=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


@pytest.fixture(scope="module", params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def hostile_run(request, tmp_path_factory):
    """One eval of the whole corpus (+ benign samples) and one of the benign samples alone, made once per
    session and backend (tests/test_serve.py compares the service's verdicts with the local one's)."""
    backend = request.param
    if backend == "docker":
        request.getfixturevalue("docker_engine")
    return made_once(tmp_path_factory, backend)


def test_the_run_completes_and_no_hostile_sample_passes(hostile_run):
    result = hostile_run["result"]
    assert result.returncode == 0, result.stderr[-3000:]
    verdicts = verdicts_by_code(hostile_run["tmp"] / "run")
    assert len(verdicts) == len(hostile_run["labels"])  # every sample has exactly one verdict
    wrong = {}
    for h in hostile_run["hostile"]:
        verdict, failure = verdicts[h.code]
        ok = verdict == "fail"
        if h.expect == "timeout":
            ok = ok and (failure or "").startswith("timeout")
        elif h.expect == "tampering":
            ok = ok and failure == "other/tampering"
        if not ok:
            wrong[h.name] = (verdict, failure, h.expect)
    assert not wrong, f"{hostile_run['backend']}: {wrong}"


def test_benign_samples_get_the_same_verdicts_as_without_the_hostile_ones(hostile_run):
    assert hostile_run["control"].returncode == 0, hostile_run["control"].stderr[-3000:]
    mixed = verdicts_by_code(hostile_run["tmp"] / "run")
    alone = verdicts_by_code(hostile_run["tmp"] / "control")
    assert {c: mixed[c] for c in alone} == alone
    assert sorted(v for v, _ in alone.values()).count("pass") == len(alone) - 1  # the untyped one fails


def test_nothing_outside_the_sample_copy_changed_and_nothing_is_left_behind(hostile_run):
    assert git_status(hostile_run["tree"]) == hostile_run["status_before"] == ""
    assert _processes_with(LEFTOVER_MARKS) == []
    for run in (hostile_run["result"], hostile_run["control"]):
        assert _sandbox_folders_of(run.pid) == []
        if hostile_run["backend"] == "docker":
            assert _containers_of(run.pid) == []


def test_the_sandbox_keeps_the_host_filesystem_and_network_out_of_reach(hostile_run):
    """Docker always; local in namespaces too (before issue 34 the local backend read the canary, reached the
    host's loopback, and was not asserted)."""
    isolation = _isolation_of(hostile_run["tmp"] / "run")
    if isolation == "none":
        pytest.skip("the local backend without namespaces does not isolate the filesystem or the network")
    # Other runs of the corpus on this machine may reach the listener: this run's copies name its folders.
    mine = b"/scratch/" if hostile_run["backend"] == "docker" else b"/coderun-sbx-"
    assert not [r for r in hostile_run["received"] if mine in r]
    network_log = _log_of(hostile_run, "21_network")
    assert "hostile-net:" in network_log and "hostile-net:connected" not in network_log
    assert hostile_run["canary_after"] == hostile_run["secret"] + "\n"
    run = hostile_run["tmp"] / "run"
    for path in run.rglob("*"):
        if path.is_file() and path.suffix in (".log", ".json", ".md"):
            assert hostile_run["secret"] not in path.read_text(errors="replace"), path


def _isolation_of(run_dir: Path) -> str:
    from coderun.evaluation.store import RunStore

    with RunStore.open(run_dir) as store:
        return store.environment().isolation


def _log_of(hostile_run, name: str) -> str:
    from coderun.evaluation.store import RunStore

    code = next(h.code for h in hostile_run["hostile"] if h.name == name)
    with RunStore.open(hostile_run["tmp"] / "run") as store:
        codes = {(s.task_id, s.index): s.code for s in store.samples()}
        result = next(r for r in store.results() if codes[(r.task_id, r.index)] == code)
        return store.file(result.log_path).read_text(errors="replace")


def test_machinery_tampering_is_flagged_in_the_per_sample_report(hostile_run):
    rows = _per_sample(hostile_run["tmp"] / "run")
    labels = hostile_run["labels"]
    with_code = verdicts_by_code(hostile_run["tmp"] / "run")
    assert len(rows) == len(with_code)
    from coderun.evaluation.store import RunStore

    with RunStore.open(hostile_run["tmp"] / "run") as store:
        code_of = {(s.task_id, s.index): s.code for s in store.samples()}
    flags = {labels[code_of[(r["task_id"], r["sample"])]]: r["flags"] for r in rows}
    assert "static: imports _pytest" in flags["12_patch_pytest_reports"]
    assert "static: patches unittest" in flags["13_patch_unittest_result"]
    assert "static: mentions conftest" in flags["14_write_conftest"]
    assert any(f.startswith("conftest.py created") for f in flags["14_write_conftest"])
    assert any(f.startswith("test file deleted") for f in flags["17_delete_tests"])
    assert any(f.startswith("project file modified") for f in flags["19_edit_project_module"])
    assert any("pytest hook" in f for f in flags["31_register_plugin"])
    assert not any(flags[f"typedkey-ok-{i}"] for i in range(8))
