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

# pytest's summary line as its terminal reporter builds it, 4.6 to 9.x (tests/pytest_outputs holds what each
# minor version prints): "no tests ran", or ", "-joined items "<count> <category>", the categories pytest's
# own (failed, passed, skipped, deselected, xfailed, xpassed, warning(s), error(s), subtests passed/failed/
# skipped) or any a plugin reports (pytest-rerunfailures' "rerun"); then " in 0.12s" (4.x: "in 0.12 seconds";
# from a minute on "(0:01:05)", from a day "(1 day, 0:00:05)"), framed by "=" unless -q.
_ITEM = r"\d+ [^\d\s,][^,]*?"
_SUMMARY = re.compile(rf"^=*\s*(?P<items>no tests ran|{_ITEM}(?:, {_ITEM})*) in \d+(?:\.\d+)?(?:s| seconds)"
                      r"(?: \((?:\d+ days?, )?\d+:\d\d:\d\d\))?\s*=*$")
_COUNT = re.compile(r"^(\d+) (.+)$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")   # a project's PY_COLORS=1 colours the line
_SINGULAR = {"warning": "warnings", "errors": "error"}   # pytest prints its keys "warnings", "error" by count

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
    counts = summary_counts(lines[0])
    failing = any(count for key, count in counts.items() if key in ("failed", "error")
                  or key.endswith((" failed", " error")))
    if failing or counts.get("passed", 0) + counts.get("xpassed", 0) < n:
        return [MESSAGES["summary"].format(n=n, line=lines[0])]
    return []


def summary_lines(stdout: str) -> list[str]:
    """The lines of the output shaped as pytest's summary, without their `=` frame and colours."""
    lines = (_ANSI.sub("", line).strip() for line in stdout.splitlines())
    return [line.strip("=").strip() for line in lines if _SUMMARY.match(line)]


def summary_counts(line: str) -> dict[str, int]:
    """The counts of a summary line by pytest's category ("1 warning" and "2 warnings" are both `warnings`,
    "1 error" and "2 errors" `error`); {} for "no tests ran" or a line that is not a summary."""
    match = _SUMMARY.match(line)
    if match is None or match["items"] == "no tests ran":
        return {}
    counts: dict[str, int] = {}
    for item in match["items"].split(", "):
        num, key = _COUNT.match(item).groups()
        key = _SINGULAR.get(key, key)
        counts[key] = counts.get(key, 0) + int(num)
    return counts
