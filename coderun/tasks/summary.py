"""Where a project stands in the benchmark, read from what is built (its local environment, the task store):
one row per project for `coderun tasks build --all` and the coverage benchmark.

    summarize(manifest, settings, failure=None) -> ProjectSummary
"""

from __future__ import annotations

from collections import Counter

from pydantic import Field

from coderun.config import Settings
from coderun.errors import CoderunError
from coderun.manifests.schema import Manifest
from coderun.records import Record, TargetOutcome
from coderun.tasks import in_benchmark, store


class ProjectSummary(Record):
    project: str
    source: str                        # "git", "pypi" or "path", then what names it
    python: str                        # the interpreter the baseline ran on, else the manifest's
    env: bool                          # a local environment with its baseline is built
    passed: int | None = None          # baseline tests (None: no baseline)
    failed: int | None = None          # failed or errors in the baseline
    declared: int = 0                  # tasks.targets of the manifest
    verified: int = 0                  # of those, verified in the stored build
    discovered: int = 0                # discovered tasks in the benchmark
    reasons: dict[str, int] = Field(default_factory=dict)   # unverified declared targets per reason
    failure: str = ""                  # why the latest build failed (given by the caller)

    @property
    def built(self) -> bool:
        return not self.failure


def summarize(manifest: Manifest, settings: Settings, failure: str | None = None) -> ProjectSummary:
    """`manifest`'s row. The environment is looked up, never built; a source that cannot be checked out
    reads as no environment."""
    from coderun.envs.local import find_local_env, load_baseline
    from coderun.envs.sources import describe_source

    try:
        env = find_local_env(manifest, settings)
        baseline = load_baseline(env) if env else None
    except CoderunError:
        baseline = None
    counts = baseline.counts() if baseline else None
    outcomes = store.target_outcomes(settings, manifest.name)
    weak_ok = manifest.name in store.weak_included(settings)
    discovered = [t for t in store.query(settings, project=manifest.name)
                  if not t.explicit and in_benchmark(t, weak_ok)]
    return ProjectSummary(
        project=manifest.name, source=describe_source(manifest),
        python=baseline.python if baseline else manifest.python, env=baseline is not None,
        passed=counts["passed"] if counts else None,
        failed=counts["failed"] + counts["error"] if counts else None,
        declared=len(manifest.tasks.targets), verified=sum(o.verified for o in outcomes),
        discovered=len(discovered), reasons=reason_counts(outcomes), failure=failure or "")


def reason_counts(outcomes: list[TargetOutcome]) -> dict[str, int]:
    """Unverified targets per reason, most frequent first."""
    return dict(Counter(o.reason.value for o in outcomes if o.reason is not None).most_common())
