"""`coderun tasks`: build a project's tasks (select, map tests, verify), list, export and prune them."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

import typer
from rich.console import Console, Group
from rich.text import Text

from coderun.choices import Backend
from coderun.cli._common import (
    JsonOption,
    ProjectsDirOption,
    RegistryOption,
    build_each,
    console,
    each_built,
    err_console,
    print_error,
    print_json,
    settings,
    with_registry,
)
from coderun.cli.render import Renderer
from coderun.errors import EnvironmentBuildError, UsageError
from coderun.events import silent
from coderun.manifests.schema import find_manifest, known_manifests
from coderun.records import TargetOutcome, Task
from coderun.report.terminal import EMPTY, Fit, make_table, table_or_stacked
from coderun.tasks import ProjectTaskReport, TaskBuildReport, load_targets, load_tasks, prune_tasks
from coderun.tasks.build import build_project, default_jobs
from coderun.tasks.side_by_side import BuildOptions, build_side_by_side, default_at_once
from coderun.tasks.store import export_jsonl
from coderun.tasks.summary import ProjectSummary, summarize
from coderun.tasks.trivial import NAMES, NONE

app = typer.Typer(no_args_is_help=True, help="Tasks: target functions, their tests, and proof the tests "
                  "can tell right from wrong.")

_LIST_FIELDS = ("task_id", "aliases", "project", "file", "qualname", "name", "level", "tests", "source",
                "status", "mapping", "explicit", "flaky_tests", "test_files", "signature", "supplementary",
                "configurations", "pass_stub_passes", "trivial_passes", "network_tests", "rigor")


@app.command("build")
def build(projects: list[str] = typer.Argument(None, help="Project names or manifest paths."),
          all_projects: bool = typer.Option(False, "--all", help="Every known project: the built-in manifests "
                                            "and those in --projects / CODERUN_PROJECTS."),
          backend: str = typer.Option("local", help="Sandbox for verification: local or docker."),
          include_weak: bool = typer.Option(False, "--include-weak",
                                            help="Keep tasks whose tests do not notice the body missing."),
          jobs: int = typer.Option(None, "-j", "--jobs", help="Tasks verified at once (default: the number of "
                                   "cores)."),
          cluster: str = typer.Option(None, "--cluster", help="Build each project on a node of a Ray cluster "
                                      "(one CPU each, projects in parallel; -j then defaults to 1): ray, auto, "
                                      "ray://HOST:PORT or HOST:PORT, as for eval. Needs Ray: pip install "
                                      "'coderun\\[ray]'."),
          rigor: bool = typer.Option(True, "--rigor/--no-rigor", help="Also derive the pass+ inputs (record "
                                     "the original's calls, mutate, reduce); `tasks rigor` can do it later."),
          at_once: int = typer.Option(None, "--at-once", help="Projects built at once, each in its own process "
                                      "(default: the cores + 2 with several projects and cores, else 1); "
                                      "tasks verified at once over all of them are at most the cores or the "
                                      "builds, whichever is more."),
          registry: str = RegistryOption, projects_dir: list[Path] = ProjectsDirOption, as_json: bool = JsonOption) -> None:
    """Select each project's tasks, map them to the tests that reach them, verify, store. With several
    projects a failed one is reported and the others go on; the exit code says if any failed. An interrupted
    build run again with the same inputs resumes: tasks already decided are not verified again. With
    --cluster each node builds with its own CODERUN_HOME and the driver's store gets what it built."""
    chosen = Backend.parse(backend)
    for flag, value in (("-j", jobs), ("--at-once", at_once)):
        if value is not None and value < 1:
            raise UsageError(f"{flag} must be at least 1, got {value}")
    if bool(projects) == all_projects:
        raise UsageError("give project names or --all, not both" if projects else "give project names or --all")
    s = with_registry(settings(projects_dir), registry)
    failed: dict[str, str] = {}
    if all_projects:
        manifests, broken = known_manifests(s)
        for path, e in broken.items():
            print_error(e)
            failed[str(path)] = e.message
    else:
        manifests = [find_manifest(p, s) for p in projects]
    total = len(manifests) + len(failed)
    report = TaskBuildReport()

    opts = BuildOptions(chosen.value, include_weak, jobs or 0, rigor, registry)
    built = _builds(manifests, s, opts, cluster, as_json, failed if total > 1 else None, at_once)
    summary: list[ProjectSummary] = []
    try:
        for _m, p in built:
            report.projects.append(p)
            if not as_json:
                print_project(p)
        if total > 1:
            summary = [summarize(m, s, failed.get(m.name)) for m in manifests]
    finally:
        if as_json and (report.projects or total > 1):  # a lone failure is just its error
            print_json({**report.model_dump(mode="json"),
                        **({"summary": [r.model_dump(mode="json") for r in summary]} if summary else {})})
    if not as_json and report.projects:
        _print_levels(report)
    if not as_json and summary:
        console.print(summary_table(summary))
    _raise_if_failed(failed, manifests, total)


def _raise_if_failed(failed: dict[str, str], manifests: list, total: int) -> None:
    """One error naming the failed builds, in the order given (builds side by side end in any order)."""
    if failed:
        order = {name: i for i, name in enumerate(m.name for m in manifests)}
        names = sorted(failed, key=lambda n: order.get(n, -1))
        raise EnvironmentBuildError(f"{len(failed)} of {total} task builds failed: {', '.join(names)}")


def _builds(manifests, s, opts: BuildOptions, cluster: str | None, as_json: bool, failed: dict[str, str] | None,
            at_once: int | None):
    """(manifest, report) per project: on the cluster as each finishes (one CPU each: -j defaults to 1 there),
    side by side in processes of their own (`at_once`), or one after the other here; failures as
    build_each records them. opts.jobs 0: not given."""
    if cluster:
        from coderun.tasks.cluster import build_on_cluster

        return each_built(build_on_cluster(manifests, s, opts.backend, opts.include_weak, opts.jobs or 1, cluster,
                                           rigor=opts.rigor, on_event=Renderer(err_console)),
                          len(manifests), "task builds", failed=failed)
    at_once = min(len(manifests), at_once or default_at_once(default_jobs()))
    if at_once > 1:
        # Each build holds a slot all along: with fewer slots than builds, the ones over would only wait.
        opts = replace(opts, jobs=opts.jobs or default_jobs(), cores=max(default_jobs(), at_once))
        return each_built(build_side_by_side(manifests, s, opts, at_once,
                                             on_event=silent if as_json else Renderer(err_console)),
                          len(manifests), "task builds", failed=failed)

    def build_one(m):
        with Renderer(err_console) as show:
            return build_project(m, s, opts.backend, opts.include_weak, jobs=opts.jobs or default_jobs(),
                                 rigor=opts.rigor, on_event=silent if as_json else show)

    return build_each(manifests, build_one, "task builds", failed=failed)


MAX_CAPPED_SHOWN = 10


def print_project(p: ProjectTaskReport, out: Console = console) -> None:
    """What one project's task build found (also printed by `eval` after it builds a project's tasks)."""
    st = p.statuses
    counts = ", ".join(f"{st.get(k, 0)} {k}" for k in ("verified", "weak", "flaky", "broken", "uncovered"))
    out.print(f"[bold]{p.project}[/]: {p.candidates} candidates ({p.explicit} from the manifest, "
              f"{p.discovered} discovered), {p.covered} covered ({p.mapping}): {counts}; "
              f"{len(p.flaky_tests)} flaky tests dropped")
    if p.unresolved:
        out.print(f"[yellow]  manifest targets not found: {', '.join(p.unresolved)}[/]")
    if p.mapping_note:
        out.print(f"[yellow]  coverage failed, tests mapped by file name: {p.mapping_note}[/]")
    if p.trivial_passes:
        out.print(f"  {trivial_summary(p.trivial_passes)}", highlight=False)
    if p.positions:
        key, nodeid = next(iter(p.positions.items()))
        out.print(f"  {len(p.positions)} parametrized tests have ids that change between runs; they are known by "
                  f"their parameters' positions (e.g. {key} for {nodeid}; all in `--json`: positions)",
                  soft_wrap=True, highlight=False, markup=False)
    if p.resumed:
        out.print(f"  {p.resumed} tasks taken from the interrupted build (same inputs), not verified again")
    if p.capped:
        out.print(f"  {len(p.capped)} tasks capped (max_tests_per_task {p.max_tests_per_task or 'none'}, "
                  f"max_seconds_per_task {p.max_seconds_per_task:g}); slowest mapped tests dropped:")
        for tid, dropped in list(p.capped.items())[:MAX_CAPPED_SHOWN]:
            out.print(f"    {tid}: {len(dropped)} dropped, slowest {dropped[0]}", soft_wrap=True,
                      highlight=False, markup=False)
        if len(p.capped) > MAX_CAPPED_SHOWN:
            out.print(f"    and {len(p.capped) - MAX_CAPPED_SHOWN} more (all in `--json`: capped)")
    for note in p.fallbacks:
        out.print(f"  {note}", style="yellow", soft_wrap=True, markup=False, highlight=False)


def trivial_summary(passes: dict[str, list[str]]) -> str:
    """How many tasks some trivial body passes, and how many each does: "trivial bodies pass the tests of
    3 verified tasks (none 2, first_arg 1, constant 1)"."""
    by_body = Counter(name for names in passes.values() for name in names)
    each = ", ".join(f"{name} {by_body[name]}" for name in NAMES if by_body[name])
    return f"trivial bodies pass the tests of {len(passes)} verified tasks ({each}); kept, marked"


def summary_table(rows: list[ProjectSummary]) -> Group:
    """One line per project: its Python, environment and baseline, declared targets verified, discovered tasks,
    and its source when the terminal is wide enough; then why each failed project failed."""
    def n(v: int | None) -> str:
        return EMPTY if v is None else str(v)

    head = ["project", "python", "env", "passed", "failed", "targets", "discovered"]
    body = [[r.project, r.python, "built" if r.env else "none", n(r.passed), n(r.failed),
             f"{r.verified}/{r.declared}", str(r.discovered)] for r in rows]
    title = "task builds (baseline passed/failed; declared targets verified/declared)"
    styles = ["red" if r.failure else None for r in rows]
    table = Fit(make_table([*head, "source"], [[*b, r.source] for b, r in zip(body, rows, strict=True)],
                           title=title, left=(0, 1, 2, 7), styles=styles),
                make_table(head, body, title=title, left=(0, 1, 2), styles=styles))
    failures = [Text(f"{r.project} failed: {r.failure}", style="red") for r in rows if r.failure]
    return Group(table, *failures)


def _print_levels(report: TaskBuildReport) -> None:
    levels = report.levels()
    console.print("benchmark tasks per level: " + ", ".join(f"{k} {v}" for k, v in levels.items())
                  + f" (total {sum(levels.values())})")


@app.command("list")
def list_(project: str = typer.Option(None, "--project", help="Only this project."),
          level: str = typer.Option(None, "--level", help="Only this runnable level."),
          status: str = typer.Option(None, "--status", help="verified, weak, flaky, uncovered, broken or "
                                     "all (default: the benchmark, i.e. verified)."),
          include_weak: bool = typer.Option(False, "--include-weak", help="Count weak tasks in."),
          targets: bool = typer.Option(False, "--targets", help="The targets the manifests declare instead: "
                                       "verified, or why not (with the manifest's status_note)."),
          projects_dir: list[Path] = ProjectsDirOption, as_json: bool = JsonOption) -> None:
    """List stored tasks; with --json one JSON object per line."""
    s = settings(projects_dir)
    if targets:
        if level or status or include_weak:
            raise UsageError("--targets lists every declared target; it takes --project only")
        _list_targets(load_targets(s, project=project), as_json)
        return
    # Every verified task, those eval leaves out of the headline (a trivial body passes them) among them: flagged.
    default = ["verified", "weak"] if include_weak else "verified"
    tasks = load_tasks(s, project=project, level=level, include_weak=include_weak, status=status or default)
    if as_json:
        for t in tasks:
            print_json(t.model_dump(mode="json", include=set(_LIST_FIELDS)))
        return
    rows = [[t.task_id, t.level.value, f"{t.status.value}{SUPPLEMENTARY_MARK if t.supplementary else ''}",
             str(len(t.tests)), _flags(t)] for t in tasks]
    console.print(table_or_stacked(["task", "level", "status", "tests", "flags"], rows,
                                   "aliases", [", ".join(t.aliases) for t in tasks], left=(0, 1, 2, 4),
                                   fold=(4,)))  # the flags fold before a task id does
    console.print(f"{len(tasks)} tasks")
    console.print(_inputs_note(tasks))
    if any(t.supplementary for t in tasks):
        console.print(SUPPLEMENTARY_NOTE)
    for note in _flag_notes(tasks):
        console.print(note)
    unverified = sum(not o.verified for o in load_targets(s, project=project))
    if unverified:
        console.print(f"{unverified} targets declared by the manifests are not verified; why: "
                      "coderun tasks list --targets")


def _inputs_note(tasks: list[Task]) -> str:
    derived = [t for t in tasks if t.rigor is not None]
    if not derived:
        return ("pass+: no differential inputs derived for these tasks (coderun tasks rigor PROJECT derives "
                "them)")
    none = [t for t in derived if not t.rigor.inputs]
    return (f"pass+: {len(derived) - len(none)} of {len(derived)} tasks have differential inputs; for the "
            f"{len(none)} flagged no-inputs nothing could be recorded or kept, and pass+ equals pass (why and "
            "how many inputs: --json, rigor)")


def _flags(t: Task) -> str:
    """What the build found about a task's tests (Task.flags, supplementary aside: the status's mark says it),
    `no-inputs` (no differential inputs: pass+ is pass), `Nconf` (run in N configurations)."""
    flags = [f for f in t.flags() if f != "supplementary"]
    flags += ["no-inputs"] if t.rigor is not None and not t.rigor.inputs else []
    if len(t.configurations) > 1:
        flags.append(f"{len(t.configurations)}conf")
    return " ".join(flags) or EMPTY


def _flag_notes(tasks: list[Task]) -> list[str]:
    notes = []
    weak = sum(t.pass_stub_passes for t in tasks)
    if weak:
        notes.append(f"weak: {weak} tasks whose tests pass with the body replaced by `return None`")
    others = Counter(n for t in tasks for n in t.trivial_passes if n != NONE)
    if others:
        each = ", ".join(f"{n} {others[n]} ({TRIVIAL_WORDS[n]})" for n in NAMES if others[n])
        notes.append(f"trivial: tasks whose tests pass with a body that does no work: {each}")
    trivial = [t for t in tasks if t.trivial_passes]
    if trivial:
        caught = sum(not t.trivially_passed("plus") for t in trivial)
        notes.append(f"eval leaves these {len(trivial)} weak or trivial tasks out of its headline unless "
                     f"--include-weak; with --rigor plus it counts the {caught} of them on which pass+ fails every "
                     "such body")
    network = [t for t in tasks if t.network_tests]
    if network:
        tests = sorted({a.nodeid for t in network for a in t.network_tests})
        notes.append(f"network: {len(network)} environment-dependent tasks, whose tests tried to reach a "
                     f"non-loopback address in the task build: {', '.join(tests)}")
    return notes


TRIVIAL_WORDS = {"first_arg": "returns its first argument", "empty": "returns an empty value of its type",
                 "constant": "returns a constant the original returned"}
SUPPLEMENTARY_MARK = "*"
SUPPLEMENTARY_NOTE = (f"{SUPPLEMENTARY_MARK} verified by supplementary tests written for this benchmark "
                      "(tests.supplementary), not by the project's own")


def _list_targets(outcomes: list[TargetOutcome], as_json: bool) -> None:
    if as_json:
        for o in outcomes:
            print_json({**o.model_dump(mode="json"), "verified": o.verified, "stale_note": o.stale_note})
        return
    rows = [[o.task_id, _outcome(o)] for o in outcomes]
    console.print(table_or_stacked(["target", "outcome"], rows, "why", [_why(o) for o in outcomes], left=(0, 1)))
    bad = sum(not o.verified for o in outcomes)
    stale = sum(o.stale_note for o in outcomes)
    console.print(f"{len(outcomes)} declared targets: {len(outcomes) - bad} verified, {bad} not"
                  + (f"; {stale} status notes are stale (verified anyway)" if stale else ""))
    if any(o.supplementary for o in outcomes):
        console.print(SUPPLEMENTARY_NOTE)


def _outcome(o: TargetOutcome) -> str:
    if o.verified:
        return "verified" + (SUPPLEMENTARY_MARK if o.supplementary else "")
    return o.reason.value


def _why(o: TargetOutcome) -> str:
    """The build's words, then the manifest's note (marked stale when the target verified anyway)."""
    if o.stale_note:
        return f"stale note (verified anyway): {o.status_note}"
    parts = [o.detail] if o.detail else []
    if o.status_note:
        parts.append(f"note: {o.status_note}")
    return "; ".join(parts)


@app.command("rigor")
def rigor(projects: list[str] = typer.Argument(..., help="Project names or manifest paths."),
          backend: str = typer.Option("local", help="Sandbox the original runs in: local or docker (the one "
                                      "you evaluate with)."),
          jobs: int = typer.Option(None, "-j", "--jobs", help="Tasks at once (default: the number of cores)."),
          projects_dir: list[Path] = ProjectsDirOption) -> None:
    """Derive the pass+ inputs of stored tasks again, without rebuilding them: record the original's calls
    while its tests run (twice), derive inputs from them, keep those that add coverage or kill mutants, and
    confirm them with another run of the original. `tasks build` does this too."""
    from coderun.tasks.rederive import build_rigor

    chosen = Backend.parse(backend)
    s = settings(projects_dir)

    def one(m):
        with Renderer(err_console) as show:
            summaries = build_rigor(m, s, chosen.value, jobs=jobs or default_jobs(), on_event=show)
        with_inputs = [r for r in summaries.values() if r.inputs]
        console.print(f"[bold]{m.name}[/]: {len(with_inputs)} of {len(summaries)} tasks have differential "
                      f"inputs ({sum(r.inputs for r in with_inputs)} inputs, "
                      f"{sum(r.augmented for r in with_inputs)} derived by mutation)")
        return summaries

    list(build_each([find_manifest(p, s) for p in projects], one, "pass+ derivations"))


@app.command("export")
def export(output: Path = typer.Option(..., "-o", "--output", help="JSONL file to write."),
           project: str = typer.Option(None, "--project", help="Only this project."),
           status: str = typer.Option(None, "--status", help="As for `list` (default: the benchmark)."),
           include_weak: bool = typer.Option(False, "--include-weak", help="Count weak tasks in."),
           projects_dir: list[Path] = ProjectsDirOption) -> None:
    """Write full task records, one JSON object per line."""
    tasks = load_tasks(settings(projects_dir), project=project, include_weak=include_weak, status=status)
    n = export_jsonl(tasks, output)
    console.print(f"wrote {n} tasks to {output}")


@app.command("prune")
def prune(projects_dir: list[Path] = ProjectsDirOption) -> None:
    """Remove stored tasks of projects whose manifest is no longer known (e.g. a deleted user manifest)."""
    removed = prune_tasks(settings(projects_dir))
    for name, n in removed.items():
        console.print(f"removed {n} tasks of {name} (no manifest named {name!r} is known any more)")
    if not removed:
        console.print("nothing to prune: every stored project has a manifest")
