"""The service's counters, rendered in Prometheus' text format (GET /metrics)."""

from __future__ import annotations

import json
import threading
from collections import Counter

from coderun.serve.store import Row

# Seconds a judging takes: a fast task's tests take a fraction of a second, a slow project's minutes.
BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


class Metrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.verdicts: Counter[tuple[str, str, str, str]] = Counter()   # (rigor, verdict, failure, source)
        self.buckets = [0] * len(BUCKETS)
        self.count = 0
        self.total = 0.0
        self.retired = 0
        self.rejected: Counter[int] = Counter()                          # by HTTP status

    def answered(self, row: Row | None, *, cached: bool) -> None:
        if row is None or row.judged is None:
            return
        outcome = json.loads(row.judged)["outcome"]
        prefix = "plus" if row.rigor == "plus" else "base"
        key = (row.rigor, outcome[prefix], outcome.get(f"{prefix}_failure") or "",
               "store" if cached else "judged")
        with self._lock:
            self.verdicts[key] += 1

    def judged(self, seconds: float) -> None:
        with self._lock:
            self.count += 1
            self.total += seconds
            for i, b in enumerate(BUCKETS):
                if seconds <= b:
                    self.buckets[i] += 1

    def refused(self, status: int) -> None:
        with self._lock:
            self.rejected[status] += 1

    def mean_judging(self) -> float | None:
        with self._lock:
            return self.total / self.count if self.count else None

    def render(self, *, queue: int, busy: int, slots: int, warm: int) -> str:
        with self._lock:
            lines = [
                "# HELP coderun_serve_queue_depth Judgings accepted and not finished.",
                "# TYPE coderun_serve_queue_depth gauge", f"coderun_serve_queue_depth {queue}",
                "# HELP coderun_serve_workers Executor slots by state, and projects with warm workers.",
                "# TYPE coderun_serve_workers gauge",
                f'coderun_serve_workers{{state="busy"}} {busy}',
                f'coderun_serve_workers{{state="idle"}} {max(0, slots - busy)}',
                f"coderun_serve_warm_projects {warm}",
                "# HELP coderun_serve_retired_pools_total Project pools closed to stay within the warm budget.",
                "# TYPE coderun_serve_retired_pools_total counter",
                f"coderun_serve_retired_pools_total {self.retired}",
                "# HELP coderun_serve_verdicts_total Verdicts answered, by rigor, verdict, failure class and "
                "whether judged or answered from the store.",
                "# TYPE coderun_serve_verdicts_total counter",
            ]
            for (rigor, verdict, failure, source), n in sorted(self.verdicts.items()):
                lines.append(f'coderun_serve_verdicts_total{{rigor="{rigor}",verdict="{verdict}",'
                             f'failure="{failure}",source="{source}"}} {n}')
            lines += ["# HELP coderun_serve_rejected_total Requests answered with a 4xx, by status.",
                      "# TYPE coderun_serve_rejected_total counter"]
            lines += [f'coderun_serve_rejected_total{{status="{s}"}} {n}' for s, n in sorted(self.rejected.items())]
            lines += ["# HELP coderun_serve_judging_seconds Time one judging took (splice, tests, grading).",
                      "# TYPE coderun_serve_judging_seconds histogram"]
            lines += [f'coderun_serve_judging_seconds_bucket{{le="{b}"}} {n}'
                      for b, n in zip(BUCKETS, self.buckets, strict=True)]
            lines += [f'coderun_serve_judging_seconds_bucket{{le="+Inf"}} {self.count}',
                      f"coderun_serve_judging_seconds_sum {self.total:.3f}",
                      f"coderun_serve_judging_seconds_count {self.count}"]
        return "\n".join(lines) + "\n"
