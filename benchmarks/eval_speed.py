"""Evaluation speed: the default executor (workers) against `--executor naive`, same samples, same machine.

    python benchmarks/eval_speed.py [--backend local|docker|both] [--project P ...] [--limit N] [--per-task N]
                                    [--jobs J] [--repeat R] [--samples FILE] [--reverse] [--no-isolation-cost]
                                    [--keep DIR]

Sample set: CoderEval's released CodeGen samples (default ../shared/codereval/results-CodeGen-raw.jsonl,
beside the repository)
on the built-in tasks that carry a CoderEval alias (`coderun tasks build <project>` makes them). Each
repetition evaluates the set with `naive` and then with `workers`, and prints: samples, unique samples,
wall time of each, the ratio, the per-sample overhead of each executor, median and 90th percentile (the wall
time of each unique sample minus its mapped tests' baseline duration), the median cost of the reporter's
integrity check per sample with each executor (its snapshot and its verification after every test, as the reporter measured
them), what the differential step (pass+) adds to the samples it runs for (the step's own time, measured in
the test process, against the rest of the sample's evaluation) and whether every verdict agreed. On the local
backend each executor then runs the same samples again with `--isolation none`, then once more with namespaces:
the cost of isolation per sample is the median of the paired differences (a unique sample's mean time with
namespaces, before and after, minus its time without; samples graded alike in the three runs), with the wall
times and whether the verdicts agree. `--reverse` evaluates the samples file in reverse order (verdicts
that depend on the order of samples show up against a forward run). `--keep DIR` keeps the run folders (and the
samples file) in DIR, to compare them with another order's (a temporary folder else). Environments and images are built (or
found) before anything is timed.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import statistics
import tempfile
import time
from pathlib import Path

from coderun.config import load_settings
from coderun.evaluation.evaluate import EvalRequest, execute, start_run
from coderun.evaluation.samples import read_samples, resolver_from_tasks
from coderun.evaluation.store import RunStore
from coderun.manifests.schema import find_manifest
from coderun.sandbox.project import project_sandbox_spec
from coderun.tasks import load_tasks

from _data import DEFAULT

DEFAULT_SAMPLES = DEFAULT / "results-CodeGen-raw.jsonl"


def sample_file(args, tasks, out: Path) -> tuple[int, int]:
    """The selected samples in coderun's format; returns (samples, unique (task, code) pairs)."""
    loaded = read_samples(args.samples, resolver_from_tasks(tasks))
    chosen = loaded.samples
    if args.per_task:  # every task, fewer samples: the whole benchmark's mix in a fraction of the time
        counts: collections.Counter[str] = collections.Counter()
        kept = []
        for s in chosen:
            counts[s.task_id] += 1
            if counts[s.task_id] <= args.per_task:
                kept.append(s)
        chosen = kept
    chosen = chosen[: args.limit] if args.limit else chosen
    chosen = chosen[::-1] if args.reverse else chosen
    out.write_text("".join(json.dumps({"task_id": s.task_id, "solution": s.code}) + "\n" for s in chosen))
    return len(chosen), len({(s.task_id, " ".join(s.code.split())) for s in chosen})


def codereval_tasks(args, settings) -> list:
    """The built tasks with a CoderEval alias (of `args.project` when given); exits saying what is missing."""
    if not args.samples.is_file():
        raise SystemExit(f"samples file not found: {args.samples} (pass --samples FILE)")
    tasks = [t for t in load_tasks(settings) if t.aliases and (not args.project or t.project in args.project)]
    if not tasks:
        raise SystemExit("no built task with a CoderEval alias: build some with `coderun tasks build <project>`")
    return tasks


def evaluate(settings, tasks, samples: Path, backend: str, executor: str, jobs: int, run_dir: Path,
             isolation: str = "auto"):
    req = EvalRequest(samples=samples, backend=backend, jobs=jobs, executor=executor, run_dir=run_dir,
                      label=f"{executor} {backend} isolation {isolation}", isolation=isolation)
    t0 = time.perf_counter()
    store, _ = start_run(req, settings, tasks)
    summary = execute(store, settings)
    wall = time.perf_counter() - t0
    with RunStore.open(run_dir) as st:
        results = {(r.task_id, r.index): r for r in st.results()}
    return wall, summary, results


def overheads(results: dict, tasks: dict) -> list[float]:
    """Per unique sample (the first of each shared verdict): its wall time minus its tests' baseline."""
    out = []
    for r in results.values():
        if "(same code as sample" in r.reason or r.evidence is None:
            continue
        out.append(r.duration - sum(tasks[r.task_id].test_durations.values()))
    return out


def percentiles_ms(values: list[float]) -> tuple[float, float]:
    """(median, 90th percentile) in milliseconds; nan without values."""
    if len(values) < 2:
        return (1000 * values[0],) * 2 if values else (float("nan"), float("nan"))
    return 1000 * statistics.median(values), 1000 * statistics.quantiles(values, n=10)[-1]


def integrity_ms(results: dict) -> float:
    """Median cost of the integrity check per unique sample that ran (the reporter's own figure)."""
    costs = [r.evidence.integrity_ms for r in results.values()
             if r.evidence is not None and r.evidence.integrity_ms is not None and "(same code as" not in r.reason]
    return statistics.median(costs) if costs else float("nan")


def differential_cost(results: dict) -> tuple[float, float, int]:
    """(median seconds of the differential step, median share it adds to a sample's evaluation time, samples)
    over the unique samples whose step ran (those that passed the project's tests, on tasks with inputs)."""
    steps = [(float(r.evidence.differential["step_seconds"]), r.duration) for r in results.values()
             if r.evidence is not None and isinstance(r.evidence.differential, dict)
             and "step_seconds" in r.evidence.differential and "(same code as" not in r.reason]
    if not steps:
        return float("nan"), float("nan"), 0
    return (statistics.median(s for s, _ in steps),
            statistics.median(s / max(d - s, 1e-6) for s, d in steps), len(steps))


def one_round(args, settings, tasks, backend: str, samples: Path, work: Path, n: int, unique: int) -> dict:
    by_id = {t.task_id: t for t in tasks}
    naive_wall, naive_sum, naive = evaluate(settings, tasks, samples, backend, "naive", args.jobs, work / "naive")
    wk_wall, wk_sum, workers = evaluate(settings, tasks, samples, backend, "workers", args.jobs, work / "workers")
    differ = [k for k in naive if (naive[k].verdict, naive[k].failure) != (workers.get(k) and
              (workers[k].verdict, workers[k].failure))]
    overhead = {name: percentiles_ms(overheads(results, by_id)) for name, results in
                (("naive", naive), ("workers", workers))}
    row = {"backend": backend, "samples": n, "unique": unique, "naive_s": naive_wall, "workers_s": wk_wall,
           "ratio": naive_wall / wk_wall, "overhead_ms": overhead["workers"][0], "overhead": overhead,
           "agree": not differ and len(naive) == len(workers), "differ": differ,
           "infra": (naive_sum.infra, wk_sum.infra), "fallbacks": len(wk_sum.problems),
           "passed": (naive_sum.passed, wk_sum.passed),
           "integrity_ms": (integrity_ms(naive), integrity_ms(workers))}
    print(f"{backend:6} samples {n:4}  unique {unique:4}  naive {naive_wall:7.1f}s  workers {wk_wall:6.1f}s  "
          f"ratio {row['ratio']:5.1f}x  median overhead {row['overhead_ms']:6.0f} ms  "
          f"verdicts {'all agree' if row['agree'] else f'{len(differ)} DIFFER'}  "
          f"pass {naive_sum.passed}/{wk_sum.passed}  infra {naive_sum.infra}/{wk_sum.infra}  "
          f"fallbacks {row['fallbacks']}", flush=True)
    print(f"{backend:6} overhead per sample above its tests' baseline time, median / p90: naive "
          f"{row['overhead']['naive'][0]:.0f} / {row['overhead']['naive'][1]:.0f} ms, workers "
          f"{row['overhead']['workers'][0]:.0f} / {row['overhead']['workers'][1]:.0f} ms", flush=True)
    print(f"{backend:6} integrity check per sample, median: naive {row['integrity_ms'][0]:.1f} ms, "
          f"workers {row['integrity_ms'][1]:.1f} ms", flush=True)
    if backend == "local" and args.isolation_cost:
        row["isolation"] = isolation_cost(args, settings, tasks, samples, work, {"workers": workers, "naive": naive})
    step, share, ran = differential_cost(workers)
    all_median = statistics.median(r.duration for r in workers.values() if "(same code as" not in r.reason)
    row["differential"] = (step, share, ran)
    print(f"{backend:6} differential step (pass+, workers): ran for {ran} unique samples, median {1000 * step:.0f} ms, "
          f"adding a median {100 * share:.1f}% to those samples' evaluation time (median sample, all: "
          f"{all_median:.2f} s)", flush=True)
    for k in differ[:10]:
        w = workers.get(k)
        print(f"   differs {k}: naive {naive[k].verdict.value} {naive[k].failure} | workers "
              f"{w.verdict.value if w else None} {w.failure if w else ''}")
    return row


def isolation_cost(args, settings, tasks, samples: Path, work: Path, with_ns: dict[str, dict]) -> dict:
    """Each executor again without namespaces (`--isolation none`), then once more with them: per unique sample
    graded the same in the three runs, the mean of its two times with namespaces minus its time without (the
    runs before and after cancel a load that drifts during the measurement); the median of those differences,
    the wall times, and whether the verdicts agree."""
    out = {}
    for executor, on in with_ns.items():
        wall, _summary, off = evaluate(settings, tasks, samples, "local", executor, args.jobs,
                                       work / f"{executor}-none", isolation="none")
        _wall, _summary, again = evaluate(settings, tasks, samples, "local", executor, args.jobs,
                                          work / f"{executor}-again")
        differ = [k for k in on if k in off and (on[k].verdict, on[k].failure) != (off[k].verdict, off[k].failure)]
        runs = (on, again, off)
        paired = [(on[k].duration + again[k].duration) / 2 - off[k].duration for k in on
                  if "(same code as" not in on[k].reason
                  and all(k in r and r[k].evidence is not None and (r[k].verdict, r[k].failure)
                          == (on[k].verdict, on[k].failure) for r in runs)]
        cost = 1000 * statistics.median(paired) if paired else float("nan")
        out[executor] = {"cost_ms": cost, "wall_none_s": wall, "differ": differ}
        print(f"local  isolation cost per sample ({executor}): median {cost:+.1f} ms over {len(paired)} unique "
              f"samples graded alike (namespaces before and after the run without); wall without namespaces "
              f"{wall:.1f}s; verdicts with and without {'all agree' if not differ else f'{len(differ)} DIFFER'}",
              flush=True)
        for k in differ[:10]:
            print(f"   differs {k}: namespaces {on[k].verdict.value} {on[k].failure} | none "
                  f"{off[k].verdict.value} {off[k].failure}")
    return out


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.1f} (min {min(values):.1f}, max {max(values):.1f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=["local", "docker", "both"], default="both")
    ap.add_argument("--project", action="append", default=[])
    ap.add_argument("--limit", type=int, default=0, help="only the first N samples")
    ap.add_argument("--per-task", type=int, default=0, help="only the first N samples of each task")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--samples", type=Path, default=DEFAULT_SAMPLES)
    ap.add_argument("--reverse", action="store_true", help="the samples in reverse order")
    ap.add_argument("--no-isolation-cost", dest="isolation_cost", action="store_false",
                    help="local: do not run the samples again without namespaces")
    ap.add_argument("--keep", type=Path, help="keep the run folders in this (new or empty) folder")
    args = ap.parse_args()
    settings = load_settings()
    tasks = codereval_tasks(args, settings)
    backends = ["local", "docker"] if args.backend == "both" else [args.backend]
    print(f"tasks with CoderEval aliases: {len(tasks)} in {', '.join(sorted({t.project for t in tasks}))}; "
          f"jobs {args.jobs}")
    if args.keep and args.keep.exists() and any(args.keep.iterdir()):
        raise SystemExit(f"--keep {args.keep}: the folder is not empty (name a new one)")
    with contextlib.nullcontext(str(args.keep)) if args.keep else tempfile.TemporaryDirectory(
            prefix="coderun-evalspeed-") as tmp:
        Path(tmp).mkdir(parents=True, exist_ok=True)
        samples = Path(tmp) / "samples.jsonl"
        n, unique = sample_file(args, tasks, samples)
        rows = []
        for backend in backends:
            for name in sorted({t.project for t in tasks}):  # build or find every env/image before timing
                project_sandbox_spec(find_manifest(name, settings), settings, backend)
            for i in range(args.repeat):
                rows.append(one_round(args, settings, tasks, backend, samples, Path(tmp) / f"{backend}-{i}", n,
                                      unique))
        for backend in backends:
            mine = [r for r in rows if r["backend"] == backend]
            if len(mine) > 1:
                print(f"{backend}: ratio {spread([r['ratio'] for r in mine])}x; workers "
                      f"{spread([r['workers_s'] for r in mine])}s; naive {spread([r['naive_s'] for r in mine])}s; "
                      f"overhead {spread([r['overhead_ms'] for r in mine])} ms; integrity (workers) "
                      f"{spread([r['integrity_ms'][1] for r in mine])} ms; "
                      f"all verdicts agree in {sum(r['agree'] for r in mine)}/{len(mine)} runs")
            for executor in ("workers", "naive") if all("isolation" in r for r in mine) and len(mine) > 1 else ():
                print(f"{backend}: isolation cost per sample ({executor}) "
                      f"{spread([r['isolation'][executor]['cost_ms'] for r in mine])} ms")


if __name__ == "__main__":
    main()
