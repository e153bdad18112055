"""A ranking's summary as reports and `coderun rank` show it: the lift table, its caption, what became of the
model's tests (`metrics.py` makes the figures)."""

from __future__ import annotations

from coderun.rank.records import Lift, RankSummary


def lift_rows(summary: RankSummary) -> tuple[list[str], list[list[str]]]:
    """The lift table: a row per group (overall, then each level), values in %."""
    header = ["group", "tasks", "pass@1", "ranked", "lift", "95% CI", "pass@10 (tasks)"]
    rows = [_row("overall", summary.overall)] + [_row(lv, x) for lv, x in summary.levels.items()]
    return header, rows


def _row(name: str, x: Lift) -> list[str]:
    p10 = f"{100 * x.pass10:.2f} ({x.tasks10})" if x.pass10 is not None else "-"
    return [name, str(x.tasks), f"{100 * x.pass1:.2f}", f"{100 * x.ranked1:.2f}",
            f"{100 * x.lift:+.2f}", f"[{100 * x.lo:+.2f}, {100 * x.hi:+.2f}]", p10]


def caption(summary: RankSummary) -> str:
    return (f"ranked: pass@1 of each task's top sample by --tests {summary.tests.value}; verdicts are the run's "
            f"{summary.rigor} ones; lift = ranked - pass@1, its 95% CI a paired bootstrap over tasks "
            f"(B={summary.iters}, seed {summary.seed}); pass@10 over the tasks with at least 10 samples")


def counts_line(summary: RankSummary) -> str:
    """What became of the tests the model wrote (empty without model tests)."""
    return ("generated tests: " + ", ".join(f"{v} {k}" for k, v in summary.counts.items())) if summary.counts else ""


def markdown(summary: RankSummary) -> str:
    header, rows = lift_rows(summary)
    lines = [f"| {' | '.join(header)} |", "|" + "---|" * len(header)] + [f"| {' | '.join(r)} |" for r in rows]
    notes = [caption(summary)] + [counts_line(summary)] * bool(summary.counts)
    return "\n".join([f"## Ranked pass@1 (--tests {summary.tests.value})", "", *lines, "", "\n\n".join(notes), ""])
