"""Reports of runs: aggregation (`aggregate`), paired statistics (`stats`), renderers (`render`, `html`)."""

from coderun.report.aggregate import Comparison, RunReport, build_report, compare

__all__ = ["Comparison", "RunReport", "build_report", "compare"]
