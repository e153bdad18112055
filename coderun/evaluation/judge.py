"""One code's verdict on one task: splice, run the mapped tests in every configuration, grade base and pass+.

    judge(task, code, project, pool, inputs=..., log=...) -> Judged

What `coderun eval` does for each unique (task, code), and what a verdict service does per request: the
same function, so both give the same verdict for the same code.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path

from coderun.plus.differential import disagreement
from coderun.plus.grade import grade_plus
from coderun.plus.inputs import check_payload
from coderun.records import ConfigurationTests, Evidence, PlusOutcome, Task, TaskInputs, Verdict, VerdictKind
from coderun.runner.executors import Pool
from coderun.runner.grade import grade, grade_unspliceable
from coderun.runner.project import RunProject
from coderun.runner.splice import splice
from coderun.runner.taxonomy import Primary, SpliceSite


@dataclass(frozen=True)
class Judged:
    outcome: PlusOutcome             # base and pass+ verdicts
    evidence: Evidence | None        # of the last configuration run (None: the code did not splice, or nothing ran)
    new_source: str | None           # the task's file with the code spliced in
    log_path: Path | None            # the last configuration's log


def judge(task: Task, code: str, project: RunProject, pool: Pool, *, inputs: TaskInputs | None,
          log: Path, template: bool = True) -> Judged:
    """The verdicts of `code` as the body of `task`'s target. `log` names the first configuration's log
    (`<log stem>.<configuration>.log` the others'); the differential step runs after the first
    configuration's tests, on `inputs` (pass+). `template`: other codes of the task will follow, so the
    worker keeps a pytest template of the task's run for them (a template costs a process of its own)."""
    not_here = _not_runnable_here(task, project)
    if not_here is not None:
        return not_here
    original = (project.tree / task.file).read_text(encoding="utf-8")
    spliced = splice(original, task.qualname, code, lineno=task.lineno, keep_docstring=bool(task.own_doctests()))
    log_path = evidence = first_ev = None
    if not spliced.ok or spliced.new_source is None:
        verdict = grade_unspliceable(spliced.error.value if spliced.error else "syntax", spliced.message)
    else:
        site = SpliceSite(file=task.file, ranges=(spliced.function_lines,) if spliced.function_lines else (),
                          class_name=task.class_name, project_packages=project.packages)
        # In every configuration the task has (tests.configurations); the first that fails decides.
        for i, conf in enumerate(task.runs()):
            log_path = log if i == 0 else log.with_name(f"{log.stem}.{conf.name}{log.suffix}")
            log_path.parent.mkdir(parents=True, exist_ok=True)
            evidence = _run(task, pool, project, spliced.new_source, log_path, conf, inputs if i == 0 else None,
                            template)
            first_ev = first_ev or evidence
            verdict = grade(conf.tests, evidence, site)
            if verdict.verdict is not VerdictKind.PASS:
                if conf.name:
                    verdict = verdict.model_copy(update={"reason": f"{verdict.reason} (configuration {conf.name})"})
                break
    plus = grade_plus(verdict, inputs, first_ev)
    if plus.verdict is not verdict.verdict and log_path is not None:
        _log_differential(log_path, plus, inputs, first_ev)
    outcome = PlusOutcome(base=verdict.verdict, base_failure=verdict.failure, base_reason=verdict.reason,
                          plus=plus.verdict, plus_failure=plus.failure, plus_reason=plus.reason,
                          checked=bool(inputs and inputs.inputs))
    return Judged(outcome, evidence, spliced.new_source, log_path)


def _not_runnable_here(task: Task, project: RunProject) -> Judged | None:
    """An infrastructure verdict, with nothing run, when some of the task's tests do not pass on the original in
    this environment: no code can pass them, so a failure would say nothing about the code."""
    elsewhere = project.not_passing_here(task)
    if not elsewhere:
        return None
    reason = (f"{len(elsewhere)} of the task's tests do not pass on the original in this environment (first: "
              f"{elsewhere[0]}, {project.baseline[elsewhere[0]]} in its baseline): the task was verified in "
              f"another one; rebuild the tasks on this backend (coderun tasks build {task.project} --backend ...) "
              "or give this environment what those tests need")
    failure = Primary.INFRASTRUCTURE.value
    outcome = PlusOutcome(base=VerdictKind.INFRA, base_failure=failure, base_reason=reason,
                          plus=VerdictKind.INFRA, plus_failure=failure, plus_reason=reason)
    return Judged(outcome, None, None, None)


def _run(task: Task, pool: Pool, project: RunProject, new_source: str, log_path: Path, conf: ConfigurationTests,
         inputs: TaskInputs | None, template: bool) -> Evidence:
    per_test, total = project.limits([task.test_durations.get(n, 1.0) for n in conf.tests])
    payload = check_payload(inputs.target, inputs.inputs, inputs.limit, inputs.budget) if inputs else None
    # --maxfail=1: one failing expected test decides the verdict and its class, so a wrong sample does not
    # also spend every other test's time limit.
    return project.run(pool, relfile=task.file, new_source=new_source, nodeids=conf.tests,
                       limits=(per_test, total + (inputs.budget if inputs else 0.0)), log_path=log_path,
                       configuration=conf.name, pytest_args=("--maxfail=1",), differential=payload,
                       template=template)


def _log_differential(log_path: Path, plus: Verdict, inputs: TaskInputs, evidence: Evidence | None) -> None:
    """Append to the sample's log what the differential step saw on each input it disagreed on."""
    observed = (evidence.differential or {}).get("observations") if evidence else None
    lines = ["", "## differential (pass+)", plus.reason]
    if isinstance(observed, list):
        for i, (e, a) in enumerate(zip(inputs.expected, observed, strict=False)):
            d = disagreement(e, a)
            if d is not None:
                lines += [f"input {i} ({inputs.origins[i] if i < len(inputs.origins) else 'recorded'}): {d}",
                          f"  original: {json.dumps(e)}", f"  sample:   {json.dumps(a)}"]
    with contextlib.suppress(OSError), log_path.open("a", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
