"""The build-time derivation of pass+: record the original's calls, derive inputs, keep the ones that matter.

For a project's benchmark tasks:
1. its mapped tests run twice on the pristine project with a recorder of every call of each target
   (`record`, plus/record); calls whose results differ between the runs are dropped;
2. per task, one run of its tests in the evaluation's sandbox ends with the differential step exploring
   the original (harness/coderun_differential): the recorded calls, type-aware mutations of them, mutants
   of the original, each call made twice. Verification's own last run of the original on those very tests
   is that run when it carried the step (tasks/verify: `TaskTests.explore`); else it is made here;
3. the candidates the original ended the same way on twice are reduced (plus/inputs.reduce);
4. a second run of the original on the kept inputs confirms them: an input it does not repeat is dropped.
What is kept (inputs, and on the host only, the original's observations) is stored with the task by the
caller (tasks/build, and tasks/rederive for stored tasks), which also runs the tests (`Observe`) and makes
the trivial bodies verification let through (`Bodies`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

from coderun.envs.local import LocalEnv
from coderun.events import Listener
from coderun.manifests.schema import Manifest
from coderun.parallel import Tally, parallel
from coderun.plus import inputs as plan
from coderun.plus.grade import differential_failure
from coderun.plus.record import Recording, record_calls
from coderun.records import RigorSummary, Task, TaskInputs, TaskStatus
from coderun.runner.splice import blank_body

# (nodeids, payload, budget, configuration, the task's file with another body or None: the original)
#   -> (outcomes per test, the differential record or None)
Observe = Callable[[list[str], str, float, str, "tuple[str, str] | None"], tuple[dict[str, str], "dict | None"]]
# (a task, the obs of its recorded calls) -> its trivial bodies by name (tasks/trivial.task_bodies)
Bodies = Callable[[Task, list[dict]], dict[str, str]]
# A run of the original on a task's tests that ended with the exploring step: (outcomes, its record)
Explored = tuple[dict[str, str], "dict | None"]


def task_inputs(task: Task, recorded: Recording | None, observe: Observe, explored: Explored | None = None
                ) -> tuple[TaskInputs | None, RigorSummary]:
    """The task's differential inputs (None when there are none) and its summary (why not, when not).
    `explored`: the exploring run verification made already (the original on these very tests, then the step)."""
    recorded = recorded or Recording(task_id=task.task_id)
    base = RigorSummary(recorded=len(recorded.calls), seen=recorded.seen, uncaptured=dict(recorded.uncaptured),
                        nondeterministic=recorded.nondeterministic)
    if not recorded.calls:
        return None, base.model_copy(update={"note": _why_none(base)})
    conf = task.runs()[0]
    outcomes, record = explored or observe(
        list(conf.tests), plan.explore_payload(task.task_id, task, [c.input for c in recorded.calls]),
        plan.EXPLORE_BUDGET, conf.name, None)
    problem = _problem(conf.tests, outcomes, record)
    if problem:
        return None, base.model_copy(update={"note": f"exploring the original: {problem}"})
    candidates = [c for c in record.get("candidates") or [] if isinstance(c, dict) and plan.usable(c)]
    summary = base.model_copy(update={"candidates": len(candidates), "mutants": int(record.get("mutants") or 0)})
    chosen = [candidates[i] for i in plan.reduce(candidates)]
    if not chosen:
        return None, summary.model_copy(update={"note": "the original ended differently on every input when "
                                                        "called twice"})
    expected = [c["obs"] for c in chosen]
    limit = plan.check_limit(expected)
    target = plan.target(task)
    payload = plan.check_payload(target, [c["input"] for c in chosen], limit, plan.CHECK_BUDGET)
    outcomes, record = observe(list(conf.tests), payload, plan.CHECK_BUDGET, conf.name, None)
    problem = _problem(conf.tests, outcomes, record)
    again = None if problem else record.get("observations")
    keep = [c for c, ok in zip(chosen, plan.confirmed(expected, again), strict=True) if ok]
    summary = summary.model_copy(update={
        "inputs": len(keep), "augmented": sum(c.get("origin") != "recorded" for c in keep),
        "dropped": len(chosen) - len(keep),
        "note": "" if keep else f"confirming the inputs: {problem or 'the original did not repeat itself'}"})
    if not keep:
        return None, summary
    return TaskInputs(task_id=task.task_id, target=target, inputs=[c["input"] for c in keep],
                      expected=[c["obs"] for c in keep], origins=[str(c.get("origin") or "recorded") for c in keep],
                      limit=limit, budget=plan.CHECK_BUDGET), summary


def trivial_through(task: Task, inputs: TaskInputs | None, statements: dict[str, str], observe: Observe,
                    original: str) -> list[str]:
    """Of the trivial bodies that pass the task's tests (`trivial_passes`; `statements`: the task's trivial
    bodies by name), those pass+ lets through too: each runs the tests and then the differential step on the
    task's inputs (all of them without inputs)."""
    if not task.trivial_passes or inputs is None:
        return list(task.trivial_passes)
    conf = task.runs()[0]
    payload = plan.check_payload(inputs.target, inputs.inputs, inputs.limit, inputs.budget)
    through = []
    for name in task.trivial_passes:
        if name not in statements:   # the body verification ran cannot be made again: not shown caught
            through.append(name)
            continue
        body = blank_body(original, task.qualname, lineno=task.lineno, statement=statements[name])
        outcomes, record = observe(list(conf.tests), payload, inputs.budget, conf.name, (task.file, body))
        passed = all(outcomes.get(n) == "passed" for n in conf.tests)
        if passed and differential_failure(inputs, record) is None:
            through.append(name)
    return through


def _problem(tests: list[str], outcomes: dict[str, str], record: dict | None) -> str:
    """Why a run of the original gave nothing to use ("" when it did)."""
    failed = [n for n in tests if outcomes.get(n) != "passed"]
    if failed:
        return f"{len(failed)} of its tests did not pass (first: {failed[0]})"
    if record is None:
        return "the step left no record"
    if record.get("error") or record.get("skipped"):
        return str(record.get("error") or record.get("skipped"))
    return ""


def _why_none(summary: RigorSummary) -> str:
    if summary.seen == 0 and not summary.uncaptured:
        return "no call recorded while its tests ran"
    why = ", ".join(f"{n} {k}" for k, n in sorted(summary.uncaptured.items()) if n) or "none deterministic"
    return f"no call could be recorded ({why})"


def project_inputs(tasks: list[Task], recorded: dict[str, Recording], observe: Observe, bodies: Bodies,
                   jobs: int, on_event: Listener, project: str, tree: Path,
                   explored: dict[str, Explored] | None = None) -> tuple[list[Task], list[TaskInputs]]:
    """Every benchmark task's inputs, `jobs` tasks at a time, and which of the trivial bodies that pass its
    tests pass+ lets through (`tree`: the pristine project; `bodies` makes those bodies): the tasks with their summaries and
    `trivial_plus_passes` set, and the inputs of those that have some. `explored`: by task id, the exploring
    runs verification made on the tests each task kept."""
    todo = [t for t in tasks if t.status in (TaskStatus.VERIFIED, TaskStatus.WEAK) and t.tests]
    updates: dict[str, dict] = {}
    found: list[TaskInputs] = []

    def one(t: Task) -> tuple[TaskInputs | None, RigorSummary, list[str]]:
        recording = recorded.get(t.task_id)
        inputs, summary = task_inputs(t, recording, observe, (explored or {}).get(t.task_id))
        if not (t.trivial_passes and inputs):
            return inputs, summary, trivial_through(t, inputs, {}, observe, "")
        statements = bodies(t, [c.obs for c in recording.calls] if recording else [])
        original = (tree / t.file).read_text(encoding="utf-8")
        return inputs, summary, trivial_through(t, inputs, statements, observe, original)

    tally = Tally(f"{project} pass+", len(todo), Counter(), on_event)
    for task, (inputs, summary, through) in parallel(one, todo, jobs, on_event=on_event):
        updates[task.task_id] = {"rigor": summary, "trivial_plus_passes": through}
        if inputs is not None:
            found.append(inputs)
        tally.advance("inputs" if inputs is not None else "none")
    updated = [t.model_copy(update=updates[t.task_id]) if t.task_id in updates else t for t in tasks]
    return updated, found


def record(manifest: Manifest, env: LocalEnv, targets: dict[str, tuple[dict, list[str]]], logs: Path, say
            ) -> dict[str, Recording]:
    """Every call of each target its tests make, recorded twice on the pristine project in its venv
    (plus/record); only the calls that gave the same results both times are kept."""
    if not targets:
        return {}
    say(f"recording the calls of {len(targets)} functions (two runs of their tests)")
    return record_calls(manifest, env.python, env.checkout.path, targets, log=logs / "recording.log")
