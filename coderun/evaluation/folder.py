"""The input problems of a run, in its folder as `problems.txt` (one a line, only when there are some),
written by `start_run` for `coderun eval` and every `coderun ablate` arm alike. The store writes
`run.sqlite`, `spliced/` and `logs/`; `report.folder` writes `report.json` and `report.md` when a run ends.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

PROBLEMS_FILE = "problems.txt"


def write_problems(run_dir: Path, problems: list[str]) -> Path | None:
    """Every problem into the run folder; None when there is none (no file then)."""
    if not problems:
        return None
    path = run_dir / PROBLEMS_FILE
    path.write_text("\n".join(problems) + "\n", encoding="utf-8")
    return path


def problem_kind(problem: str) -> str:
    """The kind a problem line names (`FILE:LINE: KIND: message`), else "other"."""
    return problem.split(": ", 2)[1] if problem.count(": ") >= 2 else "other"


def problem_kinds(problems: list[str]) -> Counter[str]:
    return Counter(problem_kind(p) for p in problems)
