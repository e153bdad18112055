"""The HTML report: one self-contained file (inline CSS, charts as inline SVG drawn with matplotlib).

Sections: pass@k per level (bars), Acc@k by context kind, failure taxonomy per level (stacked bars),
side by side and ablation deltas with 95% CIs when several runs are given, per-task flips, a per-task
table whose sample chips link to the spliced file (relative to the HTML file) and show the test log's
last lines, and the environment (coderun's and each project's installed versions, folded).
"""

from __future__ import annotations

import html
import io
import os
import re
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from coderun.envs.versions import ENVIRONMENT_FILE  # noqa: E402
from coderun.rank.summary import caption as rank_caption  # noqa: E402
from coderun.rank.summary import counts_line, lift_rows  # noqa: E402
from coderun.records import Package, VerdictKind  # noqa: E402
from coderun.report.aggregate import Comparison, RunReport, TaskRow, report_files  # noqa: E402
from coderun.report.metrics import CONTEXT_KINDS  # noqa: E402
from coderun.report.render import FAILURE_ORDER, group_rows, pct, reach_text, task_notes  # noqa: E402

PALETTE = {"pass": "#2e7d32", "syntax": "#8e24aa", "runtime": "#e65100", "functional": "#c62828",
           "timeout": "#f9a825", "other": "#757575", "infra": "#1565c0"}
K_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]
LOG_LINES = 30

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1200px;color:#222}
h1{font-size:1.6em;margin-bottom:4px} h2{margin-top:32px;border-bottom:1px solid #ddd;padding-bottom:4px}
.meta{color:#666;font-size:.9em} .mark{font-size:.75em;background:#fde9c8;border-radius:3px;padding:0 4px} .note{color:#555;font-size:.9em;background:#f6f6f6;padding:6px 10px;border-radius:4px}
table{border-collapse:collapse;margin:8px 0;font-size:.9em} th,td{border:1px solid #ddd;padding:3px 8px}
th{background:#f0f0f0} td.num{text-align:right;font-variant-numeric:tabular-nums}
.charts{display:flex;flex-wrap:wrap;gap:12px} .chart{flex:0 1 580px;max-width:760px} .chart svg{width:100%;height:auto}
.chip{display:inline-block;min-width:16px;padding:0 4px;margin:1px;border-radius:3px;color:#fff;font-size:.8em;
text-align:center;text-decoration:none} .chip.pass{background:#2e7d32} .chip.fail{background:#c62828}
.chip.infra{background:#1565c0} .chip.top{box-shadow:0 0 0 2px #222;font-weight:bold} .chip.reach{outline:2px dashed #ef6c00;outline-offset:1px} details pre{background:#111;color:#eee;padding:8px;overflow:auto;max-height:320px;font-size:.8em}
.pos{color:#2e7d32} .neg{color:#c62828}
"""


def to_html(reports: Sequence[RunReport], comparisons: Sequence[Comparison], out_path: Path | None = None) -> str:
    base = out_path.parent if out_path else Path.cwd()
    title = " vs ".join(r.label for r in reports)
    body = [f"<h1>coderun report: {_e(title)}</h1>"]
    for r in reports:
        body += _run_section(r, len(reports) > 1)
    if len(reports) > 1:
        body += _side_by_side(reports)
    for c in comparisons:
        body += _comparison_section(c)
    for r in reports:
        body += _task_table(r, base)
    for r in reports:
        body += _environment_section(r, len(reports) > 1)
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>coderun report: {_e(title)}</title><style>{CSS}</style></head><body>"
            + "\n".join(body) + "</body></html>\n")


def _e(text: object) -> str:
    return html.escape(str(text))


def _svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    return re.sub(r"<metadata>.*?</metadata>", "", text[text.index("<svg"):], flags=re.S)


def _chart(svg: str, caption: str) -> str:
    return f'<div class="chart"><figure>{svg}<figcaption class="meta">{_e(caption)}</figcaption></figure></div>'


def _run_section(r: RunReport, several: bool) -> list[str]:
    head = f"<h2>{_e(r.label)}</h2>" if several else ""
    meta = (f'<p class="meta">run <code>{_e(r.run_id)}</code> ({_e(r.kind)}) · under-k policy '
            f'<code>{_e(r.under_k.value)}</code> · {r.overall.tasks} tasks, {r.overall.samples} graded samples, '
            f"{r.overall.infra} infrastructure errors (left out of pass@k)"
            + (f" · imported from <code>{_e(r.source)}</code>" if r.source else "") + "</p>")
    charts = [_chart(_pass_chart(r), "pass@k per level (%)"), _chart(_taxonomy_chart(r), "outcomes per level (samples)")]
    if r.overall.acc_at_k is not None:
        charts.insert(1, _chart(_acc_chart(r), "Acc@k by context kind (%)"))
    notes = [f'<p class="note">{_e(r.acc_note)}</p>'] if r.acc_note else []
    excluded = {k: v for k, v in r.overall.excluded_under_k.items() if v}
    if excluded:
        notes.append('<p class="note">Left out of pass@k for having fewer than k graded samples: '
                     + ", ".join(f"{v} tasks at k={k}" for k, v in excluded.items()) + "</p>")
    notes += [f'<p class="note">{_e(line)}</p>' for line in task_notes(r)]
    return [head, meta, _summary_table(r), *_ranking_tables(r), *notes, f'<div class="charts">{"".join(charts)}</div>']


def _ranking_tables(r: RunReport) -> list[str]:
    """`coderun rank`'s ranked pass@1 beside pass@1 and pass@10, one table per kind of tests ranked on."""
    out = []
    for summary in r.ranking:
        header, rows = lift_rows(summary)
        out.append(f"<h3>ranked pass@1 (%), --tests {_e(summary.tests.value)}</h3><table><tr>"
                   + "".join(f"<th>{_e(h)}</th>" for h in header) + "</tr>"
                   + "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows)
                   + f'</table><p class="note">{_e(rank_caption(summary))} {_e(counts_line(summary))}</p>')
    return out


def _summary_table(r: RunReport) -> str:
    ks = [str(k) for k in r.ks]
    head = "".join(f"<th>pass@{k}</th>" for k in ks)
    acc = r.overall.acc_at_k is not None
    if acc:
        head += "".join(f"<th>acc@{k}</th>" for k in ks)
    rows = []
    for name, g in group_rows(r):
        cells = "".join(f'<td class="num">{pct(g.pass_at_k[k])}</td>' for k in ks)
        if acc:
            cells += "".join(f'<td class="num">{pct(g.acc_at_k[k].overall) if g.acc_at_k else "–"}</td>' for k in ks)
        fails = " ".join(f"{f} {g.failures[f]}" for f in FAILURE_ORDER if g.failures.get(f))
        rows.append(f"<tr><td>{_e(name)}</td><td class=num>{g.tasks}</td><td class=num>{g.samples}</td>{cells}"
                    f"<td class=num>{g.infra}</td><td>{_e(fails)}</td></tr>")
    return (f"<table><tr><th>group</th><th>tasks</th><th>samples</th>{head}<th>infra</th><th>failures</th></tr>"
            + "".join(rows) + "</table>")


def _pass_chart(r: RunReport) -> str:
    rows = group_rows(r)[1:]
    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    width = 0.8 / len(r.ks)
    for i, k in enumerate(r.ks):
        values = [g.pass_at_k[str(k)] for _, g in rows]
        _bars(ax, [j + i * width for j in range(len(rows))], values, width, f"pass@{k}", K_COLORS[i % len(K_COLORS)])
    ax.set_xticks([j + width * (len(r.ks) - 1) / 2 for j in range(len(rows))],
                  [name.replace("_", "\n") for name, _ in rows], fontsize=7)
    ax.set_ylabel("%")
    _legend(ax)
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig)


def _legend(ax, **where: object) -> None:
    """The chart's legend, when something in it has a label: with every value n/a there is none, and
    matplotlib would warn on the user's terminal."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, frameon=False, **where)


def _bars(ax, xs: list[float], values: list[float | None], width: float, label: str, color: str) -> None:
    """Bars in percent; a value that could not be computed (None) is marked n/a, never drawn as 0."""
    shown = [(x, 100 * v) for x, v in zip(xs, values, strict=True) if v is not None]
    if shown:
        bars = ax.bar([x for x, _ in shown], [v for _, v in shown], width, label=label, color=color)
        ax.bar_label(bars, fmt="%.1f", fontsize=6)
    for x, v in zip(xs, values, strict=True):
        if v is None:
            ax.text(x, 0, "n/a", ha="center", va="bottom", fontsize=5, rotation=90, color="#999")


def _acc_chart(r: RunReport) -> str:
    acc = r.overall.acc_at_k or {}
    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    kinds = ["overall", *CONTEXT_KINDS]
    width = 0.8 / len(r.ks)
    for i, k in enumerate(r.ks):
        a = acc.get(str(k))
        values = [getattr(a, kind) if a else None for kind in kinds]
        _bars(ax, [j + i * width for j in range(len(kinds))], values, width, f"acc@{k}", K_COLORS[i % len(K_COLORS)])
    ax.set_xticks([j + width * (len(r.ks) - 1) / 2 for j in range(len(kinds))],
                  ["overall", "types", "APIs", "variables"], fontsize=8)
    ax.set_ylabel("% of oracle tokens")
    _legend(ax)
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig)


def _taxonomy_chart(r: RunReport) -> str:
    rows = group_rows(r)
    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    names = [name for name, _ in rows][::-1]
    left = [0.0] * len(rows)
    for cls in ["pass", *FAILURE_ORDER, "infra"]:
        values = [float(g.passed if cls == "pass" else g.infra if cls == "infra" else g.failures.get(cls, 0))
                  for _, g in rows][::-1]
        if any(values):
            ax.barh(names, values, left=left, color=PALETTE[cls], label=cls)
            left = [a + b for a, b in zip(left, values, strict=True)]
    ax.tick_params(axis="y", labelsize=7)
    ax.set_xlabel("samples")
    _legend(ax, ncol=7, loc="upper center", bbox_to_anchor=(0.5, -0.18))
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig)


def _side_by_side(reports: Sequence[RunReport]) -> list[str]:
    k = str(reports[0].ks[0])
    names = [name for name, _ in group_rows(reports[0])]
    fig, ax = plt.subplots(figsize=(9, 3.4))
    width = 0.8 / len(reports)
    for i, r in enumerate(reports):
        groups = dict(group_rows(r))
        values = [100 * ((groups[n].pass_at_k[k] or 0) if n in groups else 0) for n in names]
        ax.bar([j + i * width for j in range(len(names))], values, width, label=r.label,
               color=K_COLORS[i % len(K_COLORS)])
    ax.set_xticks([j + width * (len(reports) - 1) / 2 for j in range(len(names))],
                  [n.replace("_", "\n") for n in names], fontsize=7)
    ax.set_ylabel(f"pass@{k} %")
    _legend(ax)
    ax.spines[["top", "right"]].set_visible(False)
    return ["<h2>Side by side</h2>", f'<div class="charts">{_chart(_svg(fig), f"pass@{k} per group and run")}</div>']


def _comparison_section(c: Comparison) -> list[str]:
    out = [f"<h2>{_e(c.b)} vs {_e(c.a)}</h2>",
           f'<p class="meta">{c.common_tasks} common tasks ({c.only_a} only in {_e(c.a)}, {c.only_b} only in '
           f"{_e(c.b)}); delta = B − A in points, 95% CI by paired bootstrap over tasks, p by paired permutation test</p>"]
    if c.deltas:
        fig, ax = plt.subplots(figsize=(5.5, 2.6))
        ys = list(range(len(c.deltas)))
        deltas = [100 * d.delta for d in c.deltas]
        errs = [[100 * (d.delta - d.lo) for d in c.deltas], [100 * (d.hi - d.delta) for d in c.deltas]]
        ax.errorbar(deltas, ys, xerr=errs, fmt="o", color="#333", capsize=4)
        ax.axvline(0, color="#999", lw=1)
        ax.set_yticks(ys, [f"pass@{d.k}" for d in c.deltas])
        ax.set_xlabel("delta (points)")
        ax.spines[["top", "right"]].set_visible(False)
        rows = "".join(
            f"<tr><td>pass@{d.k}</td><td class=num>{d.tasks}</td><td class=num>{pct(d.a)}</td><td class=num>{pct(d.b)}</td>"
            f'<td class="num {"pos" if d.delta > 0 else "neg" if d.delta < 0 else ""}">{100 * d.delta:+.2f}</td>'
            f"<td class=num>[{100 * d.lo:+.2f}, {100 * d.hi:+.2f}]</td><td class=num>{d.p_value:.3g}</td></tr>"
            for d in c.deltas)
        out.append(f'<div class="charts"><div class="chart"><table><tr><th>metric</th><th>tasks</th><th>{_e(c.a)}</th>'
                   f"<th>{_e(c.b)}</th><th>delta</th><th>95% CI</th><th>p</th></tr>{rows}</table></div>"
                   f"{_chart(_svg(fig), 'ablation delta with 95% CI')}</div>")
    for title, flips in ((f"solved in {c.a}, not in {c.b}", c.solved_in_a_not_b),
                         (f"solved in {c.b}, not in {c.a}", c.solved_in_b_not_a)):
        items = "".join(f"<li><code>{_e(t)}</code></li>" for t in flips) or "<li>none</li>"
        out.append(f"<details><summary>{_e(title)}: {len(flips)}</summary><ul>{items}</ul></details>")
    return out


def _task_table(r: RunReport, base: Path) -> list[str]:
    ks = [str(k) for k in r.ks]
    rows = [_task_row(r, t, ks, base) for t in r.tasks]
    head = "".join(f"<th>pass@{k}</th>" for k in ks)
    return [f"<h2>Tasks of {_e(r.label)}</h2>",
            '<p class="meta">chips: one per sample (green pass, red fail, blue infrastructure; a dashed orange '
            "outline: its code reaches for the grader, information only; a dark ring and bold: the sample `coderun "
            "rank` put first); hover for the "
            "failure class and reason, click to open the spliced file; the log excerpt is the last lines of the "
            "first failing sample's test log</p>",
            f"<table><tr><th>task</th><th>level</th><th>n</th><th>c</th>{head}<th>samples</th><th>log</th></tr>"
            + "".join(rows) + "</table>"]


def _task_row(r: RunReport, t: TaskRow, ks: list[str], base: Path) -> str:
    chips = []
    excerpt = ""
    for s in t.samples:
        spliced, log = report_files(r, s)
        label = s.verdict.value if s.verdict is not VerdictKind.FAIL else (s.failure or "fail")
        reach = f"\nreaches for the grader: {reach_text(s)}" if s.grader_reach else ""
        title = _e(f"#{s.sample} {label}: {s.reason}{reach}")
        href = f' href="{_e(_link(spliced, base))}"' if spliced and spliced.exists() else ""
        top = [tests for tests, index in t.top_ranked.items() if index == s.sample]
        kind = s.verdict.value + (" reach" if s.grader_reach else "") + (" top" if top else "")
        if top:
            title += _e(f"\ntop-ranked by coderun rank --tests {', '.join(top)}")
        chips.append(f'<a class="chip {kind}" title="{title}"{href}>{s.sample}</a>')
        if not excerpt and s.verdict is VerdictKind.FAIL and log and log.is_file():
            lines = log.read_text(encoding="utf-8", errors="replace").splitlines()[-LOG_LINES:]
            excerpt = (f"<details><summary>#{s.sample} log</summary><pre>{_e(chr(10).join(lines))}</pre>"
                       f'<a href="{_e(_link(log, base))}">full log</a></details>')
    cells = "".join(f'<td class="num">{pct(t.pass_at_k[k])}</td>' for k in ks)
    marks = "".join(f' <span class="mark" title="{_e(why)}">{label}</span>' for label, why in _marks(t))
    return (f"<tr><td><code>{_e(t.task_id)}</code>{marks}</td><td>{_e(t.level)}</td><td class=num>{t.n}</td>"
            f"<td class=num>{t.c}</td>{cells}<td>{''.join(chips)}</td><td>{excerpt}</td></tr>")


def _marks(t: TaskRow) -> list[tuple[str, str]]:
    """(label, why) for what the task build found about the task's tests."""
    out = []
    if t.supplementary:
        out.append(("supplementary", "tested by tests written for this benchmark"))
    if t.pass_stub_passes or "weak" in t.flags:
        out.append(("weak", "its tests pass with the body replaced by `pass` or `raise`"))
    out += [(f, "its tests pass with these bodies that do no work") for f in t.flags if f.startswith("trivial:")]
    if t.network_tests:
        out.append(("env-dependent", "tests that tried to reach the network: " + ", ".join(t.network_tests)))
    return out


def _link(path: Path, base: Path) -> str:
    try:
        return Path(os.path.relpath(path.resolve(), base.resolve())).as_posix()
    except ValueError:
        return path.resolve().as_uri()


def _environment_section(r: RunReport, several: bool) -> list[str]:
    out = [f"<h2>Environment{f' of {_e(r.label)}' if several else ''}</h2>"]
    env = r.environment
    if env is None:
        return out + ['<p class="note">Not recorded (an imported run, or one made before coderun recorded '
                      "versions).</p>"]
    c = env.coderun
    out.append(f'<p class="meta">coderun {_e(c.coderun)} on Python {_e(c.python)} ({_e(c.implementation)}, '
               f"{_e(c.platform)}); <code>{ENVIRONMENT_FILE}</code> in the run folder lists the same versions</p>")
    if env.isolation:
        out.append(f'<p class="meta">isolation of the samples: <b>{_e(env.isolation)}</b> ({_e(env.isolation_note)})</p>')
    if c.missing:
        out.append('<p class="note">Required by coderun but not installed: '
                   + ", ".join(f"<code>{_e(m)}</code>" for m in c.missing) + "</p>")
    out.append(_packages(f"coderun's dependencies ({len(c.packages)})", c.packages))
    for name, p in sorted(env.projects.items()):
        out.append(_packages(f"project {name}: {p.backend}, Python {p.python}, {len(p.packages)} installed", p.packages,
                             f"{p.backend} environment <code>{_e(p.where)}</code>, recorded {_e(p.recorded_at)}"
                             + (f"; source: {_e(p.source.kind)} at <code>{_e(p.source.commit)}</code>, from "
                                f"{_e(p.source.origin)}" if p.source else "")))
    return out


def _packages(title: str, packages: list[Package], meta: str = "") -> str:
    rows = "".join(f"<tr><td>{_e(p.name)}</td><td>{_e(p.version)}</td></tr>" for p in packages)
    meta = f'<p class="meta">{meta}</p>' if meta else ""
    return (f"<details><summary>{_e(title)}</summary>{meta}<table><tr><th>package</th><th>version</th></tr>"
            f"{rows}</table></details>")
