"""The pass+ verdict: stricter than `runner.grade`'s, never more lenient.

A pass must also do what the original does on the task's differential inputs (plus/inputs), compared on the
host with what the original did (plus/differential); a pass without the step's record, or with fewer
observations than inputs, is not one (the sample stopped the step), and any disagreement fails it as
`functional/differential`. A task without inputs keeps its verdict, and so does anything but a pass.
"""

from __future__ import annotations

from coderun.plus.differential import disagreement
from coderun.records import Evidence, TaskInputs, Verdict, VerdictKind
from coderun.runner.grade import fail
from coderun.runner.taxonomy import FailureClass, Primary, Secondary


def grade_plus(base: Verdict, inputs: TaskInputs | None, evidence: Evidence | None) -> Verdict:
    """The pass+ verdict: `base` (from `grade`), unless it is a pass the differential step overturns."""
    if base.verdict is not VerdictKind.PASS or inputs is None or not inputs.inputs:
        return base
    record = evidence.differential if evidence is not None else None
    why = differential_failure(inputs, record)
    if why is not None:
        return fail(FailureClass(Primary.FUNCTIONAL, Secondary.DIFFERENTIAL), f"differential: {why}")
    return Verdict(verdict=VerdictKind.PASS,
                   reason=f"{base.reason}; agrees with the original on {len(inputs.inputs)} inputs")


def differential_failure(inputs: TaskInputs, record: dict | None) -> str | None:
    """Why the differential step's record (after the tests passed) fails pass+ on `inputs`; None: it agrees."""
    if not record:
        return "the step left no record after the tests passed"
    if record.get("error"):
        return str(record["error"])
    observed = record.get("observations")
    if not isinstance(observed, list) or len(observed) != len(inputs.inputs):
        return f"{len(observed) if isinstance(observed, list) else 'no'} observations for {len(inputs.inputs)} inputs"
    wrong = [(i, d) for i, (e, a) in enumerate(zip(inputs.expected, observed, strict=True))
             if (d := disagreement(e, a)) is not None]
    if wrong:
        i, d = wrong[0]
        origin = inputs.origins[i] if i < len(inputs.origins) else "recorded"
        return f"disagrees with the original on {len(wrong)}/{len(observed)} inputs (first: input {i}, {origin}: {d})"
    return None
