"""Trivial bodies against the project's tests and against pass+: which does each let through?

    python benchmarks/trivial_bodies.py [--project P ...] [--backend local|docker] [--jobs J]

For every stored benchmark task (of the given projects), the trivial bodies the task build verifies with
(raise, none, first_arg, empty, constant; the last two from what the original returned on its differential
inputs) are evaluated as samples with `coderun eval --rigor plus`. Prints, per body: the samples, how many pass
the project's tests (base), how many pass pass+, and how many of the base passes pass+ catches; then the
tasks whose tests let some body through and whether pass+ caught it there. Nothing is compared with a stored
answer: every verdict comes from the run, whose folder is printed.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import textwrap
from collections import Counter
from pathlib import Path

from coderun.config import load_settings
from coderun.evaluation.evaluate import EvalRequest, execute, start_run
from coderun.evaluation.store import RunStore
from coderun.records import VerdictKind
from coderun.tasks import load_tasks
from coderun.tasks.store import load_inputs
from coderun.tasks.trivial import NAMES, bodies_for


def samples(tasks, inputs) -> list[dict]:
    out = []
    for t in tasks:
        recorded = inputs[t.task_id].expected if t.task_id in inputs else []
        decorators = [line.strip() for line in t.source.splitlines() if line.strip().startswith("@")]
        header = textwrap.dedent(t.signature).rstrip()
        for name, statement in bodies_for(t.signature, t.class_name, decorators, recorded):
            out.append({"task_id": t.task_id, "solution": f"{header}\n    {statement}\n", "body": name})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--project", action="append", default=[])
    ap.add_argument("--backend", choices=["local", "docker"], default="local")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--run-dir", type=Path, default=None)
    args = ap.parse_args()
    settings = load_settings()
    tasks = [t for p in (args.project or [None]) for t in load_tasks(settings, project=p, status="verified")]
    if not tasks:
        raise SystemExit("no built task: build some with `coderun tasks build <project>`")
    inputs = load_inputs(settings, [t.task_id for t in tasks])
    rows = samples(tasks, inputs)
    run_dir = args.run_dir or Path(tempfile.mkdtemp(prefix="coderun-trivial-")) / "run"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trivial.jsonl"
        path.write_text("".join(json.dumps({"task_id": r["task_id"], "solution": r["solution"]}) + "\n"
                                for r in rows))
        req = EvalRequest(samples=path, backend=args.backend, jobs=args.jobs, run_dir=run_dir, rigor="plus",
                          label="trivial bodies")
        store, _ = start_run(req, settings, tasks)
        execute(store, settings)
    with RunStore.open(run_dir) as st:
        body_of = {(s.task_id, s.index): rows[int(s.metadata["line"]) - 1]["body"] for s in st.samples()}
        results = {(r.task_id, r.index): r for r in st.results()}
    report(body_of, results, {t.task_id for t in tasks if t.task_id in inputs and inputs[t.task_id].inputs})
    print(f"run folder: {run_dir}")


def report(body_of: dict, results: dict, checked: set[str]) -> None:
    total, base, plus, caught = Counter(), Counter(), Counter(), Counter()
    through: dict[str, list[str]] = {}
    for key, r in results.items():
        body = body_of[key]
        total[body] += 1
        if r.rigor is None or r.verdict is VerdictKind.INFRA:
            continue
        base[body] += r.rigor.base is VerdictKind.PASS
        plus[body] += r.rigor.plus is VerdictKind.PASS
        if r.rigor.base is VerdictKind.PASS:
            caught[body] += r.rigor.plus is not VerdictKind.PASS
            through.setdefault(key[0], []).append(f"{body}{'' if r.rigor.plus is VerdictKind.PASS else ' (caught)'}")
    print(f"{'body':10} {'samples':>7} {'base pass':>9} {'pass+ pass':>10} {'caught':>6}")
    for body in NAMES:
        if total[body]:
            print(f"{body:10} {total[body]:7} {base[body]:9} {plus[body]:10} {caught[body]:6}")
    print(f"tasks whose project tests let a trivial body through: {len(through)} "
          f"({sum(t in checked for t in through)} with differential inputs)")
    for task_id, bodies in sorted(through.items()):
        print(f"  {task_id}: {', '.join(bodies)}{'' if task_id in checked else '  [no inputs]'}")


if __name__ == "__main__":
    main()
