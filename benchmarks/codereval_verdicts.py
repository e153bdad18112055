"""How coderun's verdicts agree with CoderEval's own, per project, on CoderEval's released samples.

    coderun eval --samples ../shared/codereval/results-CodeGen-raw.jsonl     # prints the run folder
    python benchmarks/codereval_verdicts.py RUN [RUN...] [--groups]

RUN is a run folder or id (several runs, e.g. one per set of projects, are counted together). Each sample of a CoderEval results file keeps CoderEval's verdict as metadata
(`codereval_is_pass`); this prints, per project, how many samples both call a pass or a fail and how many
they disagree on, then (with --groups) every disagreement group: one CoderEval task and one direction, with
coderun's failure classes and the first failing test to explain it. Measurement, not product code.
"""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict

from coderun.config import load_settings
from coderun.evaluation.store import RunStore, resolve_run_dir

HEAD = ("project", "samples", "both pass", "both fail", "only coderun passes", "only CoderEval passes",
        "agree %")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="run folder or run id of an eval over a CoderEval results file")
    ap.add_argument("--groups", action="store_true", help="list every disagreement group")
    args = ap.parse_args()
    projects, samples, results = {}, {}, []
    for run in args.runs:
        with RunStore.open(resolve_run_dir(run, load_settings())) as store:
            projects.update({t.task_id: t.project for t in store.tasks()})
            samples.update({(s.task_id, s.index): s for s in store.samples()})
            results += store.results()
    table: dict[str, Counter[str]] = defaultdict(Counter)
    groups: dict[tuple, list[str]] = defaultdict(list)
    for r in results:
        s = samples.get((r.task_id, r.index))
        theirs = s.metadata.get("codereval_is_pass") if s else None
        if not isinstance(theirs, bool):
            continue
        ours = r.verdict.value == "pass"
        project = projects.get(r.task_id, "?")
        key = {(True, True): "both pass", (False, False): "both fail", (True, False): "only coderun passes",
               (False, True): "only CoderEval passes"}[(ours, theirs)]
        table[project][key] += 1
        if ours != theirs:
            groups[(project, s.metadata.get("input_id"), key)].append((r.failure or r.verdict.value, r.reason))
    rows = []
    for project, c in sorted(table.items()):
        n = sum(c.values())
        rows.append([project, n, c["both pass"], c["both fail"], c["only coderun passes"],
                     c["only CoderEval passes"], f"{100 * (c['both pass'] + c['both fail']) / n:.1f}"])
    total = Counter()
    for c in table.values():
        total.update(c)
    n = sum(total.values())
    if n:
        rows.append(["all", n, total["both pass"], total["both fail"], total["only coderun passes"],
                     total["only CoderEval passes"], f"{100 * (total['both pass'] + total['both fail']) / n:.1f}"])
    print("| " + " | ".join(HEAD) + " |")
    print("|" + "---|" * len(HEAD))
    for row in rows:
        print("| " + " | ".join(map(str, row)) + " |")
    if args.groups:
        print(f"\n{len(groups)} disagreement groups (project, CoderEval id, direction: samples, coderun's classes; "
              "a reason)")
        for (project, cid, key), got in sorted(groups.items(), key=lambda kv: (kv[0][0], -len(kv[1]))):
            classes = ", ".join(f"{c} {n}" for c, n in Counter(c for c, _ in got).most_common())
            print(f"- {project} {cid} {key}: {len(got)} ({classes}); {got[0][1][:150]}")


if __name__ == "__main__":
    main()
