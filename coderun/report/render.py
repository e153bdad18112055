"""Text renderers of run reports: JSON, Markdown, and rich tables for the terminal.

The rich tables stay here, beside the Markdown and JSON of the same report, rather than in coderun/cli/: the
three read the same rows (`group_rows`, `pct`, the notes), and `to_rich` only builds a renderable, it prints
nothing (the CLI prints it on its console). It is the one place outside cli/ that imports rich, with
report/terminal.py (tests/test_no_ui_in_library.py checks it)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from rich.console import Group
from rich.text import Text

from coderun.envs.versions import ENVIRONMENT_FILE
from coderun.rank.summary import caption as rank_caption
from coderun.rank.summary import lift_rows
from coderun.rank.summary import markdown as rank_markdown
from coderun.records import RunEnvironment
from coderun.report.aggregate import Comparison, GroupStats, RunReport, SampleRow, sample_rows
from coderun.report.metrics import CONTEXT_KINDS
from coderun.report.terminal import EMPTY, Fit, drop_columns, empty_columns, make_table
from coderun.runner.taxonomy import Primary

FAILURE_ORDER = [p.value for p in Primary if p is not Primary.INFRASTRUCTURE]


def pct(value: float | None) -> str:
    return EMPTY if value is None else f"{100 * value:.2f}"


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
    if r.environment is not None and r.environment.isolation:
        meta += f", isolation: {r.environment.isolation}"
    if r.source:
        meta += f", imported from `{r.source}`"
    out += [meta, ""]
    ks = [str(k) for k in r.ks]
    rows = [[name, str(g.tasks), str(g.samples), str(g.infra), *(pct(g.pass_at_k[k]) for k in ks)]
            for name, g in group_rows(r)]
    out += ["## Pass@k", ""] + _md_table(["group", "tasks", "samples", "infra", *(f"pass@{k}" for k in ks)], rows)
    out += _notes(r)
    plus = plus_table(r)
    if plus:
        out += ["## pass+ (the project's tests, and agreeing with the original on the differential inputs)", "",
                *_md_table(*plus), plus_counts(r), "", PLUS_NOTE, ""]
    out += [line for summary in r.ranking for line in rank_markdown(summary).splitlines()] + [""] * bool(r.ranking)
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
    return out + _md_reach(r) + _md_environment(r.environment)


PLUS_NOTE = ("pass+ counts a pass only when the sample also did what the original did on every differential "
             "input of its task; an overturned pass fails as functional/differential. Tasks without inputs keep "
             "their verdict.")


def plus_table(r: RunReport) -> tuple[list[str], list[list[str]]] | None:
    """(header, rows) of pass@k beside pass+@k per group; None for a run made before pass+."""
    if r.overall.plus is None:
        return None
    ks = [str(k) for k in r.ks]
    head = ["group", *(f"pass@{k}" for k in ks), *(f"pass+@{k}" for k in ks)]
    rows = [[name, *(pct(g.plus.pass_at_k[k]) for k in ks), *(pct(g.plus.plus_at_k[k]) for k in ks)]
            for name, g in group_rows(r) if g.plus is not None]
    return head, rows


def plus_counts(r: RunReport) -> str:
    """One line: what the differential step checked and overturned over the whole run."""
    p = r.overall.plus
    if p is None:
        return ""
    share = f" ({pct(p.overturned_share)}%)" if p.overturned_share is not None else ""
    return (f"pass+: {p.checked_tasks} tasks with differential inputs, {p.unchecked_tasks} without; "
            f"{p.overturned} of {p.passed} project-test passes overturned{share}.")


def _md_reach(r: RunReport) -> list[str]:
    """The samples whose code reaches for the grader: information, the verdicts come from the run."""
    rows = [[f"`{s.task_id}`", str(s.sample), s.verdict.value, reach_text(s)]
            for t in r.tasks for s in t.samples if s.grader_reach]
    if not rows:
        return []
    return ["## Samples that reach for the grader", "",
            f"{len(rows)} samples name the test machinery or walk the process (static reading of the code; "
            "their verdicts come from the run, not from this list).", "",
            *_md_table(["task", "sample", "verdict", "reaches for"], rows)]


def reach_text(s: SampleRow) -> str:
    """One line: `frame walk: sys._getframe (line 3); ...`."""
    return "; ".join(f"{g.kind.value}: {g.move} (line {g.line})" for g in s.grader_reach)


def _md_environment(env: RunEnvironment | None) -> list[str]:
    out = ["## Environment", ""]
    if env is None:
        return out + ["Not recorded (an imported run, or one made before coderun recorded versions).", ""]
    c = env.coderun
    out += [f"coderun {c.coderun} on Python {c.python} ({c.implementation}, {c.platform}); "
            f"{ENVIRONMENT_FILE} in the run folder lists the same versions.", ""]
    if env.isolation:
        out += [f"Isolation of the samples: **{env.isolation}** ({env.isolation_note}).", ""]
    if c.missing:
        out += ["Required by coderun but not installed: " + ", ".join(f"`{m}`" for m in c.missing), ""]
    out += _md_table([f"coderun's dependencies ({len(c.packages)})", "version"],
                     [[p.name, p.version] for p in c.packages])
    for name, p in sorted(env.projects.items()):
        source = f" Source: {p.source.kind} at `{p.source.commit}`, from {p.source.origin}." if p.source else ""
        out += [f"### Project {name}", "", f"{p.backend} environment `{p.where}`, Python {p.python}, "
                f"recorded {p.recorded_at}.{source}", ""]
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
    notes += task_notes(r)
    return [*notes, ""] if notes else []


def task_notes(r: RunReport) -> list[str]:
    """What the task build found about the run's tasks' tests: written for the benchmark, blind to return
    values, or dependent on the network (every report format shows these)."""
    notes = []
    supplementary = [t.task_id for t in r.tasks if t.supplementary]
    if supplementary:
        notes.append(f"{len(supplementary)} tasks are tested (also) by supplementary tests written for this "
                     f"benchmark, not by their project's own: {', '.join(supplementary)}.")
    weak = [t for t in r.tasks if t.pass_stub_passes or "weak" in t.flags]
    if weak:
        passed = sum(t.c for t in weak)
        notes.append(f"{len(weak)} tasks are weak: their tests pass with the body replaced by `pass` or `raise` "
                     f"(they do not check what the function returns), counted only with --include-weak; {passed} "
                     f"passing samples are on them: {', '.join(t.task_id for t in weak)}.")
    trivial = [t for t in r.tasks if any(f.startswith("trivial:") for f in t.flags) and t not in weak]
    if trivial:
        notes.append(f"{len(trivial)} tasks are trivial: other bodies that do no work pass their tests, counted "
                     f"only with --include-weak or when pass+ fails those bodies; {sum(t.c for t in trivial)} "
                     "passing samples are on them: "
                     + "; ".join(f"{t.task_id} ({', '.join(t.flags)})" for t in trivial) + ".")
    network = [t for t in r.tasks if t.network_tests]
    if network:
        notes.append(f"{len(network)} tasks are environment-dependent: some of their tests tried to reach the "
                     "network in the task build, so their outcome may depend on the network the sandbox has: "
                     + "; ".join(f"{t.task_id} ({', '.join(t.network_tests)})" for t in network) + ".")
    return notes


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

def to_rich(reports: Sequence[RunReport], comparisons: Sequence[Comparison], wide: bool = False) -> Group:
    """Tables for the terminal. By default the columns without any value are left out and each table takes
    the layout that fits the terminal (one table, or pass@k and Acc@k stacked); `wide` gives every column in
    one table, to print at its natural width (`terminal.print_wide`)."""
    parts: list[Any] = []
    for r in reports:
        parts += _rich_run(r, wide)
    if len(reports) > 1:
        parts.append(_rich_side_by_side(reports, wide))
    for c in comparisons:
        parts += _rich_comparison(c)
    return Group(*parts)


BOLD_GROUPS = ("overall", "standalone", "non_standalone")


def _score_columns(r: RunReport) -> tuple[list[str], list[list[str]], list[str], list[list[str]]]:
    """(header, rows) of pass@k and of Acc@k, groups in the first column (Acc@k: empty when unavailable)."""
    ks = [str(k) for k in r.ks]
    groups = group_rows(r)
    p_head = ["group", "tasks", "samples", *(f"pass@{k}" for k in ks)]
    p_rows = [[name, str(g.tasks), str(g.samples), *(pct(g.pass_at_k[k]) for k in ks)] for name, g in groups]
    if r.overall.acc_at_k is None:
        return p_head, p_rows, [], []
    a_head = ["group", *(f"acc@{k}" for k in ks)]
    a_rows = [[name, *(pct(g.acc_at_k[k].overall) if g.acc_at_k else EMPTY for k in ks)] for name, g in groups]
    # the recall per kind of name at the largest k that has values (Markdown: at the largest k)
    with_values = [k for i, k in enumerate(ks) if any(row[1 + i] != EMPTY for row in a_rows)]
    kk = with_values[-1] if with_values else ks[-1]
    a_head += [f"{kind}@{kk}" for kind in CONTEXT_KINDS]
    for row, (_, g) in zip(a_rows, groups, strict=True):
        row += [pct(getattr(g.acc_at_k[kk], kind)) if g.acc_at_k else EMPTY for kind in CONTEXT_KINDS]
    return p_head, p_rows, a_head, a_rows


def _rich_run(r: RunReport, wide: bool) -> list[Any]:
    p_head, p_rows, a_head, a_rows = _score_columns(r)
    styles = ["bold" if row[0] in BOLD_GROUPS else None for row in p_rows]
    has_acc = bool(a_head)
    hidden: list[str] = []
    if not wide:
        p_drop, a_drop = empty_columns(p_rows, 3), empty_columns(a_rows, 1)
        hidden = [p_head[i] for i in sorted(p_drop)] + [a_head[i] for i in sorted(a_drop)]
        p_head, p_rows = drop_columns(p_head, p_rows, p_drop)
        a_head, a_rows = drop_columns(a_head, a_rows, a_drop)
    with_acc = len(a_head) > 1
    title = f"{r.label} — pass@k and Acc@k (%)" if with_acc else f"{r.label} — pass@k (%)"
    one = make_table(p_head + a_head[1:], [p + a[1:] for p, a in zip(p_rows, a_rows, strict=True)]
                     if with_acc else p_rows, title=title, styles=styles)
    if wide or not with_acc:
        scores: Any = one
    else:
        scores = Fit(one, Group(make_table(p_head, p_rows, title=f"{r.label} — pass@k (%)", styles=styles),
                                Text(""),
                                make_table(a_head, a_rows, title=f"{r.label} — Acc@k (%)", styles=styles)))
    groups = group_rows(r)
    f = make_table(["group", "pass", *FAILURE_ORDER, "infra"],
                   [[name, str(g.passed), *(str(g.failures.get(x, 0)) for x in FAILURE_ORDER),
                     Text(str(g.infra), style="red" if g.infra else "")] for name, g in groups],
                   title="failures (samples)", styles=styles)
    notes = [Text(line, style="dim") for line in _notes(r) if line]
    if not has_acc:
        notes.append(Text(r.acc_note or "Acc@k unavailable", style="dim"))
    if hidden:
        notes.append(Text(f"Columns without values are not shown ({', '.join(hidden)}); --wide shows every "
                          "column.", style="dim"))
    plus = plus_table(r)
    extra = []
    if plus:
        head, rows = plus if wide else drop_columns(*plus, empty_columns(plus[1], 1))
        extra = [Text(""), make_table(head, rows, title=f"{r.label} — pass@k and pass+@k (%)", styles=styles),
                 Text(plus_counts(r)), Text(PLUS_NOTE, style="dim")]
    for summary in r.ranking:
        extra += [Text(""), make_table(*lift_rows(summary), title=f"{r.label} — ranked pass@1 (%)"),
                  Text(rank_caption(summary), style="dim")]
    return [scores, *extra, Text(""), f, *([Text(""), *notes] if notes else []), Text("")]


def _rich_side_by_side(reports: Sequence[RunReport], wide: bool) -> Any:
    ks = [str(k) for k in reports[0].ks]
    names = list(dict.fromkeys(name for r in reports for name, _ in group_rows(r)))
    by_run = [dict(group_rows(r)) for r in reports]
    cells = {(name, i, k): pct(g[name].pass_at_k[k]) if name in g else EMPTY
             for name in names for i, g in enumerate(by_run) for k in ks}
    if not wide:
        ks = [k for k in ks if any(cells[name, i, k] != EMPTY for name in names for i in range(len(reports)))]
    one = make_table(["group", *(f"{r.label}\npass@{k}" for r in reports for k in ks)],
                     [[name, *(cells[name, i, k] for i in range(len(reports)) for k in ks)] for name in names],
                     title="side by side (pass@k %)")
    if wide:
        return one
    per_k = [make_table(["group", *(r.label for r in reports)],
                        [[name, *(cells[name, i, k] for i in range(len(reports)))] for name in names],
                        title=f"side by side: pass@{k} (%)") for k in ks]
    return Fit(one, Group(*(part for t in per_k for part in (t, Text(""))))) if per_k else one


def _rich_comparison(c: Comparison) -> list[Any]:
    t = make_table(["k", "tasks", "A", "B", "delta", "95% CI", "p"],
                   [[str(d.k), str(d.tasks), pct(d.a), pct(d.b), f"{100 * d.delta:+.2f}",
                     f"[{100 * d.lo:+.2f}, {100 * d.hi:+.2f}]", f"{d.p_value:.3g}"] for d in c.deltas],
                   title=f"{c.b} − {c.a} (points, paired bootstrap 95% CI)", left=())
    flips = Text(f"solved in {c.a} only: {len(c.solved_in_a_not_b)}; solved in {c.b} only: "
                 f"{len(c.solved_in_b_not_a)}")
    return [t, flips, Text("")]
