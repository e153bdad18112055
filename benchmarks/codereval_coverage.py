"""How much of CoderEval's Python benchmark coderun runs: per project, what is built and which of its CoderEval
tasks are verified, with the reason for each that is not, and the totals per runnable level.

    python benchmarks/codereval_coverage.py [--data DIR] [--markdown] [--projects DIR ...]

Run it after `coderun tasks build --all`. It reads what is built (each project's local environment and
baseline, the task store's outcome of every declared target) and CoderEval's task list (ids and projects,
from results-CodeGen-raw.jsonl); CoderEval's ids are matched to the manifests' `tasks.targets[].aliases`,
never to CoderEval's answers. A task counts as runnable when it is a verified task. Levels are coderun's
analyzer's, not CoderEval's labels. `--markdown` prints the tables for docs/benchmarks.md. Measurement, not product code.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from coderun.config import load_settings
from coderun.manifests.schema import Manifest, known_manifests
from coderun.records import Level, TargetOutcome
from coderun.tasks import store
from coderun.tasks.summary import ProjectSummary, summarize

from _data import add_data_option, codereval_data

NOT_BUILT = "not_built"  # no build of the project has recorded its targets' outcomes
LEVEL_HEADS = {"self_contained": "self", "slib_runnable": "slib", "plib_runnable": "plib",
               "class_runnable": "class", "file_runnable": "file", "project_runnable": "project"}


@dataclass
class Row:
    summary: ProjectSummary
    codereval_projects: list[str]
    total: int = 0
    verified: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    levels: Counter[str] = field(default_factory=Counter)


def codereval_tasks(data: Path) -> dict[str, str]:
    """CoderEval's task ids -> its GitHub project, for every Python task."""
    folder = codereval_data(data, "results-CodeGen-raw.jsonl", "CEPythonRaw.jsonl")
    ids = [json.loads(line)["question_id"] for line in (folder / "CEPythonRaw.jsonl").open()]
    project = {r["_id"]: r["project"] for r in map(json.loads, (folder / "results-CodeGen-raw.jsonl").open())}
    return {i: project.get(i, "?") for i in ids}


def owners(manifests: list[Manifest], ids: dict[str, str]) -> dict[str, Manifest]:
    """CoderEval id -> the manifest that declares it as an alias of a target."""
    return {a: m for m in manifests for t in m.tasks.targets for a in t.aliases if a in ids}


def rows_for(manifests: list[Manifest], ids: dict[str, str], settings) -> list[Row]:
    owner = owners(manifests, ids)
    by_name = {m.name: m for m in owner.values()}
    rows = {}
    for name, m in sorted(by_name.items()):
        mine = sorted({ids[i] for i, o in owner.items() if o.name == name})
        rows[name] = Row(summarize(m, settings), mine)
    outcome: dict[str, TargetOutcome] = {a: o for o in store.target_outcomes(settings) for a in o.aliases}
    level = {t.task_id: t.level.value for t in store.query(settings)}
    for i, m in owner.items():
        row, o = rows[m.name], outcome.get(i)
        row.total += 1
        if o is not None and o.verified and o.task_id in level:
            row.verified += 1
            row.levels[level[o.task_id]] += 1
        else:
            row.reasons[o.reason.value if o is not None and o.reason else NOT_BUILT] += 1
    return list(rows.values())


def table(rows: list[Row]) -> tuple[list[str], list[list[str]]]:
    head = ["project", "CoderEval project", "source", "python", "env", "baseline passed/failed",
            "CoderEval verified/total", "not verified (why)", *LEVEL_HEADS.values()]
    body = []
    for r in rows:
        s = r.summary
        baseline = f"{s.passed}/{s.failed}" if s.env else "–"
        why = ", ".join(f"{n} {k}" for k, n in r.reasons.most_common()) or "–"
        body.append([s.project, " ".join(r.codereval_projects), s.source, s.python, "yes" if s.env else "no",
                     baseline, f"{r.verified}/{r.total}", why, *(str(r.levels[lv]) for lv in LEVEL_HEADS)])
    levels: Counter[str] = sum((r.levels for r in rows), Counter())
    reasons: Counter[str] = sum((r.reasons for r in rows), Counter())
    body.append(["total", "", "", "", f"{sum(r.summary.env for r in rows)}/{len(rows)}", "",
                 f"{sum(r.verified for r in rows)}/{sum(r.total for r in rows)}",
                 ", ".join(f"{n} {k}" for k, n in reasons.most_common()) or "–",
                 *(str(levels[lv]) for lv in LEVEL_HEADS)])
    return head, body


def render(head: list[str], body: list[list[str]], markdown: bool) -> str:
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        return "\n".join(lines + ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in body])
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                     for r in [head, ["-" * w for w in widths], *body])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_option(ap)
    ap.add_argument("--markdown", action="store_true", help="Markdown tables (for docs/benchmarks.md)")
    ap.add_argument("--projects", type=Path, action="append", default=[], help="more manifest folders")
    args = ap.parse_args()
    ids = codereval_tasks(args.data)
    settings = load_settings(args.projects)
    manifests, broken = known_manifests(settings)
    for path, e in broken.items():
        print(f"left out, invalid manifest {path}: {e.message}")
    rows = rows_for(manifests, ids, settings)
    print(render(*table(rows), args.markdown))
    declared = sum(r.total for r in rows)
    runnable = sum(r.verified for r in rows)
    missing: defaultdict[str, int] = defaultdict(int)
    mapped = owners(manifests, ids)
    for i, project in ids.items():
        if i not in mapped:
            missing[project] += 1
    print()
    print(f"CoderEval's {len(ids)} Python tasks: {declared} declared by {len(rows)} manifests, {runnable} runnable "
          f"(verified tasks, {runnable / len(ids):.0%}); {len(ids) - declared} in {len(missing)} projects "
          "without a manifest" + (": " + ", ".join(f"{p} {n}" for p, n in sorted(missing.items())) if missing
                                  else ""))
    levels: Counter[str] = sum((r.levels for r in rows), Counter())
    print("runnable per level: " + ", ".join(f"{lv.value} {levels[lv.value]}" for lv in Level))


if __name__ == "__main__":
    main()
