"""From a run store to the numbers a report shows: pass@k and Acc@k per group, failure taxonomy, per-task
rows, and comparisons between runs.

Groups: `overall`, every level present (`levels`, keyed by level name), `standalone` (self_contained +
slib_runnable) and `non_standalone`. A group's `tasks` counts tasks with at least one graded sample and
`samples` its graded samples. Infrastructure errors are counted apart (`infra`) and left out of pass@k:
such a sample says nothing about the code, so a task is scored on its graded samples only (n = graded
samples); a task whose samples all hit infrastructure errors is left out. Values are fractions (0..1);
renderers print percentages.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from coderun.evaluation.store import Result, RunInfo, RunStore, RunTask
from coderun.rank.records import RankSummary
from coderun.rank.store import RankStore
from coderun.records import Level, RunEnvironment, VerdictKind
from coderun.report.flags import sample_flags
from coderun.report.metrics import (
    CONTEXT_KINDS,
    UnderK,
    acc_code,
    aggregate_acc_at_k,
    aggregate_pass_at_k,
    body_context,
    module_package,
    per_task_pass_at_k,
    task_token_hits,
)
from coderun.report.reach import ReachKind, grader_reach
from coderun.runner.taxonomy import primary_of
from coderun.stats import paired_bootstrap, paired_permutation_test


class Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid")


class AccStats(Model):
    overall: float | None
    classes: float | None
    apis: float | None
    vars: float | None
    tokens: int
    tasks: int


class PlusStats(Model):
    """pass@k on the project's tests beside pass+@k (and agreeing with the original on the differential
    inputs), as HumanEval beside HumanEval+."""

    pass_at_k: dict[str, float | None] = Field(alias="pass@k")        # on the project's tests (base)
    plus_at_k: dict[str, float | None] = Field(alias="pass+@k")
    passed: int                                  # samples passing the project's tests
    plus_passed: int                             # of them, also agreeing with the original
    overturned: int                              # passes the differential step turned into failures
    checked_tasks: int                           # tasks with differential inputs
    unchecked_tasks: int                         # tasks without (pass+ equals pass for them)

    @property
    def overturned_share(self) -> float | None:
        return self.overturned / self.passed if self.passed else None


class GroupStats(Model):
    tasks: int
    samples: int
    passed: int
    infra: int
    pass_at_k: dict[str, float | None] = Field(alias="pass@k")
    excluded_under_k: dict[str, int]
    acc_at_k: dict[str, AccStats] | None = Field(alias="acc@k")
    failures: dict[str, int]                     # primary class -> samples
    failures_detailed: dict[str, int]            # full label (primary/secondary) -> samples
    plus: PlusStats | None = None                # pass+ beside pass (None: a run made before pass+)


class ReachRow(Model):
    kind: ReachKind
    move: str
    line: int


class SampleRow(Model):
    run: str
    task_id: str
    sample: int
    level: str
    verdict: VerdictKind
    failure: str | None
    reason: str
    spliced_path: str | None
    log_path: str | None
    duration: float
    flags: list[str] = []   # static signs the code touches the test machinery, then what the run showed
    grader_reach: list[ReachRow] = []   # static: what in the code reaches for the grader (information only)


class TaskRow(Model):
    task_id: str
    project: str
    level: str
    n: int
    c: int
    infra: int
    pass_at_k: dict[str, float | None] = Field(alias="pass@k")
    samples: list[SampleRow]
    supplementary: bool = False  # its tests include ones written for the benchmark (tests.supplementary)
    pass_stub_passes: bool = False  # its tests pass with the body replaced by `pass` (weak on return values)
    network_tests: list[str] = Field(default_factory=list)  # its tests that tried to reach the network
    flags: list[str] = Field(default_factory=list)  # Task.flags: weak, trivial:NAMES, network, supplementary
    top_ranked: dict[str, int] = Field(default_factory=dict)  # `coderun rank --tests T`: T -> its pick's index


class RunReport(Model):
    run_id: str
    label: str
    kind: str
    path: str
    source: str | None
    ks: list[int]
    under_k: UnderK
    acc_note: str | None
    overall: GroupStats
    levels: dict[str, GroupStats]
    standalone: GroupStats
    non_standalone: GroupStats
    tasks: list[TaskRow]
    environment: RunEnvironment | None = None    # None: not recorded (imported, or an older run)
    ranking: list[RankSummary] = Field(default_factory=list)   # `coderun rank`: ranked pass@1, per kind of tests


def build_report(store: RunStore, ks: Sequence[int], under_k: UnderK = UnderK.EXCLUDE) -> RunReport:
    info: RunInfo = store.info()
    tasks = {t.task_id: t for t in store.tasks()}
    results = store.results()
    codes: dict[str, list[str]] = defaultdict(list)
    for s in store.samples():
        codes[s.task_id].append(s.code)
    by_task: dict[str, list[Result]] = defaultdict(list)
    for r in results:
        by_task[r.task_id].append(r)
    missing = sorted(set(by_task) - set(tasks))
    if missing:
        from coderun.errors import StoreError

        raise StoreError(f"{store.path}: results for tasks the run does not list, e.g. {missing[0]}")
    groups: dict[str, list[str]] = defaultdict(list)
    for task_id in sorted(by_task):
        level = tasks[task_id].level
        groups["overall"].append(task_id)
        groups[level.value].append(task_id)
        groups["standalone" if level.standalone else "non_standalone"].append(task_id)

    def stats(ids: list[str]) -> GroupStats:
        return _group(ids, tasks, by_task, codes, ks, under_k)

    level_names = [lv.value for lv in Level if lv.value in groups]
    flags = _flags(store, tasks)
    rows = [_task_row(tasks[t], by_task[t], ks, under_k, info.run_id, flags) for t in groups["overall"]]
    ranked = RankStore(store).rankings()
    tops: dict[str, dict[str, int]] = {}
    for tests, (_s, rs) in ranked.items():
        for r in rs:
            tops.setdefault(r.task_id, {})[tests.value] = r.top.index
    for row in rows:
        row.top_ranked = tops.get(row.task_id, {})
    with_context = sum(1 for t in groups["overall"] if tasks[t].oracle_context is not None)
    acc_note = None if with_context else ("Acc@k unavailable: the run has no oracle context for its tasks"
                                          + (" (imported without --dataset)" if info.kind.value == "imported" else ""))
    return RunReport(run_id=info.run_id, label=info.label or info.run_id, kind=info.kind.value, path=str(store.path),
                     source=info.source, ks=list(ks), under_k=under_k, acc_note=acc_note,
                     overall=stats(groups["overall"]), levels={lv: stats(groups[lv]) for lv in level_names},
                     standalone=stats(groups["standalone"]), non_standalone=stats(groups["non_standalone"]),
                     tasks=rows, environment=store.environment(), ranking=[s for s, _r in ranked.values()])


def _counts(results: list[Result]) -> tuple[int, int, int]:
    graded = [r for r in results if r.verdict is not VerdictKind.INFRA]
    return len(graded), sum(r.verdict is VerdictKind.PASS for r in graded), len(results) - len(graded)


def _group(ids: list[str], tasks: dict[str, RunTask], by_task: dict[str, list[Result]],
           codes: dict[str, list[str]], ks: Sequence[int], under_k: UnderK) -> GroupStats:
    counts = {}
    infra = passed = 0
    failures: Counter[str] = Counter()
    detailed: Counter[str] = Counter()
    for t in ids:
        n, c, i = _counts(by_task[t])
        infra += i
        passed += c
        if n:
            counts[t] = (n, c)
        for r in by_task[t]:
            if r.verdict is VerdictKind.FAIL:
                failures[primary_of(r.failure) or "other"] += 1
                detailed[r.failure or "other"] += 1
    table = aggregate_pass_at_k(counts, ks, under_k)
    return GroupStats(tasks=len(counts), samples=sum(n for n, _ in counts.values()), passed=passed, infra=infra,
                      pass_at_k={str(k): v.value for k, v in table.items()},
                      excluded_under_k={str(k): v.excluded for k, v in table.items()},
                      acc_at_k=_acc(ids, tasks, codes, ks, under_k), failures=dict(failures.most_common()),
                      failures_detailed=dict(detailed.most_common()), plus=_plus(ids, tasks, by_task, ks, under_k))


def _plus(ids: list[str], tasks: dict[str, RunTask], by_task: dict[str, list[Result]], ks: Sequence[int],
          under_k: UnderK) -> PlusStats | None:
    """pass@k and pass+@k of the group from each result's two verdicts (None when no result has them)."""
    if not any(r.rigor is not None for t in ids for r in by_task[t]):
        return None
    base: dict[str, tuple[int, int]] = {}
    plus: dict[str, tuple[int, int]] = {}
    overturned = 0
    for t in ids:
        graded = [r for r in by_task[t] if r.verdict is not VerdictKind.INFRA]
        if not graded:
            continue
        b = [(r.rigor.base if r.rigor else r.verdict) is VerdictKind.PASS for r in graded]
        p = [(r.rigor.plus if r.rigor else r.verdict) is VerdictKind.PASS for r in graded]
        base[t], plus[t] = (len(graded), sum(b)), (len(graded), sum(p))
        overturned += sum(x and not y for x, y in zip(b, p, strict=True))
    checked = sum(1 for t in base if tasks[t].inputs is not None and tasks[t].inputs.inputs)
    return PlusStats(pass_at_k={str(k): v.value for k, v in aggregate_pass_at_k(base, ks, under_k).items()},
                     plus_at_k={str(k): v.value for k, v in aggregate_pass_at_k(plus, ks, under_k).items()},
                     passed=sum(c for _, c in base.values()), plus_passed=sum(c for _, c in plus.values()),
                     overturned=overturned, checked_tasks=checked, unchecked_tasks=len(base) - checked)


def _acc(ids: list[str], tasks: dict[str, RunTask], codes: dict[str, list[str]], ks: Sequence[int],
         under_k: UnderK) -> dict[str, AccStats] | None:
    hits = {t: (len(codes[t]), _token_hits(tasks[t], codes[t]))
            for t in ids if tasks[t].oracle_context is not None and codes[t]}
    if not hits:
        return None
    table = aggregate_acc_at_k(hits, ks, under_k)
    return {str(k): AccStats(overall=a.overall, tokens=a.tokens, tasks=a.tasks,
                             **{kind: a.kinds[kind] for kind in CONTEXT_KINDS}) for k, a in table.items()}


def _token_hits(task: RunTask, codes: list[str]) -> dict[str, list[tuple[str, int]]]:
    """The task's Acc@k hits: the tokens its original's body uses, in what each sample wrote (report.metrics);
    a task without its original (an imported run) counts its whole oracle context in the samples' code."""
    if task.task is None:
        return task_token_hits(task.oracle_context, codes)
    name, file = task.task.name, task.task.file
    expected = body_context(task.oracle_context, task.task.source, name, file)
    return task_token_hits(expected, [acc_code(code, name) for code in codes], module_package(file))


class _Static(Model):
    flags: list[str]
    reach: list[ReachRow]


def _flags(store: RunStore, tasks: dict[str, RunTask]) -> dict[tuple[str, int], _Static]:
    """Static flags and grader reach of every sample's code (report.flags, report.reach: reported, never a
    verdict)."""
    out = {}
    for s in store.samples():
        if s.task_id in tasks:
            name = tasks[s.task_id].name.split(".")[-1]
            out[(s.task_id, s.index)] = _Static(
                flags=[f"static: {f}" for f in sample_flags(s.code, name)],
                reach=[ReachRow(kind=r.kind, move=r.move, line=r.line) for r in grader_reach(s.code, name)])
    return out


def _task_row(task: RunTask, results: list[Result], ks: Sequence[int], under_k: UnderK, run: str,
              flags: dict[tuple[str, int], _Static] | None = None) -> TaskRow:
    n, c, infra = _counts(results)
    table = aggregate_pass_at_k({task.task_id: (n, c)} if n else {}, ks, under_k)
    flags = flags or {}
    none = _Static(flags=[], reach=[])
    samples = [SampleRow(run=run, task_id=task.task_id, sample=r.index, level=task.level.value, verdict=r.verdict,
                         failure=r.failure, reason=r.reason, spliced_path=r.spliced_path, log_path=r.log_path,
                         duration=r.duration,
                         flags=flags.get((r.task_id, r.index), none).flags
                         + [f.detail for f in (r.evidence.tampering if r.evidence else [])],
                         grader_reach=flags.get((r.task_id, r.index), none).reach)
               for r in sorted(results, key=lambda r: r.index)]
    return TaskRow(task_id=task.task_id, project=task.project, level=task.level.value, n=n, c=c, infra=infra,
                   pass_at_k={str(k): v.value for k, v in table.items()}, samples=samples,
                   supplementary=task.task is not None and task.task.supplementary,
                   pass_stub_passes=task.task is not None and task.task.pass_stub_passes,
                   network_tests=[a.nodeid for a in task.task.network_tests] if task.task is not None else [],
                   flags=task.task.flags() if task.task is not None else [])


# ----------------------------------------------------------------------------------- comparisons

class Delta(Model):
    k: int
    tasks: int              # tasks both runs scored
    a: float
    b: float
    delta: float            # b - a
    lo: float
    hi: float
    p_value: float


class Comparison(Model):
    a: str
    b: str
    common_tasks: int
    only_a: int
    only_b: int
    solved_in_a_not_b: list[str]     # a task is solved when at least one of its graded samples passed
    solved_in_b_not_a: list[str]
    deltas: list[Delta]


def compare(a: RunReport, b: RunReport, iters: int = 10000, seed: int = 0) -> Comparison:
    """B against A over the tasks both scored: flips and pass@k deltas with paired bootstrap 95% CIs."""
    ta = {t.task_id: t for t in a.tasks if t.n}
    tb = {t.task_id: t for t in b.tasks if t.n}
    common = sorted(set(ta) & set(tb))
    deltas = []
    for k in a.ks:
        va = per_task_pass_at_k({t: (ta[t].n, ta[t].c) for t in common}, k, a.under_k, max(a.ks))
        vb = per_task_pass_at_k({t: (tb[t].n, tb[t].c) for t in common}, k, b.under_k, max(b.ks))
        both = [t for t in common if t in va and t in vb]
        if not both:
            continue
        xa, xb = [va[t] for t in both], [vb[t] for t in both]
        delta, lo, hi = paired_bootstrap(xa, xb, iters=iters, seed=seed)
        deltas.append(Delta(k=k, tasks=len(both), a=sum(xa) / len(xa), b=sum(xb) / len(xb), delta=delta,
                            lo=lo, hi=hi, p_value=paired_permutation_test(xa, xb, iters=iters, seed=seed)))
    return Comparison(a=a.label, b=b.label, common_tasks=len(common), only_a=len(set(ta) - set(tb)),
                      only_b=len(set(tb) - set(ta)),
                      solved_in_a_not_b=[t for t in common if ta[t].c > 0 and tb[t].c == 0],
                      solved_in_b_not_a=[t for t in common if tb[t].c > 0 and ta[t].c == 0], deltas=deltas)


def sample_rows(reports: Sequence[RunReport]) -> list[SampleRow]:
    return [s for r in reports for t in r.tasks for s in t.samples]


def report_files(report: RunReport, row: SampleRow) -> tuple[Path | None, Path | None]:
    """Absolute paths of a sample's spliced file and log on this machine."""
    base = Path(report.path)

    def resolve(p: str | None) -> Path | None:
        if p is None:
            return None
        path = Path(p)
        return path if path.is_absolute() else base / path

    return resolve(row.spliced_path), resolve(row.log_path)
