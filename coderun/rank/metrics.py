"""Ranked pass@1 (the top sample's verdict in the run) beside pass@1 and pass@10, per level and overall,
with a paired bootstrap 95% interval for the lift (ranked pass@1 - pass@1): tasks resampled with
replacement, `ITERS` times, seeded. pass@k is the report's unbiased estimator over the run's graded samples;
pass@10 leaves out tasks with fewer than 10 (reports say how many were used). A task whose top sample has no
graded verdict (infra) is left out of the three figures."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from coderun.evaluation.store import Result
from coderun.rank.records import Lift, RankSummary, RankTests, TaskRanking
from coderun.records import Level, VerdictKind
from coderun.stats import paired_bootstrap, pass_at_k

ITERS = 10000
SEED = 0


def summarize(run_id: str, tests: RankTests, rigor: str, rankings: Sequence[TaskRanking],
              results: Sequence[Result], iters: int = ITERS, seed: int = SEED) -> RankSummary:
    verdicts = {(r.task_id, r.index): r.verdict for r in results}
    rows: dict[str, list[tuple[float, float, float | None]]] = defaultdict(list)
    tops = {}
    for t in rankings:
        graded = [verdicts.get((t.task_id, s.index)) for s in t.samples]
        graded = [v for v in graded if v is not None and v is not VerdictKind.INFRA]
        top = verdicts.get((t.task_id, t.top.index))
        if top is None or top is VerdictKind.INFRA or not graded:
            continue
        tops[t.task_id] = top
        n, c = len(graded), sum(v is VerdictKind.PASS for v in graded)
        row = (c / n, float(top is VerdictKind.PASS), pass_at_k(n, c, 10) if n >= 10 else None)
        rows["overall"].append(row)
        rows[t.level].append(row)
    levels = {lv.value: _lift(rows[lv.value], iters, seed) for lv in Level if rows.get(lv.value)}
    return RankSummary(run_id=run_id, tests=tests, rigor=rigor, iters=iters, seed=seed,
                       overall=_lift(rows["overall"], iters, seed), levels=levels, top_verdicts=tops)


def _lift(rows: list[tuple[float, float, float | None]], iters: int, seed: int) -> Lift:
    if not rows:
        return Lift(tasks=0, pass1=0.0, ranked1=0.0, pass10=None, tasks10=0, lift=0.0, lo=0.0, hi=0.0)
    p1, r1 = [r[0] for r in rows], [r[1] for r in rows]
    p10 = [r[2] for r in rows if r[2] is not None]
    lift, lo, hi = paired_bootstrap(p1, r1, iters=iters, seed=seed)
    return Lift(tasks=len(rows), pass1=sum(p1) / len(p1), ranked1=sum(r1) / len(r1),
                pass10=sum(p10) / len(p10) if p10 else None, tasks10=len(p10), lift=lift, lo=lo, hi=hi)
