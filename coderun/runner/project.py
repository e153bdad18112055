"""A project's run context, and the one place a run of code against its tests is made.

    run_projects(names, backend, settings, tasks, ...) -> {name: RunProject}   environments built when missing
    RunProject.run(pool, relfile=..., new_source=..., nodeids=..., limits=..., log_path=...) -> Evidence

Evaluation, rank and task verification all run code the same way: the file the code replaces, written into a
copy of the project, the tests run there with the configuration's environment and time limits, the log kept.
A `RunProject` holds what does not change between those runs (manifest, sandbox, original tree, environment);
`run` makes the `SampleRun` and hands it to an executor's pool. A sandbox that cannot start is Evidence with
`infra_error`, as a sandbox that breaks mid-run is: callers handle one kind of failure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from coderun.config import Settings
from coderun.envs.sources import checkout
from coderun.envs.testrun import test_env
from coderun.errors import SandboxError, TaskError
from coderun.manifests.schema import Manifest, find_manifest
from coderun.records import Evidence, ProjectEnvironment, ProjectSource, Task
from coderun.runner.evidence import SampleRun
from coderun.runner.executors import Pool
from coderun.sandbox import SandboxSpec
from coderun.sandbox.project import original_tree, project_sandbox, run_limits, top_level_packages


@dataclass(frozen=True)
class RunProject:
    """A project as runs execute it: its manifest, sandbox, original tree and installed packages."""

    manifest: Manifest
    spec: SandboxSpec
    tree: Path
    packages: frozenset[str] = frozenset()
    environment: ProjectEnvironment | None = field(default=None, compare=False)
    # Each test's outcome on the original in this environment (its baseline); empty: not known.
    baseline: dict[str, str] = field(default_factory=dict, compare=False)
    # The test files a run will use, primed together by each worker (SampleRun.prime_files).
    prime_files: tuple[str, ...] = field(default=(), compare=False)

    @property
    def name(self) -> str:
        return self.manifest.name

    def limits(self, durations: Sequence[float]) -> tuple[float, float]:
        """(per-test, whole-run) time limits for tests whose original took `durations` seconds."""
        return run_limits(list(durations), self.manifest)

    def not_passing_here(self, task: Task) -> list[str]:
        """The task's mapped tests that this environment's baseline ran and did not pass: a task verified in
        another environment (another backend, machine or build) whose tests cannot all pass here, so no
        sample of it can. As the build maps, a test the baseline did not see (a supplementary or
        position-keyed one) is not held against it; a task with configurations is not checked (the baseline
        is the default configuration's)."""
        if not self.baseline or task.configurations:
            return []
        return [n for n in task.tests if self.baseline.get(n, "passed") != "passed"]

    def test_env(self, configuration: str = "") -> dict[str, str]:
        """The configuration's test environment. PYTHONPATH is left out: the runner sets it to the copy's
        import root (the tree here is the original's, which a run must not import)."""
        return {k: v for k, v in test_env(self.manifest, self.tree, configuration).items() if k != "PYTHONPATH"}

    def run(self, pool: Pool, *, relfile: str, new_source: str, nodeids: Sequence[str],
            limits: tuple[float, float], log_path: Path | None, configuration: str = "",
            pytest_args: Sequence[str] = (), differential: str | None = None,
            files: tuple[tuple[str, str], ...] = (), template: bool = True, sample: bool = True,
            trusted: bool = False, collect_limit: float = 0.0, cpu_limit: float = 0.0) -> Evidence:
        """Run `nodeids` with `relfile` replaced by `new_source` (and `files` written beside it), under
        `limits` (per test, whole run); `pytest_args` follow the manifest's tests.args. `sample=False`: the
        text is the project's own (a run of the original), not code to guard the tests against; `trusted`: the
        body is coderun's own (see SampleRun.trusted), and `collect_limit` then bounds its collection and
        `cpu_limit` each test's CPU time."""
        per_test, total = limits
        run = SampleRun(relfile=relfile, new_source=new_source, nodeids=list(nodeids), timeout=total,
                        per_test_timeout=per_test, env=self.test_env(configuration),
                        pytest_args=(*self.manifest.tests.args, *pytest_args), log_path=log_path,
                        template=template, differential=differential, files=files, sample=sample,
                        trusted=trusted, collect_timeout=collect_limit if trusted else 0.0,
                        cpu_per_test=cpu_limit if trusted else 0.0, prime_files=self.prime_files)
        try:
            return pool.run(self.name, run)
        except SandboxError as e:  # the sandbox could not even start
            return Evidence(expected=list(nodeids), infra_error=str(e))


def run_projects(names: Sequence[str], backend: str, settings: Settings, tasks: dict[str, Task], *,
                 manifests: dict[str, str] | None = None, isolation: str = "auto",
                 run_id: str = "") -> dict[str, RunProject]:
    """Each named project ready to run the tasks (environments built when missing); a TaskError when its
    source has moved past the commit the tasks were built at. `manifests` maps a name to the manifest path a
    run was started with; `run_id` labels the sandboxes (docker: `org.coderun.run`), so a run's containers
    can be found among others'."""
    out = {}
    for name in names:
        manifest = find_manifest((manifests or {}).get(name) or name, settings)
        co = checkout(manifest, settings)
        spec, environment, baseline = project_sandbox(manifest, settings, backend)  # builds the pre_install tree too
        spec = replace(spec, isolation=isolation, run_id=run_id or spec.run_id)
        tree = original_tree(manifest, settings, co.path)
        commits = {t.commit for t in tasks.values() if t.project == name}
        if commits - {co.commit}:
            raise TaskError(f"{name}: the tasks were built at {sorted(commits)[0][:12]} but the source is "
                            f"now at {co.commit[:12]}", hint=f"rebuild them: coderun tasks build {name}")
        source = ProjectSource(kind=co.kind, commit=co.commit, origin=co.origin, upstream=co.upstream)
        environment = environment.model_copy(update={"source": source})
        out[name] = RunProject(manifest, spec, tree, top_level_packages(tree / manifest.import_root), environment,
                               {t.nodeid: t.outcome for t in baseline.tests})
    return out


def task_slug(task_id: str) -> str:
    """A task id as a folder name (a run folder's logs/ and spliced/)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", task_id).strip("_")
