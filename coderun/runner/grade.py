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

pass+ (plus/grade) is stricter: it can turn this pass into a fail, never anything else into a pass.
"""

from __future__ import annotations

from collections.abc import Sequence

from coderun.records import OUTCOME_RANK, Evidence, Verdict, VerdictKind
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
        return fail(FailureClass(Primary.OTHER, Secondary.TAMPERING), "touched the test machinery: "
                    + "; ".join(f.detail for f in machinery))
    worst: dict[str, str] = {}
    for o in evidence.outcomes:
        if OUTCOME_RANK[o.outcome] >= OUTCOME_RANK.get(worst.get(o.nodeid, "passed"), 0):
            worst[o.nodeid] = o.outcome
    missing = [n for n in expected if n not in worst]
    bad = [(n, worst[n]) for n in expected if n in worst and worst[n] != "passed"]
    if not missing and not bad:
        if evidence.exit_code not in (None, 0):
            return fail(classify(evidence, site),
                        f"every expected test passed but the test process exited with {evidence.exit_code}")
        return Verdict(verdict=VerdictKind.PASS, reason=f"{len(expected)} expected tests passed")
    return fail(classify(evidence, site), _summary(expected, missing, bad))


def grade_unspliceable(kind: str, message: str) -> Verdict:
    """A sample that does not parse, or defines no target, is a syntax failure without running anything."""
    kind = getattr(kind, "value", kind)
    cls = classify_syntax(message) if kind == "syntax" else FailureClass(Primary.SYNTAX, None, message)
    return fail(cls, f"not run ({kind}): {message}")


def fail(cls: FailureClass, reason: str) -> Verdict:
    """A fail of class `cls`, its reason on one line (with the class's detail when the reason lacks it)."""
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
