"""The forgery samples of the hostile corpus (issue 21: a wrong function that tries to be graded pass from
inside the test process) through `coderun eval`, with both backends and both executors: one eval per
(backend, executor) holding every forgery sample and two copies of the ground truth. None of the forgeries
passes, each gets its expected class, and the ground truth still passes next to them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hostile_corpus import (
    PROJECT,
    TARGET,
    TYPEDKEY_OK,
    forgeries,
    plus_forgeries,
    run_eval,
    user_manifests,
    verdicts_by_code,
)

from coderun.evaluation.store import RunStore

pytestmark = pytest.mark.slow

CONTROLS = [TYPEDKEY_OK + f"# forgery control {i}\n" for i in range(2)]


@pytest.mark.parametrize("executor", ["workers", "naive"])
@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_no_forgery_is_graded_pass(request, tmp_path, backend, executor):
    """Every forgery fails (each tampering one as tampering), and the answer-key probe finds nothing."""
    if backend == "docker":
        request.getfixturevalue("docker_engine")
    samples = forgeries()
    assert len(samples) >= 16 and any(h.task != TARGET for h in samples)
    rows = [(h.task, h.code) for h in samples] + [(TARGET, c) for c in CONTROLS]
    (tmp_path / "forgeries.jsonl").write_text(
        "".join(json.dumps({"task_id": t, "solution": c}) + "\n" for t, c in rows))
    result = run_eval(tmp_path / "forgeries.jsonl", tmp_path / "run", backend, user_manifests(tmp_path / "p"),
                      executor=executor)
    assert result.returncode == 0, result.stderr[-3000:]
    verdicts = verdicts_by_code(tmp_path / "run")
    assert len(verdicts) == len(rows)
    assert [verdicts[c] for c in CONTROLS] == [("pass", None)] * len(CONTROLS)
    wrong = {}
    for h in samples:
        verdict, failure = verdicts[h.code]
        ok = verdict == "fail" and (h.expect != "tampering" or failure == "other/tampering")
        if not ok:
            wrong[h.name] = (verdict, failure, h.expect)
    assert not wrong, f"{backend}/{executor}: {wrong}"
    assert _probe_report(tmp_path / "run", samples) == ["probe: answer not found"] + [
        f"probe: {channel}: nothing" for channel in PROBE_CHANNELS], f"{backend}/{executor}"


PROBE = "52_answer_key_probe"
PROBE_CHANNELS = ("filesystem", "bytecode", "archives", "git", "gc", "frames", "linecache", "environment")


def _probe_report(run_dir, samples) -> list[str]:
    """What the answer-key probe printed at its exit (in its sample's log), counts left out."""
    code = next(h.code for h in samples if h.name == PROBE)
    with RunStore.open(run_dir) as store:
        index = next(s.index for s in store.samples() if s.code == code)
    log = next(run_dir.glob(f"logs/*typedkey/{index}.log")).read_text(errors="replace")
    return [line.split(" (")[0] for line in log.splitlines() if line.startswith("probe:")]


@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_no_forgery_of_the_differential_step_is_graded_pass_plus(request, tmp_path, backend):
    """The samples of tests/hostile/plus fool the project's tests (a pass on the base verdict) and reach for
    what the original answered in the differential step: with --rigor plus none passes, the ground truth does."""
    if backend == "docker":
        request.getfixturevalue("docker_engine")
    samples = plus_forgeries()
    assert samples
    rows = [(h.task, h.code) for h in samples] + [(TARGET, c) for c in CONTROLS]
    (tmp_path / "plus.jsonl").write_text("".join(json.dumps({"task_id": t, "solution": c}) + "\n" for t, c in rows))
    projects = user_manifests(tmp_path / "p")
    # The store may hold cachetools' tasks from before pass+: their inputs are derived first.
    derived = subprocess.run([sys.executable, "-m", "coderun", "tasks", "rigor", PROJECT, "--backend", backend],
                             env={**os.environ, "CODERUN_PROJECTS": str(projects)}, capture_output=True, text=True)
    assert derived.returncode == 0, derived.stderr[-3000:]
    result = run_eval(tmp_path / "plus.jsonl", tmp_path / "run", backend, projects, "--rigor", "plus")
    assert result.returncode == 0, result.stderr[-3000:]
    verdicts = verdicts_by_code(tmp_path / "run")
    assert [verdicts[c] for c in CONTROLS] == [("pass", None)] * len(CONTROLS)
    with RunStore.open(tmp_path / "run") as store:
        base = {codes: r.rigor.base.value for codes, r in _by_code(store).items()}
    for h in samples:
        assert base[h.code] == "pass", f"{h.name} no longer fools the project's tests: it tests nothing"
        assert verdicts[h.code] == ("fail", "functional/differential"), (h.name, verdicts[h.code])


def _by_code(store):
    codes = {(s.task_id, s.index): s.code for s in store.samples()}
    return {codes[(r.task_id, r.index)]: r for r in store.results()}
