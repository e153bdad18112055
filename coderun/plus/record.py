"""Recording the original's calls: the mapped tests run on the pristine project under coderun_recorder.

The union of the tasks' mapped tests runs `runs` times (two by default), each time on a fresh temporary copy
of the tree, in the project's local venv, the way the coverage run does (same environment, services, pytest
command line, a limit of three times the suite's timeout). The plugin writes, per task, the calls it
captured (input pickled at the call, what the call did) and counts what it could not capture. An input is
kept when it was captured in every run and every call on it did the same thing (the seconds aside);
otherwise it is dropped and counted as nondeterministic (time, randomness, ids, test order).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import Field, JsonValue

from coderun.envs.services import expand, start_services
from coderun.envs.testrun import command_line_id, files_of, pytest_command, run_logged, test_env, venv_env
from coderun.errors import TaskError
from coderun.harness import HARNESS_DIR, RECORDER_FILES
from coderun.manifests.schema import Manifest
from coderun.records import Record

MAX_CALLS = 40            # distinct inputs captured per task and run (random inputs crowd out stable ones)
MAX_BYTES = 65536         # of one pickled input
# What the plugin counts besides uncaptured calls: not a reason a call is missing from a recording.
_NOT_UNCAPTURED = ("calls", "captured", "repeated")


class RecordedCall(Record):
    """One input of the original and what the original did on it (obs: outcome, value, args, kwargs, seconds)."""

    input: str                                   # coderun_values.dump_call text of (args, kwargs)
    key: str                                     # digest of the input's canonical form
    obs: dict[str, JsonValue]


class Recording(Record):
    """A task's recorded calls; `seen`: calls of the target in the first run; `uncaptured`: calls not
    captured per reason (unpicklable, too_large, generator, over_limit, error) and the run's problems
    (run_failed: nothing usable; run_incomplete: a run failed or was killed and what it wrote is used;
    tracer_error: the recorder stopped itself); `nondeterministic`: inputs dropped as not repeatable."""

    task_id: str
    calls: list[RecordedCall] = Field(default_factory=list)
    seen: int = 0
    uncaptured: dict[str, int] = Field(default_factory=dict)
    nondeterministic: int = 0


@dataclass
class _RunOutput:
    """What one run wrote, per task: key -> [(input, obs)] in order, and the counts."""

    calls: dict[str, dict[str, list[tuple[str, dict]]]] = field(default_factory=dict)
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    complete: bool = True


def record_calls(manifest: Manifest, python: Path, tree: Path,
                 targets: Mapping[str, tuple[dict[str, object], Sequence[str]]], *, log: Path | None,
                 runs: int = 2) -> dict[str, Recording]:
    """Each task's Recording from `runs` runs of the union of its mapped tests on copies of `tree`.

    `targets`: task id -> (target, as coderun_recorder reads it; the task's mapped node ids). `tree` is
    never modified. Both runs' output goes to `log`.
    """
    task_ids = sorted(targets)
    union = sorted({n for _, nodeids in targets.values() for n in nodeids})
    if not union:
        return {t: Recording(task_id=t) for t in task_ids}
    spec = {"targets": [targets[t][0] for t in task_ids], "task_ids": task_ids, "max_calls": MAX_CALLS,
            "max_bytes": MAX_BYTES}
    outputs: list[_RunOutput] = []
    with tempfile.TemporaryDirectory(prefix="coderun-record-") as tmp:
        work = Path(tmp)
        plugin_dir = work / "plugin"
        plugin_dir.mkdir()
        for name in RECORDER_FILES:
            shutil.copy2(HARNESS_DIR / name, plugin_dir / name)
        for i in range(1, runs + 1):
            out = _run_once(manifest, python, tree, work / f"run-{i}", plugin_dir, spec, union, log)
            if out is None:
                return {t: Recording(task_id=t, uncaptured={"run_failed": 1}) for t in task_ids}
            outputs.append(out)
    return {t: _merge(t, outputs) for t in task_ids}


def _run_once(manifest: Manifest, python: Path, tree: Path, run_dir: Path, plugin_dir: Path,
              spec: dict[str, object], union: list[str], log: Path | None) -> _RunOutput | None:
    """One recorded run on a fresh copy of the tree; None when it wrote nothing at all."""
    run_dir.mkdir()
    # Every run's copy, and pytest's temporary folders, at the same paths: a value holding a path (tmp_path,
    # the copy's files) is then the same in both runs and not taken for nondeterminism.
    copy = run_dir.parent / "tree"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(tree, copy, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    out_file = run_dir / "calls.jsonl"
    spec_file = run_dir / "spec.json"
    env = venv_env(python)
    t_env = test_env(manifest, copy)
    env.update(t_env)
    env["PYTHONPATH"] = os.pathsep.join([t_env["PYTHONPATH"], str(plugin_dir)])
    env["CODERUN_RECORD"] = str(spec_file)
    # The files on the command line and the ids kept by the recorder after collection: an id that does not
    # collect (rdflib's embed the path of the tree the coverage map ran in) must not stop the whole run.
    spec_file.write_text(json.dumps({**spec, "out": str(out_file), "nodeids": [command_line_id(n) for n in union]}))
    cmd = pytest_command(manifest, python, nodeids=files_of(union), rootdir=copy,
                         extra=["-p", "coderun_recorder", f"--basetemp={run_dir.parent / 'basetemp'}"])
    complete = True
    try:
        with start_services(manifest.tests.services) as services:
            proc = run_logged(cmd, copy, expand(env, services.env), manifest.tests.timeout * 3, log,
                              what="the recording run")
        complete = proc.returncode in (0, 1)
    except TaskError:  # timed out or could not start (said in the log): what it wrote may still be there
        complete = False
    if not out_file.is_file() or out_file.stat().st_size == 0:
        return None
    out = _read(out_file)
    out.complete = complete and out.complete
    return out


def _read(path: Path) -> _RunOutput:
    out = _RunOutput()
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            d = json.loads(line)
        except ValueError:  # the last line of a killed run
            out.complete = False
            continue
        if "error" in d:
            out.errors.append(str(d["error"]))
        elif "counts" in d:
            out.counts[d["task_id"]] = d["counts"]
        elif "obs" in d:
            out.calls.setdefault(d["task_id"], {}).setdefault(d["key"], []).append((d["input"], d["obs"]))
    return out


def _merge(task_id: str, outputs: list[_RunOutput]) -> Recording:
    """Keep the inputs every run captured with one behaviour (seconds aside): the slowest seconds stay."""
    per_run = [o.calls.get(task_id, {}) for o in outputs]
    keys = list(dict.fromkeys(k for calls in per_run for k in calls))  # first seen first
    kept, unstable = [], 0
    for key in keys:
        seen = [calls.get(key) for calls in per_run]
        if any(s is None for s in seen):
            unstable += 1
            continue
        observed = [obs for s in seen for _, obs in s]
        if any(_without_seconds(o) != _without_seconds(observed[0]) for o in observed[1:]):
            unstable += 1
            continue
        obs = {**observed[0], "seconds": max(float(o.get("seconds", 0.0)) for o in observed)}
        kept.append(RecordedCall(input=seen[0][0][0], key=key, obs=obs))
    counts = next((o.counts[task_id] for o in outputs if task_id in o.counts), None)
    uncaptured = {k: v for k, v in (counts or {}).items() if k not in _NOT_UNCAPTURED and v}
    if not all(o.complete for o in outputs) or counts is None:
        uncaptured["run_incomplete"] = 1
    if any(o.errors for o in outputs):
        uncaptured["tracer_error"] = 1
    seen_calls = counts["calls"] if counts is not None else len(keys)
    return Recording(task_id=task_id, calls=kept, seen=seen_calls, uncaptured=uncaptured,
                     nondeterministic=unstable)


def _without_seconds(obs: dict) -> dict:
    return {k: v for k, v in obs.items() if k != "seconds"}
