"""How many innocent functions the grader-reach flag (coderun.report.reach) fires on: CoderEval's released
CodeGen samples and the built tasks' original functions, per category. Measurement, not product code.

    python benchmarks/grader_reach.py [--data DIR] [--examples N]

The tasks are those stored under CODERUN_HOME (every status). Every flagged sample is a false alarm unless
it really reaches for the grader; --examples prints the first N findings per category to check by eye.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict

from coderun.config import load_settings
from coderun.report.reach import ReachKind, grader_reach
from coderun.tasks import load_tasks

from _data import add_data_option, codereval_data

RESULTS = "results-CodeGen-raw.jsonl"


def _codereval(folder) -> list[tuple[str, str, str]]:
    rows = [json.loads(line) for line in (folder / RESULTS).read_text(encoding="utf-8").splitlines() if line]
    return [(f"{r['_id']}#{i}", code, r["name"]) for r in rows for i, code in enumerate(r["code"])]


def _measure(title: str, items: list[tuple[str, str, str]], examples: int) -> None:
    samples: Counter[ReachKind] = Counter()
    shown: dict[ReachKind, list[str]] = defaultdict(list)
    flagged = 0
    for ident, code, name in items:
        found = grader_reach(code, name)
        flagged += bool(found)
        for kind in {r.kind for r in found}:
            samples[kind] += 1
        for r in found:
            if len(shown[r.kind]) < examples:
                shown[r.kind].append(f"{ident}: {r}")
    print(f"{title}: {flagged} of {len(items)} flagged")
    for kind in ReachKind:
        print(f"  {kind.value:<20} {samples[kind]:>5}")
        for line in shown[kind]:
            print(f"      {line}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_option(ap)
    ap.add_argument("--examples", type=int, default=0, help="findings to print per category")
    args = ap.parse_args()
    _measure(f"CoderEval's CodeGen samples ({RESULTS})", _codereval(codereval_data(args.data, RESULTS)),
             args.examples)
    tasks = load_tasks(load_settings(), status="all")
    _measure("the tasks' original functions", [(t.task_id, t.source, t.name) for t in tasks], args.examples)


if __name__ == "__main__":
    main()
