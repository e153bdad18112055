"""The verdict: one pure function of (the tests a task expects, the evidence of a sample's run).

Nothing else in coderun decides pass or fail. The rules:
- the sandbox broke (`evidence.infra_error`) -> `infra`: neither pass nor fail, left out of pass@k;
- the task expects no test -> `infra` too: there is nothing to grade on, and it is not the sample's fault;
- the run hit its time limit -> `fail` (`timeout`);
- the run changed the test machinery (a test file or conftest changed or created, a pytest plugin registered,
  pytest's or unittest's reporting replaced: the findings in `Evidence.tampering` whose kind is machinery,
  see `records.FindingKind`) -> `fail` (`other/tampering`), whatever the outcomes say, since those are the
  very outcomes such a change could forge; other findings (another module changed) do not decide;
- every expected test (each node id that passed on the baseline) must appear in the structured report and
  have passed; a missing, skipped, failed or errored test is a `fail`. When the report names a node id
  more than once (e.g. a call failure and a teardown error), every entry must be a pass;
- all expected tests passed but the test process, seen from outside, exited non-zero -> `fail`: something
  the sample did broke the run after the tests (an exit hook, a crash at shutdown);
- otherwise `pass`.
The failure class of a `fail` comes from `runner.taxonomy.classify`.

pass+ (`grade_plus`) is stricter: a pass must also do what the original does on the task's differential
inputs (tasks/inputs), compared on the host with what the original did (runner/differential); a pass without the
step's record, or with fewer observations than inputs, is not one (the sample stopped the step), and any
disagreement fails it as `functional/differential`. A task without inputs keeps its verdict.
"""

from __future__ import annotations

from collections.abc import Sequence

from coderun.records import OUTCOME_RANK, Evidence, TaskInputs, Verdict, VerdictKind
from coderun.runner.differential import disagreement
from coderun.runner.taxonomy import FailureClass, Primary, Secondary, SpliceSite, classify, classify_syntax


def grade(expected: Sequence[str], evidence: Evidence, site: SpliceSite | None = None) -> Verdict:
    """pass / fail / infra for one sample (see the module docstring)."""
    if evidence.infra_error:
        return Verdict(verdict=VerdictKind.INFRA, failure=Primary.INFRASTRUCTURE.value,
                       reason=f"sandbox error: {evidence.infra_error}")
    if not expected:
        return Verdict(verdict=VerdictKind.INFRA, failure=Primary.INFRASTRUCTURE.value,
                       reason="the task expects no test: nothing to grade on")
    if evidence.timed_out:
        return Verdict(verdict=VerdictKind.FAIL, failure=Primary.TIMEOUT.value,
                       reason=f"timed out after {evidence.duration:.1f}s")
    machinery = evidence.machinery()
    if machinery:  # decided by the findings' kinds; the reason quotes their words
        return _fail(FailureClass(Primary.OTHER, Secondary.TAMPERING), "touched the test machinery: "
                     + "; ".join(f.detail for f in machinery))
    worst: dict[str, str] = {}
    for o in evidence.outcomes:
        if OUTCOME_RANK[o.outcome] >= OUTCOME_RANK.get(worst.get(o.nodeid, "passed"), 0):
            worst[o.nodeid] = o.outcome
    missing = [n for n in expected if n not in worst]
    bad = [(n, worst[n]) for n in expected if n in worst and worst[n] != "passed"]
    if not missing and not bad:
        if evidence.exit_code not in (None, 0):
            return _fail(classify(evidence, site),
                         f"every expected test passed but the test process exited with {evidence.exit_code}")
        return Verdict(verdict=VerdictKind.PASS, reason=f"{len(expected)} expected tests passed")
    return _fail(classify(evidence, site), _summary(expected, missing, bad))


def grade_plus(base: Verdict, inputs: TaskInputs | None, evidence: Evidence | None) -> Verdict:
    """The pass+ verdict: `base` (from `grade`), unless it is a pass the differential step overturns."""
    if base.verdict is not VerdictKind.PASS or inputs is None or not inputs.inputs:
        return base
    record = evidence.differential if evidence is not None else None
    why = differential_failure(inputs, record)
    if why is not None:
        return _fail(FailureClass(Primary.FUNCTIONAL, Secondary.DIFFERENTIAL), f"differential: {why}")
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


def grade_unspliceable(kind: str, message: str) -> Verdict:
    """A sample that does not parse, or defines no target, is a syntax failure without running anything."""
    kind = getattr(kind, "value", kind)
    cls = classify_syntax(message) if kind == "syntax" else FailureClass(Primary.SYNTAX, None, message)
    return _fail(cls, f"not run ({kind}): {message}")


def _fail(cls: FailureClass, reason: str) -> Verdict:
    detail = f"; {cls.detail}" if cls.detail and cls.detail not in reason else ""
    return Verdict(verdict=VerdictKind.FAIL, failure=cls.label, reason=_one_line(reason + detail))


def _summary(expected: Sequence[str], missing: list[str], bad: list[tuple[str, str]]) -> str:
    parts = []
    if bad:
        first, outcome = bad[0]
        parts.append(f"{len(bad)}/{len(expected)} expected tests did not pass (first: {first} {outcome})")
    if missing:
        parts.append(f"{len(missing)} expected tests did not run (first: {missing[0]})")
    return "; ".join(parts)


def _one_line(text: str, limit: int = 400) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
