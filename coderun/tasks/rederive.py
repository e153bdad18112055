"""`coderun tasks rigor`: the pass+ inputs of a project's stored tasks, derived again without rebuilding them.

The derivation is plus/derive's, as `tasks build` runs it; this loads the stored tasks, checks they were built
at the environment's commit, runs the original in the evaluation's sandbox and stores what is derived.
"""

from __future__ import annotations

from coderun.config import Settings
from coderun.envs.local import build_local_env, find_local_env
from coderun.errors import TaskError
from coderun.events import Listener, Note, silent
from coderun.manifests.schema import Manifest
from coderun.plus.derive import project_inputs, record
from coderun.plus.inputs import target
from coderun.records import RigorSummary, TaskStatus
from coderun.tasks import store
from coderun.tasks.sandbox_runs import sandbox_tests
from coderun.tasks.trivial import task_bodies


def build_rigor(manifest: Manifest, settings: Settings, backend: str = "local", jobs: int = 1, *,
                on_event: Listener = silent) -> dict[str, RigorSummary]:
    """The pass+ inputs of a project's stored tasks, derived again (after a coderun upgrade, or for a store
    built before pass+) without rebuilding the tasks; returns each benchmark task's summary."""
    jobs = max(1, jobs)
    tasks = store.query(settings, project=manifest.name)
    if not tasks:
        raise TaskError(f"{manifest.name}: no stored tasks to derive pass+ inputs for",
                        hint=f"build them first: coderun tasks build {manifest.name}")
    # as `tasks build` and `eval` do: a manifest whose tests section changed gets its baseline run again
    env = find_local_env(manifest, settings) or build_local_env(manifest, settings, on_event=on_event)
    stale = {t.commit for t in tasks} - {env.checkout.commit}
    if stale:
        raise TaskError(f"{manifest.name}: the stored tasks were built at {sorted(stale)[0][:12]}, the environment "
                        f"is at {env.checkout.commit[:12]}", hint=f"rebuild them: coderun tasks build {manifest.name}")
    logs = settings.runs / "tasks" / manifest.name
    logs.mkdir(parents=True, exist_ok=True)
    benchmark = [t for t in tasks if t.status in (TaskStatus.VERIFIED, TaskStatus.WEAK) and t.tests]
    recorded = record(manifest, env, {t.task_id: (target(t), t.tests) for t in benchmark}, logs,
                      lambda text: on_event(Note(manifest.name, text)))
    durations = {n: d for t in tasks for n, d in t.test_durations.items()}
    notes: list[str] = []
    with sandbox_tests(manifest, settings, backend, env, logs, durations, jobs, notes) as runner:
        tasks, inputs = project_inputs(tasks, recorded, runner.observe, task_bodies, jobs, on_event, manifest.name,
                                       env.checkout.path)
    store.save_rigor(settings, manifest.name, tasks, inputs)
    return {t.task_id: t.rigor for t in tasks if t.rigor is not None}
