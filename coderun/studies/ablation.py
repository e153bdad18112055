"""Context-ablation studies: one arm per (context variant, docstring), one comparison across the arms.

Each arm goes prompts -> samples -> run through the ordinary stages (coderun.prompts, coderun.generate,
coderun.evaluation.evaluate), or starts from a samples file produced elsewhere. Everything lands in one
folder a person can open:

    <out>/ablation.json               the plan (arms, model, sampling, task selection); a re-run must match it
    <out>/prompts/<arm>.jsonl         prompts of a generated arm
    <out>/samples/<arm>.jsonl         its samples (+ <arm>.raw.jsonl, the server's responses)
    <out>/runs/<arm>/                 its run folder (`coderun report <out>/runs/<arm>` reads it)
    <out>/comparison.json, .md        the comparison

Resume: re-running with the same folder keeps the prompts, generates only the missing samples, reuses
a finished run and continues an unfinished one (`execute` on its store, as `coderun eval --resume`).
Each arm's run folder is written as `coderun eval` writes one (problems.txt, report.json, report.md).

The comparison takes the first arm as the baseline. Per group (overall and every runnable level) it gives
each arm's pass@k and Acc@k, and for every other arm the pass@k difference over the tasks both arms
scored, with a paired bootstrap 95% CI over tasks and a paired permutation test (both from
`report.aggregate.compare`). Acc@k is pooled over context tokens, not a mean over tasks, so its
difference is shown as a point value without an interval.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from coderun.choices import Backend
from coderun.config import Settings
from coderun.errors import GenerationError, StoreError, TaskError, UsageError
from coderun.evaluation.evaluate import EvalRequest, execute, start_run
from coderun.evaluation.store import DB_NAME, Result, RunStore, new_run_id
from coderun.events import Counted, Listener, Note, silent
from coderun.generate import GenerationConfig, Provider, run_generation
from coderun.prompts import (
    PromptRecord,
    PromptSpec,
    build_prompts,
    parse_context,
    read_prompts,
    write_prompts,
)
from coderun.prompts.checkouts import checkout_resolver
from coderun.prompts.records import variant_name
from coderun.records import Level, Task, VerdictKind
from coderun.report.aggregate import Comparison, RunReport, compare
from coderun.report.folder import write_reports
from coderun.report.metrics import UnderK
from coderun.report.render import pct

DOCSTRINGS = ("original", "human")


# ------------------------------------------------------------------------------------------ arms

@dataclass(frozen=True)
class Arm:
    """One side of the comparison: a context variant and docstring to generate, or a given samples file."""

    label: str
    context: str | None = None
    docstring: str | None = None
    samples: Path | None = None

    @property
    def slug(self) -> str:
        return re.sub(r"[^A-Za-z0-9._-]+", "_", self.label).strip("_") or "arm"


def arms_from_variants(variants: Sequence[str], docstrings: Sequence[str] = ("original",)) -> list[Arm]:
    """Every (variant, docstring) combination, variants outermost; the first is the baseline."""
    for d in docstrings:
        if d not in DOCSTRINGS:
            raise UsageError(f"--docstring takes original and/or human, not {d!r}")
    for v in variants:
        parse_context(v)                       # unknown variant -> UsageError naming the known ones
    arms = [Arm(variant_name(v, d), v, d) for v in variants for d in docstrings]
    return _checked(arms)


def arms_from_samples(pairs: Sequence[str]) -> list[Arm]:
    """`VARIANT=FILE` pairs, in the order given; VARIANT is the arm's label."""
    arms = []
    for pair in pairs:
        label, sep, file = pair.partition("=")
        if not sep or not label.strip() or not file.strip():
            raise UsageError(f"--samples takes VARIANT=FILE (e.g. oracle=samples-oracle.jsonl), got {pair!r}")
        path = Path(file.strip()).expanduser()
        if not path.is_file():
            raise UsageError(f"--samples {label}: no such file {path}")
        arms.append(Arm(label.strip(), samples=path.resolve()))
    return _checked(arms)


def _checked(arms: list[Arm]) -> list[Arm]:
    if len(arms) < 2:
        raise UsageError(f"an ablation compares at least two arms; got {len(arms)}",
                         hint="give two or more variants (--variants none,oracle) or --samples pairs")
    seen: dict[str, str] = {}
    for a in arms:
        if a.slug in seen:
            raise UsageError(f"arms {seen[a.slug]!r} and {a.label!r} are the same (or share a folder name)")
        seen[a.slug] = a.label
    return arms


# ------------------------------------------------------------------------------------------ plan

class ArmSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    label: str
    context: str | None
    docstring: str | None
    samples: str | None


class AblationPlan(BaseModel):
    """What fixes an ablation's results; a re-run in the same folder must ask for the same."""

    model_config = ConfigDict(extra="forbid")

    arms: list[ArmSpec]
    model: str | None = None
    endpoint: str | None = None
    n: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    projects: list[str] = Field(default_factory=list)
    level: str | None = None
    backend: Backend = Backend.LOCAL


@dataclass(frozen=True)
class AblationRequest:
    arms: tuple[Arm, ...]
    out_dir: Path
    generation: GenerationConfig | None = None        # None: every arm has a samples file
    provider: Callable[[], Provider] | None = None    # opens a provider for the generated arms
    projects: tuple[str, ...] = ()
    level: Level | None = None
    backend: Backend = Backend.LOCAL
    jobs: int = 2
    ks: tuple[int, ...] = (1, 5, 10)
    under_k: UnderK = UnderK.EXCLUDE

    def __post_init__(self) -> None:
        generated = [a for a in self.arms if a.samples is None]
        if generated and (self.generation is None or self.provider is None):
            raise UsageError(f"arm {generated[0].label!r} needs generation: give --model and --base-url")

    def plan(self) -> AblationPlan:
        g = self.generation
        arms = [ArmSpec(label=a.label, context=a.context, docstring=a.docstring,
                        samples=str(a.samples) if a.samples else None) for a in self.arms]
        gen = {} if g is None or all(a.samples for a in self.arms) else dict(
            model=g.model, endpoint=g.endpoint.value, n=g.n, temperature=g.temperature, top_p=g.top_p,
            max_tokens=g.max_tokens)
        return AblationPlan(arms=arms, projects=sorted(self.projects),
                            level=self.level.value if self.level else None, backend=self.backend, **gen)


def default_out_dir(settings: Settings) -> Path:
    return settings.home / "ablations" / new_run_id("ablation")


def check_plan(out_dir: Path, plan: AblationPlan) -> bool:
    """Write the plan, or check it against the one already there; True when resuming."""
    path = out_dir / "ablation.json"
    if path.is_file():
        try:
            old = AblationPlan.model_validate_json(path.read_text(encoding="utf-8"))
        except ValueError as e:
            raise StoreError(f"{path} is not an ablation plan: {e}") from None
        differ = [k for k in AblationPlan.model_fields if getattr(old, k) != getattr(plan, k)]
        if differ:
            raise UsageError(f"{out_dir} holds an ablation with different {', '.join(differ)} "
                             f"(was {', '.join(f'{k}={getattr(old, k)!r}' for k in differ)})",
                             hint="resume with the same options, or pick another --out-dir")
        return True
    out_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(plan.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return False


# ------------------------------------------------------------------------------------ running arms

@dataclass
class ArmOutcome:
    arm: Arm
    run_dir: Path
    samples: Path
    prompts: Path | None = None
    skipped: list[tuple[str, str]] = field(default_factory=list)   # tasks without a prompt, and why
    generated: int = 0
    reused_run: bool = False


def select_tasks(settings: Settings, projects: Sequence[str], level: Level | None) -> list[Task]:
    tasks = [t for p in (projects or [None]) for t in _load(settings, p, level)]
    if not tasks:
        where = (f" in {', '.join(projects)}" if projects else "") + (f" at level {level.value}" if level else "")
        raise TaskError(f"no stored tasks{where}",
                        hint="build them with `coderun tasks build PROJECT`; `coderun tasks list` shows them")
    return tasks


def _load(settings: Settings, project: str | None, level: Level | None) -> list[Task]:
    from coderun.tasks import load_tasks

    return load_tasks(settings, project=project, level=level)


def run_arm(arm: Arm, req: AblationRequest, settings: Settings, tasks: list[Task],
            on_event: Listener = silent) -> ArmOutcome:
    out = req.out_dir
    outcome = ArmOutcome(arm, out / "runs" / arm.slug, arm.samples or out / "samples" / f"{arm.slug}.jsonl")
    if arm.samples is None:
        outcome.prompts = out / "prompts" / f"{arm.slug}.jsonl"
        prompts = _prompts(arm, outcome, settings, tasks)
        outcome.generated = _generate(arm, req, prompts, outcome.samples, on_event)
    outcome.reused_run = _evaluate(arm, req, settings, tasks, outcome, on_event)
    return outcome


def _prompts(arm: Arm, outcome: ArmOutcome, settings: Settings, tasks: list[Task]) -> list[PromptRecord]:
    """The arm's prompts, built once; a re-run reads the file so resumed samples answer the same prompts."""
    assert outcome.prompts is not None and arm.context and arm.docstring
    if outcome.prompts.is_file():
        return read_prompts(outcome.prompts)
    built = build_prompts(tasks, checkout_resolver(settings),
                          PromptSpec(context=arm.context, docstring=arm.docstring))  # type: ignore[arg-type]
    outcome.skipped = built.skipped
    if not built.records:
        raise UsageError(f"arm {arm.label}: none of the {len(tasks)} tasks has a prompt "
                         f"({built.skipped[0][1] if built.skipped else 'no tasks'})",
                         hint="human docstrings come from manifests (human_docstring) or "
                         "`coderun prompts --human-docstrings`")
    write_prompts(built.records, outcome.prompts)
    return built.records


def _generate(arm: Arm, req: AblationRequest, prompts: list[PromptRecord], samples: Path,
              on_event: Listener) -> int:
    assert req.generation is not None and req.provider is not None
    on_event(Note(arm.label, f"generating {req.generation.n} samples for {len(prompts)} prompts"))
    with req.provider() as provider:
        summary = run_generation(prompts, provider, req.generation, samples, on_event=on_event)
    if summary.errors:
        raise GenerationError(f"arm {arm.label}: {summary.pending - summary.written} samples not generated: "
                              f"{summary.errors[0]}", hint="re-run the same command to resume")
    return summary.written


def _evaluate(arm: Arm, req: AblationRequest, settings: Settings, tasks: list[Task], outcome: ArmOutcome,
              on_event: Listener) -> bool:
    """Run (or finish) the arm's evaluation; True when a finished run was reused as it was."""
    store = _open_or_start(arm, req, settings, tasks, outcome.run_dir, outcome.samples)
    with store:
        todo = _unfinished(store)
        if not todo:
            return True
        on_event(Note(arm.label, f"evaluating {todo} samples in {store.path}"))
        summary = execute(store, settings, jobs=req.jobs, progress=_EvalProgress(arm.label, todo, on_event).tick)
        if summary.infra:
            on_event(Note(arm.label, f"{summary.infra} samples hit infrastructure errors; re-run to retry them",
                          "warning"))
    return False


def _open_or_start(arm: Arm, req: AblationRequest, settings: Settings, tasks: list[Task], run_dir: Path,
                   samples: Path) -> RunStore:
    if (run_dir / DB_NAME).is_file():
        store = RunStore.open(run_dir)
        if store.samples():
            return store
        store.close()                    # killed between creating the store and adding its samples
        shutil.rmtree(run_dir)
    req_eval = EvalRequest(samples=samples, projects=req.projects, level=req.level, backend=req.backend,
                           jobs=req.jobs, run_dir=run_dir, label=arm.label)
    store, _ = start_run(req_eval, settings, tasks)
    return store


def _unfinished(store: RunStore) -> int:
    graded = {(r.task_id, r.index) for r in store.results() if r.verdict is not VerdictKind.INFRA}
    return sum(1 for s in store.samples() if (s.task_id, s.index) not in graded)


class _EvalProgress:
    """An arm's evaluation as `Counted` events: samples graded, and how many passed."""

    def __init__(self, subject: str, total: int, on_event: Listener):
        self.subject, self.total, self.on_event = subject, total, on_event
        self.done = self.ok = 0
        on_event(Counted(subject, 0, total, "samples", "0 pass"))

    def tick(self, result: Result) -> None:
        self.done += 1
        self.ok += result.verdict is VerdictKind.PASS
        self.on_event(Counted(self.subject, self.done, self.total, "samples", f"{self.ok} pass"))


def run_ablation(req: AblationRequest, settings: Settings, tasks: list[Task] | None = None, *,
                 on_event: Listener = silent) -> tuple[AblationComparison, list[ArmOutcome]]:
    """Every arm through generation and evaluation, then the comparison, saved in the out dir."""
    tasks = tasks if tasks is not None else select_tasks(settings, req.projects, req.level)
    outcomes = [run_arm(arm, req, settings, tasks, on_event) for arm in req.arms]
    reports = []
    for o in outcomes:
        with RunStore.open(o.run_dir) as store:    # the arm's report files, as `coderun eval` writes them
            reports.append(write_reports(store, req.ks, req.under_k))
    comparison = compare_arms(reports, [str(o.run_dir) for o in outcomes])
    save_comparison(comparison, req.out_dir)
    return comparison, outcomes


# ------------------------------------------------------------------------------------ comparison

class Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid")


class ArmGroup(Model):
    """One arm's numbers in one group (overall or a level)."""

    tasks: int
    samples: int
    pass_at_k: dict[str, float | None] = Field(alias="pass@k")
    acc_at_k: dict[str, float | None] | None = Field(alias="acc@k")


class ArmSummary(Model):
    label: str
    run_dir: str
    groups: dict[str, ArmGroup]


class ArmDeltas(Model):
    """An arm against the baseline, per group: pass@k deltas with CIs, Acc@k point deltas."""

    label: str
    groups: dict[str, Comparison]
    acc_delta: dict[str, dict[str, float | None]]       # group -> k -> Acc@k(arm) - Acc@k(baseline)


class AblationComparison(Model):
    baseline: str
    ks: list[int]
    under_k: UnderK
    groups: list[str]                 # "overall", then the levels present, in level order
    arms: list[ArmSummary]
    deltas: list[ArmDeltas]


def compare_arms(reports: Sequence[RunReport], run_dirs: Sequence[str]) -> AblationComparison:
    base = reports[0]
    present = {lv for r in reports for lv in r.levels}
    groups = ["overall", *(lv.value for lv in Level if lv.value in present)]
    arms = [ArmSummary(label=r.label, run_dir=d, groups={g: _arm_group(r, g) for g in groups if _stats(r, g)})
            for r, d in zip(reports, run_dirs, strict=True)]
    deltas = [ArmDeltas(label=r.label, groups={g: compare(_restrict(base, g), _restrict(r, g)) for g in groups},
                        acc_delta={g: _acc_delta(arms[0], arm, g, base.ks) for g in groups})
              for r, arm in zip(reports[1:], arms[1:], strict=True)]
    return AblationComparison(baseline=base.label, ks=list(base.ks), under_k=base.under_k, groups=groups,
                              arms=arms, deltas=deltas)


def _stats(report: RunReport, group: str):
    return report.overall if group == "overall" else report.levels.get(group)


def _arm_group(report: RunReport, group: str) -> ArmGroup:
    g = _stats(report, group)
    acc = {k: a.overall for k, a in g.acc_at_k.items()} if g.acc_at_k else None
    return ArmGroup(tasks=g.tasks, samples=g.samples, pass_at_k=dict(g.pass_at_k), acc_at_k=acc)


def _restrict(report: RunReport, group: str) -> RunReport:
    """The report with only one level's task rows: what `compare` pairs and resamples."""
    if group == "overall":
        return report
    return report.model_copy(update={"tasks": [t for t in report.tasks if t.level == group]})


def _acc_delta(base: ArmSummary, arm: ArmSummary, group: str, ks: Sequence[int]) -> dict[str, float | None]:
    a, b = base.groups.get(group), arm.groups.get(group)
    out: dict[str, float | None] = {}
    for k in map(str, ks):
        va = a.acc_at_k.get(k) if a and a.acc_at_k else None
        vb = b.acc_at_k.get(k) if b and b.acc_at_k else None
        out[k] = vb - va if va is not None and vb is not None else None
    return out


def save_comparison(c: AblationComparison, out_dir: Path) -> None:
    (out_dir / "comparison.json").write_text(c.model_dump_json(indent=2, by_alias=True) + "\n", encoding="utf-8")
    (out_dir / "comparison.md").write_text(to_markdown(c), encoding="utf-8")


# ------------------------------------------------------------------------------------- rendering

def _points(v: float | None, digits: int = 2) -> str:
    return "–" if v is None else f"{100 * v:+.{digits}f}"


def value_rows(c: AblationComparison) -> list[list[str]]:
    """group, arm, tasks, samples, pass@k..., acc@k... (percent)."""
    ks = [str(k) for k in c.ks]
    rows = []
    for g in c.groups:
        for arm in c.arms:
            s = arm.groups.get(g)
            if s is None:
                continue
            acc = [pct(s.acc_at_k.get(k)) if s.acc_at_k else "–" for k in ks]
            rows.append([g, arm.label, str(s.tasks), str(s.samples), *(pct(s.pass_at_k.get(k)) for k in ks), *acc])
    return rows


def delta_rows(c: AblationComparison, digits: int = 2) -> list[list[str]]:
    """group, arm, k, tasks, baseline, arm, delta, 95% CI, p, Acc@k delta (points)."""
    rows = []
    for g in c.groups:
        for arm in c.deltas:
            for d in arm.groups[g].deltas:
                rows.append([g, arm.label, str(d.k), str(d.tasks), pct(d.a), pct(d.b), _points(d.delta, digits),
                             f"[{_points(d.lo, digits)}, {_points(d.hi, digits)}]", f"{d.p_value:.2g}",
                             _points(arm.acc_delta[g].get(str(d.k)), digits)])
    return rows


def headers(c: AblationComparison) -> tuple[list[str], list[str]]:
    ks = [str(k) for k in c.ks]
    values = ["group", "variant", "tasks", "samples", *(f"pass@{k}" for k in ks), *(f"acc@{k}" for k in ks)]
    deltas = ["group", "variant", "k", "tasks", c.baseline, "variant", "Δ pass@k", "95% CI", "p", "Δ acc@k"]
    return values, deltas


NOTE = ("Δ: variant − baseline in percentage points over the tasks both scored; 95% CI by paired bootstrap "
        "over tasks; p by paired permutation test. Acc@k is pooled over context tokens, so its Δ has no CI.")


def to_markdown(c: AblationComparison) -> str:
    vh, dh = headers(c)

    def table(header: list[str], rows: list[list[str]]) -> list[str]:
        return ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|",
                *("| " + " | ".join(r) + " |" for r in rows), ""]

    out = [f"# Ablation: {', '.join(a.label for a in c.arms)}", "",
           f"Baseline `{c.baseline}`; values in %; under-k policy `{c.under_k.value}`.", "",
           "## pass@k and Acc@k per variant", "", *table(vh, value_rows(c)),
           f"## Difference from {c.baseline}", "", NOTE, "", *table(dh, delta_rows(c)), "## Runs", ""]
    out += [f"- `{a.label}`: `{a.run_dir}`" for a in c.arms]
    return "\n".join(out) + "\n"


