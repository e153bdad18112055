"""Ray's cost: the local workers executor against `--cluster` with 1 and 2 simulated nodes, same samples.

    python benchmarks/cluster_speed.py [--backend local|docker] [--project P ...] [--limit N] [--repeat R]
                                       [--samples FILE]

Sample set: as benchmarks/eval_speed.py, CoderEval's released CodeGen samples on the built-in tasks that carry
a CoderEval alias. Every configuration is a `coderun eval` process on the same samples file: the local
workers executor with 1 and 2 slots (`-j`), then through a Ray cluster of 1 and of 2 nodes of one CPU each
(`ray.cluster_utils.Cluster`, in a loopback-only network namespace: tests/ray_namespace.py and
tests/ray_cluster_driver.py, which the cluster tests use too). A cluster of N one-CPU nodes runs N units at
once, so it is compared with the local executor on N slots: the same cores. Printed per configuration: wall
time of the eval process (the cluster's own start-up is printed apart, not counted), the ratio to the local
executor on as many slots, the per-sample scheduling overhead (the median over unique samples of the recorded
duration minus the mapped tests' baseline), what the engine adds per sample (wall time minus the local
executor's, over the samples) and whether every verdict agreed with the local executor's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from coderun.config import load_settings
from coderun.evaluation.store import RunStore
from coderun.manifests.schema import find_manifest
from coderun.sandbox.project import project_sandbox_spec

from eval_speed import DEFAULT_SAMPLES, codereval_tasks, overheads, sample_file

TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path.insert(0, str(TESTS))
from ray_namespace import run_isolated, skip_reason  # noqa: E402

TIMEOUT = 3600


def local_run(samples: Path, backend: str, slots: int, run_dir: Path) -> dict:
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "coderun", "eval", "--samples", str(samples), "--backend", backend,
                           "--run-dir", str(run_dir), "--json", "-j", str(slots)], capture_output=True, text=True,
                          timeout=TIMEOUT, env=os.environ)
    if done.returncode != 0:
        raise SystemExit(f"local run failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return {"name": f"local workers -j {slots}", "slots": slots, "wall": time.perf_counter() - t0,
            "run_dir": run_dir, "start": 0.0}


def ray_run(samples: Path, backend: str, nodes: int, work: Path) -> dict:
    done = run_isolated(TESTS / "ray_cluster_driver.py", "--nodes", str(nodes), "--run-dir", str(work / "run"),
                        "--out", str(work / "out"), "--timeout", str(TIMEOUT), "--", "--samples", str(samples),
                        "--backend", backend, "--json", timeout=TIMEOUT + 120)
    report = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else None
    if done.returncode != 0 or report is None or report["evals"][0]["returncode"] != 0:
        raise SystemExit(f"Ray run with {nodes} node(s) failed:\n{done.stderr[-3000:]}")
    return {"name": f"ray {nodes} node{'s' if nodes > 1 else ''}", "slots": nodes,
            "wall": report["evals"][0]["seconds"], "run_dir": work / "run", "start": report["cluster_start_s"]}


def verdicts(run_dir: Path) -> dict:
    with RunStore.open(run_dir) as st:
        return {(r.task_id, r.index): r for r in st.results()}


def agreement(r: dict, n: int) -> str:
    return "all agree" if not r["differ"] and r["count"] == n else f"{len(r['differ'])} DIFFER"


def one_round(samples: Path, backend: str, by_id: dict, work: Path, n: int) -> list[dict]:
    runs = [local_run(samples, backend, j, work / f"local-{j}") for j in (1, 2)]
    runs += [ray_run(samples, backend, nodes, work / f"ray-{nodes}") for nodes in (1, 2)]
    local = {r["slots"]: r for r in runs if r["name"].startswith("local")}
    reference = verdicts(local[2]["run_dir"])
    for r in runs:
        results = verdicts(r["run_dir"])
        base = local[r["slots"]]
        over = overheads(results, by_id)
        r.update(ratio=r["wall"] / base["wall"], overhead_ms=1000 * statistics.median(over) if over else float("nan"),
                 added_ms=1000 * (r["wall"] - base["wall"]) / n, differ=[
                     k for k in reference if (results.get(k) and (results[k].verdict, results[k].failure))
                     != (reference[k].verdict, reference[k].failure)] + [k for k in results if k not in reference],
                 infra=sum(1 for x in results.values() if x.verdict.value == "infra"), count=len(results))
        print(f"{backend:6} {r['name']:18} wall {r['wall']:6.1f}s  (cluster start {r['start']:4.1f}s)  "
              f"ratio to local -j {r['slots']} {r['ratio']:5.2f}  median overhead {r['overhead_ms']:5.0f} ms/sample  "
              f"added {r['added_ms']:+6.0f} ms/sample  results {r['count']}/{n}  infra {r['infra']}  verdicts "
              f"{agreement(r, n)}", flush=True)
    return runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=["local", "docker"], default="local")
    ap.add_argument("--project", action="append", default=[])
    ap.add_argument("--limit", type=int, default=0, help="only the first N samples")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--samples", type=Path, default=DEFAULT_SAMPLES)
    args = ap.parse_args()
    if reason := skip_reason():
        raise SystemExit(f"cannot simulate a cluster here: {reason}")
    settings = load_settings()
    tasks = codereval_tasks(args, settings)
    for name in sorted({t.project for t in tasks}):  # build or find every env/image before timing
        project_sandbox_spec(find_manifest(name, settings), settings, args.backend)
    with tempfile.TemporaryDirectory(prefix="coderun-clusterspeed-") as tmp:
        samples = Path(tmp) / "samples.jsonl"
        n, unique = sample_file(args, tasks, samples)
        print(f"{n} samples ({unique} unique) of {len(tasks)} tasks in {', '.join(sorted({t.project for t in tasks}))}; "
              f"backend {args.backend}; {os.cpu_count()} cores")
        by_id = {t.task_id: t for t in tasks}
        rows = [r for i in range(args.repeat) for r in one_round(samples, args.backend, by_id, Path(tmp) / str(i), n)]
        if args.repeat > 1:
            for name in dict.fromkeys(r["name"] for r in rows):
                mine = [r for r in rows if r["name"] == name]
                print(f"{name:18} wall median {statistics.median(r['wall'] for r in mine):.1f}s, ratio median "
                      f"{statistics.median(r['ratio'] for r in mine):.2f} (min {min(r['ratio'] for r in mine):.2f}, "
                      f"max {max(r['ratio'] for r in mine):.2f}); verdicts agree in "
                      f"{sum(not r['differ'] and r['count'] == n for r in mine)}/{len(mine)} runs")


if __name__ == "__main__":
    main()
