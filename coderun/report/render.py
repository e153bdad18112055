"""Text renderers of run reports: JSON, Markdown, and rich tables for the terminal."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from coderun.records import RunEnvironment
from coderun.report.aggregate import Comparison, GroupStats, RunReport, sample_rows
from coderun.runner.metrics import CONTEXT_KINDS
from coderun.runner.taxonomy import Primary
from coderun.versions import ENVIRONMENT_FILE

FAILURE_ORDER = [p.value for p in Primary if p is not Primary.INFRASTRUCTURE]


def pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.2f}"


def group_rows(report: RunReport) -> list[tuple[str, GroupStats]]:
    rows = [("overall", report.overall)]
    rows += [(name, g) for name, g in report.levels.items()]
    rows += [("standalone", report.standalone), ("non_standalone", report.non_standalone)]
    return rows


# ------------------------------------------------------------------------------------------ JSON

def to_json(reports: Sequence[RunReport], comparisons: Sequence[Comparison]) -> str:
    docs = [_summary(r) for r in reports]
    if len(docs) == 1:
        return json.dumps(docs[0], indent=2)
    return json.dumps({"runs": docs, "comparisons": [c.model_dump(mode="json") for c in comparisons]}, indent=2)


def _summary(report: RunReport) -> dict[str, Any]:
    doc = report.model_dump(mode="json", by_alias=True)
    for task in doc["tasks"]:
        task.pop("samples")
    return doc


def per_sample_json(reports: Sequence[RunReport]) -> str:
    """One JSON object per line and sample."""
    lines = []
    for row in sample_rows(reports):
        doc = row.model_dump(mode="json")
        if len(reports) == 1:
            doc.pop("run")
        lines.append(json.dumps(doc))
    return "\n".join(lines) + ("\n" if lines else "")


# -------------------------------------------------------------------------------------- Markdown

def to_markdown(reports: Sequence[RunReport], comparisons: Sequence[Comparison]) -> str:
    out: list[str] = []
    for r in reports:
        out += _md_run(r)
    if len(reports) > 1:
        out += _md_side_by_side(reports)
    for c in comparisons:
        out += _md_comparison(c)
    return "\n".join(out) + "\n"


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return lines + ["| " + " | ".join(row) + " |" for row in rows] + [""]


def _md_run(r: RunReport) -> list[str]:
    out = [f"# coderun report: {r.label}", ""]
    meta = f"run `{r.run_id}` ({r.kind}), under-k policy `{r.under_k.value}`, values in %"
    if r.source:
        meta += f", imported from `{r.source}`"
    out += [meta, ""]
    ks = [str(k) for k in r.ks]
    rows = [[name, str(g.tasks), str(g.samples), str(g.infra), *(pct(g.pass_at_k[k]) for k in ks)]
            for name, g in group_rows(r)]
    out += ["## Pass@k", ""] + _md_table(["group", "tasks", "samples", "infra", *(f"pass@{k}" for k in ks)], rows)
    out += _notes(r)
    out += ["## Acc@k", ""]
    if r.overall.acc_at_k is None:
        out += [r.acc_note or "Acc@k unavailable.", ""]
    else:
        rows = [[name, *(pct(g.acc_at_k[k].overall) if g.acc_at_k else "–" for k in ks),
                 *(pct(getattr(g.acc_at_k[ks[-1]], kind)) if g.acc_at_k else "–" for kind in CONTEXT_KINDS)]
                for name, g in group_rows(r)]
        out += _md_table(["group", *(f"acc@{k}" for k in ks), *(f"{kind}@{ks[-1]}" for kind in CONTEXT_KINDS)], rows)
    out += ["## Failures (samples)", ""]
    rows = [[name, str(g.passed), *(str(g.failures.get(f, 0)) for f in FAILURE_ORDER), str(g.infra)]
            for name, g in group_rows(r)]
    out += _md_table(["group", "pass", *FAILURE_ORDER, "infrastructure"], rows)
    if r.overall.failures_detailed:
        out += _md_table(["failure class", "samples"],
                         [[k, str(v)] for k, v in r.overall.failures_detailed.items()])
    return out + _md_environment(r.environment)


def _md_environment(env: RunEnvironment | None) -> list[str]:
    out = ["## Environment", ""]
    if env is None:
        return out + ["Not recorded (an imported run, or one made before coderun recorded versions).", ""]
    c = env.coderun
    out += [f"coderun {c.coderun} on Python {c.python} ({c.implementation}, {c.platform}); "
            f"{ENVIRONMENT_FILE} in the run folder lists the same versions.", ""]
    if c.missing:
        out += ["Required by coderun but not installed: " + ", ".join(f"`{m}`" for m in c.missing), ""]
    out += _md_table([f"coderun's dependencies ({len(c.packages)})", "version"],
                     [[p.name, p.version] for p in c.packages])
    for name, p in sorted(env.projects.items()):
        out += [f"### Project {name}", "", f"{p.backend} environment `{p.where}`, Python {p.python}, "
                f"recorded {p.recorded_at}.", ""]
        out += _md_table([f"installed ({len(p.packages)})", "version"], [[x.name, x.version] for x in p.packages])
    return out


def _notes(r: RunReport) -> list[str]:
    notes = []
    ex = {k: v for k, v in r.overall.excluded_under_k.items() if v}
    if ex:
        notes.append("Tasks left out for having fewer than k graded samples: "
                     + ", ".join(f"{v} at k={k}" for k, v in ex.items()) + " (use `--under-k codereval` "
                     "to count such a task as solved when any of its samples passed).")
    if r.overall.infra:
        notes.append(f"{r.overall.infra} samples hit infrastructure errors; they are left out of pass@k.")
    return [*notes, ""] if notes else []


def _md_side_by_side(reports: Sequence[RunReport]) -> list[str]:
    ks = [str(k) for k in reports[0].ks]
    header = ["group", *(f"{r.label} pass@{k}" for r in reports for k in ks)]
    names = list(dict.fromkeys(name for r in reports for name, _ in group_rows(r)))
    rows = []
    for name in names:
        row = [name]
        for r in reports:
            g = dict(group_rows(r)).get(name)
            row += [pct(g.pass_at_k[k]) if g else "–" for k in ks]
        rows.append(row)
    return ["## Side by side", ""] + _md_table(header, rows)


def _md_comparison(c: Comparison) -> list[str]:
    out = [f"## {c.b} vs {c.a}", "",
           f"{c.common_tasks} common tasks ({c.only_a} only in {c.a}, {c.only_b} only in {c.b}). "
           "Deltas are B − A in percentage points, 95% CI by paired bootstrap over tasks, p by paired "
           "permutation test.", ""]
    out += _md_table(["k", "tasks", c.a, c.b, "delta", "95% CI", "p"],
                     [[str(d.k), str(d.tasks), pct(d.a), pct(d.b), f"{100 * d.delta:+.2f}",
                       f"[{100 * d.lo:+.2f}, {100 * d.hi:+.2f}]", f"{d.p_value:.3g}"] for d in c.deltas])
    for title, flips in ((f"Solved in {c.a}, not in {c.b}", c.solved_in_a_not_b),
                         (f"Solved in {c.b}, not in {c.a}", c.solved_in_b_not_a)):
        out += [f"**{title}** ({len(flips)}):", ""] + [f"- `{t}`" for t in flips] + [""]
    return out


# ---------------------------------------------------------------------------------- rich tables

def to_rich(reports: Sequence[RunReport], comparisons: Sequence[Comparison]) -> Group:
    parts: list[Any] = []
    for r in reports:
        parts += _rich_run(r)
    if len(reports) > 1:
        parts.append(_rich_side_by_side(reports))
    for c in comparisons:
        parts += _rich_comparison(c)
    return Group(*parts)


def _rich_run(r: RunReport) -> list[Any]:
    ks = [str(k) for k in r.ks]
    t = Table(title=f"{r.label} — pass@k and Acc@k (%)", title_justify="left")
    for col in ("group", "tasks", "samples", *(f"pass@{k}" for k in ks)):
        t.add_column(col, justify="left" if col == "group" else "right")
    with_acc = r.overall.acc_at_k is not None
    if with_acc:
        for col in (*(f"acc@{k}" for k in ks), *(f"{kind}@{ks[-1]}" for kind in CONTEXT_KINDS)):
            t.add_column(col, justify="right", style="cyan")
    for name, g in group_rows(r):
        cells = [name, str(g.tasks), str(g.samples), *(pct(g.pass_at_k[k]) for k in ks)]
        if with_acc:
            acc = g.acc_at_k
            cells += [pct(acc[k].overall) if acc else "–" for k in ks]
            cells += [pct(getattr(acc[ks[-1]], kind)) if acc else "–" for kind in CONTEXT_KINDS]
        t.add_row(*cells, style="bold" if name in ("overall", "standalone", "non_standalone") else None)
    f = Table(title="failures (samples)", title_justify="left")
    for col in ("group", "pass", *FAILURE_ORDER, "infra"):
        f.add_column(col, justify="left" if col == "group" else "right")
    for name, g in group_rows(r):
        f.add_row(name, str(g.passed), *(str(g.failures.get(x, 0)) for x in FAILURE_ORDER),
                  Text(str(g.infra), style="red" if g.infra else ""))
    notes = [Text(line, style="dim") for line in _notes(r) if line]
    if not with_acc:
        notes.append(Text(r.acc_note or "Acc@k unavailable", style="dim"))
    return [t, f, *notes, Text("")]


def _rich_side_by_side(reports: Sequence[RunReport]) -> Table:
    ks = [str(k) for k in reports[0].ks]
    t = Table(title="side by side (pass@k %)", title_justify="left")
    t.add_column("group")
    for r in reports:
        for k in ks:
            t.add_column(f"{r.label}\npass@{k}", justify="right")
    names = list(dict.fromkeys(name for r in reports for name, _ in group_rows(r)))
    for name in names:
        row = [name]
        for r in reports:
            g = dict(group_rows(r)).get(name)
            row += [pct(g.pass_at_k[k]) if g else "–" for k in ks]
        t.add_row(*row)
    return t


def _rich_comparison(c: Comparison) -> list[Any]:
    t = Table(title=f"{c.b} − {c.a} (points, paired bootstrap 95% CI)", title_justify="left")
    for col in ("k", "tasks", "A", "B", "delta", "95% CI", "p"):
        t.add_column(col, justify="right")
    for d in c.deltas:
        t.add_row(str(d.k), str(d.tasks), pct(d.a), pct(d.b), f"{100 * d.delta:+.2f}",
                  f"[{100 * d.lo:+.2f}, {100 * d.hi:+.2f}]", f"{d.p_value:.3g}")
    flips = Text(f"solved in {c.a} only: {len(c.solved_in_a_not_b)}; solved in {c.b} only: "
                 f"{len(c.solved_in_b_not_a)}")
    return [t, flips, Text("")]
