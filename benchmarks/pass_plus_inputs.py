"""pass+ inputs of the stored tasks: how many tasks have recorded calls and inputs, and why the others do not.

    python benchmarks/pass_plus_inputs.py [--project P ...]

Reads the task store ($CODERUN_HOME; `coderun tasks build` or `coderun tasks rigor` derive the inputs) and
prints, over the benchmark tasks (verified, and weak ones when their project was built with them): the share
with at least one recorded call, the share with differential inputs, inputs per task (median, over tasks with
inputs, and how many were derived by mutation), what could not be recorded (summed counts), and the most
common reasons a task has none.
"""

from __future__ import annotations

import argparse
import statistics
from collections import Counter

from coderun.config import load_settings
from coderun.tasks import load_tasks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--project", action="append", default=[])
    args = ap.parse_args()
    settings = load_settings()
    tasks = [t for p in (args.project or [None]) for t in load_tasks(settings, project=p, status="verified")]
    derived = [t for t in tasks if t.rigor is not None]
    if not derived:
        raise SystemExit("no task has pass+ inputs derived: run `coderun tasks rigor PROJECT...`")
    recorded = [t for t in derived if t.rigor.recorded]
    with_inputs = [t for t in derived if t.rigor.inputs]
    n = len(derived)
    print(f"benchmark tasks: {len(tasks)} in {len({t.project for t in tasks})} projects; "
          f"pass+ derived for {n}")
    print(f"with at least one recorded call: {len(recorded)} ({100 * len(recorded) / n:.1f}%)")
    print(f"with differential inputs: {len(with_inputs)} ({100 * len(with_inputs) / n:.1f}%)")
    if with_inputs:
        inputs = [t.rigor.inputs for t in with_inputs]
        print(f"inputs per task with inputs: median {statistics.median(inputs):g} (min {min(inputs)}, "
              f"max {max(inputs)}); derived by mutation: {sum(t.rigor.augmented for t in with_inputs)} of "
              f"{sum(inputs)}")
    uncaptured: Counter[str] = Counter()
    for t in derived:
        uncaptured.update(t.rigor.uncaptured)
    print("calls not recorded: " + ", ".join(f"{k} {v}" for k, v in uncaptured.most_common()))
    print(f"recorded calls dropped as nondeterministic: {sum(t.rigor.nondeterministic for t in derived)}")
    why = Counter(_reason(t.rigor.note) for t in derived if not t.rigor.inputs)
    print("why tasks have no inputs:")
    for reason, count in why.most_common(8):
        print(f"  {count:4}  {reason}")


def _reason(note: str) -> str:
    """The note without its task-specific detail (counts, test ids)."""
    head = note.split(" (", 1)[0]
    return head.split(": ", 2)[0] + (": " + head.split(": ", 2)[1] if head.count(": ") else "")


if __name__ == "__main__":
    main()
