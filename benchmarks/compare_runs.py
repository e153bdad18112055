"""Do two eval runs give the same verdicts? Compares every sample both runs graded: verdict and failure class.

    python benchmarks/compare_runs.py BEFORE AFTER [--reasons] [--show N]

BEFORE and AFTER are run folders (e.g. the same samples file evaluated before and after a refactoring, or
with two backends). Prints how many samples each run graded, how many both graded, how many agree on
(verdict, failure class) and, with --reasons, on the reason text too; then the first N disagreements.
Reads run.sqlite directly, so runs written by older versions of coderun compare too. Exits 1 when a
sample both runs graded differs. Measurement, not product code.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from pathlib import Path


def load(run: Path) -> dict[tuple[str, int], tuple[str, str, str]]:
    db = run / "run.sqlite"
    if not db.is_file():
        raise SystemExit(f"{run}: not a run folder (no run.sqlite)")
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT task_id, idx, verdict, COALESCE(failure, ''), COALESCE(reason, '') "
                            "FROM results").fetchall()
    return {(t, i): (v, f, r) for t, i, v, f, r in rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--reasons", action="store_true", help="also compare the reason texts")
    ap.add_argument("--show", type=int, default=20, help="disagreements to list")
    args = ap.parse_args()
    a, b = load(args.before), load(args.after)
    both = sorted(set(a) & set(b))
    width = 3 if args.reasons else 2
    differ = [k for k in both if a[k][:width] != b[k][:width]]
    print(f"graded: before {len(a)}, after {len(b)}, both {len(both)} "
          f"(only before {len(set(a) - set(b))}, only after {len(set(b) - set(a))})")
    what = "verdict, failure class and reason" if args.reasons else "verdict and failure class"
    print(f"same {what}: {len(both) - len(differ)}/{len(both)}; pass before {sum(a[k][0] == 'pass' for k in both)}, "
          f"after {sum(b[k][0] == 'pass' for k in both)}")
    for task_id, idx in differ[: args.show]:
        print(f"  {task_id} #{idx}: {' | '.join(a[(task_id, idx)][:width])}  ->  "
              f"{' | '.join(b[(task_id, idx)][:width])}")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
