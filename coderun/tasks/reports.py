"""What a task build reports, stored beside its tasks: records only, so that reading them (an evaluation's
explanation of a task it cannot find, `coderun tasks list`) does not import the build machinery."""

from __future__ import annotations

from collections import Counter

from pydantic import Field

from coderun.records import Evidence, Level, Record


class RunKindTime(Record):
    """A task build's sandbox runs of one kind: how many, their seconds (each run's own, start-up and
    collection included; runs in parallel add up), the tests they ran, and of those seconds the harness's
    integrity checks (the reporter's snapshot and its check after every test)."""

    runs: int = 0
    seconds: float = 0.0
    tests: int = 0
    checks_seconds: float = 0.0

    def add(self, ev: Evidence) -> RunKindTime:
        return RunKindTime(runs=self.runs + 1, seconds=round(self.seconds + ev.duration, 3),
                           tests=self.tests + len(ev.outcomes),
                           checks_seconds=round(self.checks_seconds + (ev.integrity_ms or 0.0) / 1000, 3))


class ProjectTaskReport(Record):
    """What one project's task build found (saved in the store beside its tasks)."""

    project: str
    commit: str
    upstream_commit: str = ""                # the source's own commit (`commit` may add supplementary tests)
    backend: str
    include_weak: bool = False
    candidates: int = 0                      # explicit + discovered
    explicit: int = 0
    discovered: int = 0
    unresolved: list[str] = Field(default_factory=list)
    rejected: dict[str, int] = Field(default_factory=dict)
    mapping: str = "coverage"                # coverage | filename
    mapping_note: str = ""
    covered: int = 0
    statuses: dict[str, int] = Field(default_factory=dict)
    levels: dict[str, int] = Field(default_factory=dict)   # benchmark tasks per level
    flaky_tests: list[str] = Field(default_factory=list)
    reasons: dict[str, str] = Field(default_factory=dict)  # task id -> why it is not verified
    capped: dict[str, list[str]] = Field(default_factory=dict)  # task id -> mapped tests dropped by the caps
    max_tests_per_task: int | None = None
    max_seconds_per_task: float = 0.0
    jobs: int = 1
    resumed: int = 0                          # tasks whose decision an interrupted build had kept
    verify_seconds: float = 0.0               # of `seconds`: the verification runs
    # of `seconds`, by stage: environment (0 when it was built before), analysis, coverage map, recording
    # (the original's calls, for pass+), verification, pass+ (input derivation)
    stage_seconds: dict[str, float] = Field(default_factory=dict)
    # of verification and pass+, the sandbox runs by kind (tasks/sandbox_runs.RUN_KINDS): runs, seconds, tests
    run_kinds: dict[str, RunKindTime] = Field(default_factory=dict)
    fallbacks: list[str] = Field(default_factory=list)  # runs that fell back from workers to naive
    seconds: float = 0.0
    configurations: list[str] = Field(default_factory=list)  # tests.configurations every task ran in
    pass_stub_passes: list[str] = Field(default_factory=list)  # verified tasks whose tests a `pass` body passes
    # verified task id -> the trivial bodies (tasks/trivial names) its tests pass with, for tasks with any
    trivial_passes: dict[str, list[str]] = Field(default_factory=dict)
    network_tests: dict[str, list[str]] = Field(default_factory=dict)  # mapped test -> addresses it tried
    network_note: str = ""                   # why network use could not be checked
    # Parametrized tests whose node id changes between runs (a repr, the time), known by their parameters'
    # positions instead: position key -> the node id the coverage run gave (tasks/coverage_map).
    positions: dict[str, str] = Field(default_factory=dict)


class TaskBuildReport(Record):
    projects: list[ProjectTaskReport] = Field(default_factory=list)

    def levels(self) -> dict[str, int]:
        total: Counter[str] = Counter()
        for p in self.projects:
            total.update(p.levels)
        return {lv.value: total[lv.value] for lv in Level}
