"""The records of `coderun rank`, passed between its stages and kept in the run (store.py): executions,
generated tests, rankings per task, the lift figures. Reports read them too (rank is below report)."""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, ConfigDict, Field

from coderun.errors import UsageError
from coderun.records import VerdictKind


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RankTests(str, Enum):
    INPUTS = "inputs"      # the task's recorded and augmented inputs (pass+'s), no outputs
    MODEL = "model"        # test cases the model wrote for the target
    BOTH = "both"

    @classmethod
    def parse(cls, value: str | RankTests) -> RankTests:
        try:
            return cls(value)
        except ValueError:
            raise UsageError(f"unknown --tests {value!r}; one of: {', '.join(t.value for t in cls)}") from None


class ExecStatus(str, Enum):
    RAN = "ran"                        # observations (inputs) or test outcomes (model) were read
    UNSPLICEABLE = "unspliceable"      # the sample does not parse or has no function of the task's name
    NO_OBSERVATIONS = "no_observations"  # the module did not import, the step did not run, the process died
    INFRA = "infra"                    # the sandbox broke: retried when ranking is resumed


class Execution(Model):
    """One distinct sample (task, code hash) run for ranking: what it did on each input, or which generated
    tests it passed. Keyed in the run store by (task, hash, tests, key): `key` names the set it ran against
    (a hash of the inputs or of the generated tests), so a changed set runs again."""

    task_id: str
    hash: str
    tests: RankTests
    key: str
    status: ExecStatus
    observations: list[dict] = Field(default_factory=list)   # inputs: one per input, in order
    passed: list[str] = Field(default_factory=list)          # model: the generated tests it passed
    timed_out: list[str] = Field(default_factory=list)       # model: the generated tests that ran out of time
    note: str = ""
    duration: float = 0.0


class RankedSample(Model):
    index: int                   # the sample's index in the run
    hash: str
    cluster: int                 # 0 is the top cluster of its task
    cluster_size: int            # samples (not distinct codes) in the cluster
    agreement: int               # inputs run without error (inputs) / tests passed (model), by the cluster
    score: float
    rank: int                    # 1 is the pick


class TaskRanking(Model):
    task_id: str
    level: str
    tests: RankTests
    checks: int                  # inputs (or generated tests kept) the samples were run on
    method: str                  # how the score was made (said in reports), e.g. "behaviour on 12 inputs"
    samples: list[RankedSample]  # in rank order
    counts: dict[str, int] = Field(default_factory=dict)   # model: generated tests by what became of them

    @property
    def top(self) -> RankedSample:
        return self.samples[0]


class Lift(Model):
    """Ranked pass@1 against pass@1 (and pass@10) over a group of tasks."""

    tasks: int
    pass1: float
    ranked1: float
    pass10: float | None         # None: no task of the group has 10 samples
    tasks10: int
    lift: float                  # ranked1 - pass1
    lo: float                    # paired bootstrap 95% interval of the lift
    hi: float


class RankSummary(Model):
    run_id: str
    tests: RankTests
    rigor: str                   # which of the run's verdicts "passed" means (its headline)
    iters: int
    seed: int
    overall: Lift
    levels: dict[str, Lift]
    top_verdicts: dict[str, VerdictKind] = Field(default_factory=dict)   # task -> the top sample's verdict
    counts: dict[str, int] = Field(default_factory=dict)   # model: generated tests by what became of them


class GeneratedTest(Model):
    name: str                    # the test function's name in the generated file
    source: str                  # its code (a `def test_...` with what it needs above it)


class GeneratedTests(Model):
    """The test cases the model wrote for one task (`--tests model`), as parsed and kept."""

    task_id: str
    model: str
    completions: list[str]       # the model's raw answers
    tests: list[GeneratedTest]   # the test functions kept
    dropped: dict[str, int] = Field(default_factory=dict)   # why others were left out -> how many
    key: str = ""                # hash of the kept tests: executions against another set run again
