"""Ranking speed: `coderun rank RUN --tests inputs` timed beside the evaluation that made RUN.

    python benchmarks/rank_speed.py RUN [--jobs J] [--keep DIR]

RUN is a finished run folder (an eval with `--rigor plus`, so its tasks carry pass+ inputs). It is copied
first (the original is never written to) and the copy's earlier ranking, if any, is dropped, so every
execution runs. Prints: samples, distinct codes run on inputs, the evaluation's wall time (from its store:
run start to the last verdict) and its -j, the ranking's wall time and -j, their ratio, then the ranked
pass@1 table (pass@1, ranked pass@1, the lift with its 95% interval, pass@10) per level and overall.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime
from pathlib import Path

from coderun.config import load_settings
from coderun.evaluation.store import DB_NAME, RunStore
from coderun.rank.pipeline import RankRequest, rank
from coderun.rank.records import RankTests
from coderun.rank.store import RankStore
from coderun.rank.summary import caption, lift_rows


def eval_seconds(run: Path) -> tuple[float, int]:
    """The evaluation's wall time (run creation to its last verdict, to the second) and its -j."""
    with RunStore.open(run) as store:
        info, last = store.info(), max(r.finished_at for r in store.results())
    wall = datetime.fromisoformat(last) - datetime.fromisoformat(info.created_at)
    return wall.total_seconds(), info.eval_config().jobs


def fresh_copy(run: Path, into: Path) -> Path:
    """A copy of the run without any earlier ranking (its tables and RUN/rank/)."""
    copy = into / run.name
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("rank"))
    with sqlite3.connect(copy / DB_NAME) as db:
        for table in ("rank_executions", "rank_tests", "rankings", "rank_summaries"):
            db.execute(f"DROP TABLE IF EXISTS {table}")
    return copy


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path, help="a finished run folder (made with --rigor plus)")
    ap.add_argument("--jobs", "-j", type=int, default=1, help="samples ranked at once (default 1)")
    ap.add_argument("--keep", type=Path, help="rank the copy here and keep it (default: a temp dir, removed)")
    args = ap.parse_args()
    if not (args.run / DB_NAME).is_file():
        sys.exit(f"{args.run}: not a run folder (no {DB_NAME})")
    eval_wall, eval_jobs = eval_seconds(args.run)
    with tempfile.TemporaryDirectory(prefix="rank-speed-") as tmp:
        where = args.keep or Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        copy = fresh_copy(args.run, where)
        started = time.monotonic()
        out = rank(RankRequest(run_dir=copy, jobs=args.jobs), load_settings())
        rank_wall = time.monotonic() - started
        with RunStore.open(copy) as store:
            samples = store.counts()["samples"]
            statuses = Counter(e.status.value for e in RankStore(store).executions(RankTests.INPUTS).values())
    print(f"run: {args.run} ({samples} samples; {out.executed} distinct codes of tasks with inputs: "
          + ", ".join(f"{n} {s}" for s, n in statuses.most_common()) + ")")
    print(f"evaluation: {eval_wall:.0f} s at -j {eval_jobs}")
    print(f"ranking:    {rank_wall:.0f} s at -j {args.jobs}  ({rank_wall / eval_wall:.2f} of the evaluation)")
    header, rows = lift_rows(out.summary)
    widths = [max(len(x) for x in col) for col in zip(header, *rows, strict=True)]
    for row in [header, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    print(caption(out.summary))


if __name__ == "__main__":
    main()
