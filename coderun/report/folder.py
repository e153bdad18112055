"""The report files of a run folder, written when a run ends, the same for `coderun eval` and every
`coderun ablate` arm: `report.json` and `report.md` (the input problems are `evaluation.folder`'s)."""

from __future__ import annotations

from collections.abc import Sequence

from coderun.evaluation.store import RunStore
from coderun.report.aggregate import RunReport, build_report
from coderun.report.metrics import UnderK
from coderun.report.render import to_json, to_markdown


def write_reports(store: RunStore, ks: Sequence[int], under_k: UnderK) -> RunReport:
    """The run's report, saved as report.json and report.md in its folder; returns it."""
    report = build_report(store, list(ks), under_k)
    (store.path / "report.json").write_text(to_json([report], []))
    (store.path / "report.md").write_text(to_markdown([report], []))
    return report
