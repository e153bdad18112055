"""What the verdict service reads and answers (pydantic: FastAPI makes the OpenAPI schema from these)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from coderun.records import PlusOutcome, TestOutcome, VerdictKind

Rigor = Literal["base", "plus"]


class VerdictRequest(BaseModel):
    """One sample for one task: the whole function as `code`, or a model's raw `completion` (read as
    `coderun eval` reads a samples file's `completion`: the task's prompt, then the text; markdown fences
    in either are found by the splicer)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    task_id: str = Field(min_length=1, description="A task id (or an alias, such as a CoderEval _id).")
    code: str | None = Field(None, description="The whole function that replaces the task's target.")
    completion: str | None = Field(None, description="A continuation of the task's prompt (signature and "
                                   "docstring), or a chat answer with the function in a fenced block.")
    rigor: Rigor = Field("base", description="base: the project's tests; plus: and agreeing with the original "
                         "on the task's differential inputs (pass+).")

    @model_validator(mode="after")
    def _one_code(self) -> VerdictRequest:
        if (self.code is None) == (self.completion is None):
            raise ValueError("give exactly one of 'code' (the whole function) or 'completion' (the model's text)")
        return self


class BatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    requests: list[VerdictRequest] = Field(min_length=1)


class RigorVerdict(BaseModel):
    verdict: VerdictKind
    failure: str | None = None
    reason: str = ""


class Durations(BaseModel):
    queued: float = Field(0.0, description="Seconds between acceptance and the start of judging.")
    judged: float = Field(0.0, description="Seconds the judging took (splice, tests, grading).")
    tests: float = Field(0.0, description="Seconds the test run took, as measured in the sandbox.")


class Judgement(BaseModel):
    """What one judging of (task, code) found: both rigors' verdicts and the evidence shown to callers.
    Kept in the store as JSON."""

    model_config = ConfigDict(extra="forbid")

    outcome: PlusOutcome
    tests: list[TestOutcome] = Field(default_factory=list)
    timed_out: bool = False
    durations: Durations = Field(default_factory=Durations)


class VerdictOut(BaseModel):
    id: str = Field(description="GET /v1/verdicts/{id} answers it again.")
    task_id: str
    rigor: Rigor
    state: Literal["pending", "done"]
    verdict: VerdictKind | None = Field(None, description="The headline verdict (of `rigor`).")
    failure: str | None = Field(None, description="The failure class when not a pass (runner/taxonomy).")
    reason: str = ""
    reward: float | None = Field(None, description="1.0 for a pass, 0.0 otherwise; None while pending.")
    base: RigorVerdict | None = None
    plus: RigorVerdict | None = Field(None, description="pass+ (equals base when the task has no inputs).")
    plus_checked: bool = False
    tests: list[TestOutcome] = Field(default_factory=list, description="Each expected test's outcome.")
    timed_out: bool = False
    durations: Durations = Field(default_factory=Durations)
    cached: bool = Field(False, description="Answered from the store: the same (task, code, rigor) was "
                         "judged before.")
    accepted_at: str = ""
    finished_at: str | None = None


class BatchOut(BaseModel):
    verdicts: list[VerdictOut]


class TaskOut(BaseModel):
    task_id: str
    project: str
    level: str
    status: str
    qualname: str
    aliases: list[str]
    weak: bool = Field(description="A trivial body passes its tests (base): left out of verdicts unless the "
                       "server runs with --include-weak.")
    prompt: str = Field(description="The completion prompt for the chosen context variant.")
    header: str
    completion_prompt: str = Field(description="What a request's `completion` continues (signature and "
                                   "docstring, ending with the body's indentation), as in `coderun eval`'s "
                                   "samples files.")
    docstring: str | None


class TasksOut(BaseModel):
    context: str
    docstring: str
    tasks: list[TaskOut]


class Health(BaseModel):
    status: Literal["ok"] = "ok"
    projects: list[str]
    tasks: int
    queue: int
    slots: int


class Problem(BaseModel):
    """A 4xx answer: what is wrong and what to change."""

    error: str
    detail: list[str] = Field(default_factory=list)
