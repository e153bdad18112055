"""Out-of-process corroboration of the reporter's word that a sample's tests passed.

The reporter runs inside the sample's process, so code written against it can forge its records (write
lines to its channel, drop its own). Before its pass counts, the claim is checked against three things the
test process writes once and cannot take back, each through another path than the records:
- the exit status, seen by the parent: pytest's, and the one the reporter's `finish` record says;
- the order of the records in the channel, an append-only pipe or file: every test that finished began
  first, and the session finished after its last test;
- pytest's summary line on stdout ("9 passed in 0.12s"), made by its terminal reporter from its own tally:
  exactly one (a test's printed output reaches stdout only when it fails, so a second one is a forgery).
A disagreement is a finding of kind `uncorroborated` (machinery: the run fails as tampering). Only a run
that would pass is checked (records saying every expected test passed, exit status 0): a run that fails
anyway needs no second word.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from coderun.records import Finding, FindingKind

# pytest's last line, any version and verbosity: "9 passed in 0.12s", "=== 1 failed, 8 passed, 3 deselected
# in 1.05 seconds ===", "9 passed, 2 warnings in 65.2s (0:01:05)".
_SUMMARY = re.compile(r"^=*\s*((?:\d+ [a-z]+(?:, )?)+) in [\d.]+\s*s(?:econds)?\b")
_COUNT = re.compile(r"(\d+) ([a-z]+)")
_BAD = ("failed", "error", "errors")

MESSAGES = {
    "no_finish": "the reporter's records say every test passed, but the session never finished "
                 "(no finish record) and the process exited 0",
    "status": "the reporter's finish record says exit status {said}, the process exited 0",
    "order": "{nodeid} has a test record without the begin record before it",
    "not_last": "records came after the session's finish record",
    "no_summary": "the reporter's records say {n} tests passed, but pytest printed no summary line",
    "summaries": "pytest's summary line appears {count} times in the output",
    "summary": "the reporter's records say {n} tests passed, pytest's summary line says {line!r}",
}


def corroborate(expected: Sequence[str], records: list[dict], exit_code: int | None,
                stdout: str) -> list[Finding]:
    """Findings where the records' claim that every expected test passed is not borne out (else [])."""
    if exit_code != 0 or not _claims_pass(expected, records):
        return []
    problems = _order(records) + _exit(records) + _summary(len(set(expected)), stdout)
    return [Finding(kind=FindingKind.UNCORROBORATED, detail=p) for p in problems]


def _claims_pass(expected: Sequence[str], records: list[dict]) -> bool:
    outcomes: dict[str, set[str]] = {}
    for rec in records:
        if rec.get("kind") == "test":
            outcomes.setdefault(str(rec.get("nodeid")), set()).add(str(rec.get("outcome")))
    return bool(expected) and all(outcomes.get(n) == {"passed"} for n in expected)


def _order(records: list[dict]) -> list[str]:
    begun: set[str] = set()
    out = []
    for i, rec in enumerate(records):
        kind, nodeid = rec.get("kind"), str(rec.get("nodeid"))
        if kind == "begin":
            begun.add(nodeid)
        elif kind == "test" and nodeid not in begun:
            out.append(MESSAGES["order"].format(nodeid=nodeid))
        elif kind == "finish" and i != len(records) - 1:
            out.append(MESSAGES["not_last"])
    return out


def _exit(records: list[dict]) -> list[str]:
    finish = [r for r in records if r.get("kind") == "finish"]
    if not finish:
        return [MESSAGES["no_finish"]]
    said = finish[-1].get("exitstatus")
    return [MESSAGES["status"].format(said=said)] if said != 0 else []


def _summary(n: int, stdout: str) -> list[str]:
    lines = summary_lines(stdout)
    if not lines:
        return [MESSAGES["no_summary"].format(n=n)]
    if len(lines) > 1:
        return [MESSAGES["summaries"].format(count=len(lines))]
    line = lines[0]
    counts = {word: int(num) for num, word in _COUNT.findall(line)}
    if any(counts.get(word) for word in _BAD) or counts.get("passed", 0) + counts.get("xpassed", 0) < n:
        return [MESSAGES["summary"].format(n=n, line=line)]
    return []


def summary_lines(stdout: str) -> list[str]:
    """The lines of the output shaped as pytest's summary, without their `=` frame."""
    return [line.strip().strip("=").strip() for line in stdout.splitlines() if _SUMMARY.match(line.strip())]
