"""`coderun tasks build --cluster` on a real 2-node Ray cluster (issue 22), simulated on this machine inside a
loopback-only network namespace (tests/ray_namespace.py, tests/ray_build_driver.py).

The nodes build with a CODERUN_HOME of their own, the driver with another, empty one: what the nodes built must
reach the driver's task store and be what a local `coderun tasks build` of the same projects stores. There is
no network in the namespace, so the local build (outside it, into the nodes' home) also makes the environments
the nodes then find.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from ray_namespace import run_isolated, skip_reason

from coderun.config import load_settings
from coderun.tasks import store

DRIVER = Path(__file__).parent / "ray_build_driver.py"
PROJECTS = ["shconfparser", "shortuuid"]   # small built-in projects (sqlparams' 55 tasks took 160 s a node)
# Both builds leave out the pass+ inputs (the longest part of a build, tested on its own elsewhere): that the
# nodes honour --no-rigor is compared too (each task's `rigor` is None on both sides).
BUILD_ARGS = [*PROJECTS, "--no-rigor", "--json"]
TIMEOUT = 900  # a guard against a hang, not a bound on speed: under load the cluster build took 241 s of 240

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True, scope="module")
def _namespace_and_ray():
    """Skip, saying why, where Ray is missing or a network namespace cannot be made."""
    if reason := skip_reason():
        pytest.skip(reason)


def stored(home: Path) -> dict:
    """What a task store holds of PROJECTS that a build decides (not its timings): each task's verdict and
    tests, each declared target's outcome, each build's commit and counts."""
    s = replace(load_settings(), home=home)
    tasks = {t.task_id: t.model_dump(mode="json", include={"status", "level", "tests", "explicit", "aliases",
                                                           "mapping", "configurations", "pass_stub_passes",
                                                           "commit", "source", "flaky_tests", "rigor"})
             for p in PROJECTS for t in store.query(s, project=p)}
    targets = {o.task_id: (o.reason, o.verified) for o in store.target_outcomes(s) if o.project in PROJECTS}
    reports = {p: {k: v for k, v in json.loads(r).items() if k in ("commit", "statuses", "levels", "candidates")}
               for p, r in store.build_reports(s).items() if p in PROJECTS}
    return {"tasks": tasks, "targets": targets, "reports": reports}


@pytest.fixture(scope="module")
def nodes_home(tmp_path_factory) -> tuple[Path, dict]:
    """The nodes' CODERUN_HOME, with PROJECTS built there by a local `coderun tasks build` (outside the
    namespace: it may need pip's index or cache), and what that build stored: the reference."""
    home = tmp_path_factory.mktemp("nodes-home")
    done = subprocess.run([sys.executable, "-m", "coderun", "tasks", "build", *BUILD_ARGS],
                          capture_output=True, text=True, timeout=TIMEOUT, env={**os.environ, "CODERUN_HOME": str(home)})
    assert done.returncode == 0, done.stderr[-4000:]
    reference = stored(home)
    assert len(reference["tasks"]) >= 5 and set(reference["reports"]) == set(PROJECTS)
    assert all(t["rigor"] is None for t in reference["tasks"].values())
    return home, reference


def test_two_nodes_fill_the_driver_store_as_a_local_build(nodes_home, tmp_path):
    """Two projects built on a 2-node cluster whose nodes have their own CODERUN_HOME: the driver's (empty)
    store gets every task, target outcome and report, the same as a local build's."""
    home, reference = nodes_home
    driver_home = tmp_path / "driver-home"
    done = run_isolated(DRIVER, "--nodes", "2", "--nodes-home", str(home), "--out", str(tmp_path / "out"),
                        "--timeout", str(TIMEOUT - 60), "--", *BUILD_ARGS, timeout=TIMEOUT,
                        env={"CODERUN_HOME": str(driver_home)})
    assert done.returncode == 0 and done.stdout.strip(), f"driver failed ({done.returncode}):\n{done.stderr[-4000:]}"
    build = json.loads(done.stdout.strip().splitlines()[-1])["build"]
    assert build["returncode"] == 0, Path(build["stderr"]).read_text()[-4000:]
    printed = json.loads(Path(build["stdout"]).read_text().strip().splitlines()[-1])
    assert sorted(p["project"] for p in printed["projects"]) == PROJECTS
    got = stored(driver_home)
    assert got["reports"] == reference["reports"]
    assert got["targets"] == reference["targets"]
    differ = [t for t in reference["tasks"] if got["tasks"].get(t) != reference["tasks"][t]]
    assert set(got["tasks"]) == set(reference["tasks"]) and not differ, f"tasks differ: {differ[:5]}"
