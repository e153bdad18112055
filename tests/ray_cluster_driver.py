"""Run `coderun eval` through a multi-node Ray cluster simulated on this machine; print JSON of what happened.

    python tests/ray_cluster_driver.py --nodes N --run-dir RUN --out DIR [--remove-after K] [--kill-after K]
                                       [--timeout S] -- EVAL_ARGS...

Meant to run inside a loopback-only network namespace (tests/ray_namespace.py). Starts a
`ray.cluster_utils.Cluster` of N nodes of one CPU each on 127.0.0.1, then `python -m coderun eval EVAL_ARGS
--run-dir RUN --cluster ADDRESS` as a subprocess (stdout and stderr in DIR). While it runs, the committed results
are counted in RUN/run.sqlite, opened read-only:
  --remove-after K  once K results are committed, the newest worker node is removed (its raylet and the actors
                    on it die, with whatever unit they were running);
  --kill-after K    once K results are committed, the eval process is killed (SIGKILL), then
                    `coderun eval --resume RUN --cluster ADDRESS` finishes the run on the same cluster.
The JSON on stdout: the cluster's address and nodes, each coderun process (argv, exit code, seconds, its
output files) and each event with the results committed when it happened (and their finished_at).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

NODE = {"num_cpus": 1, "node_ip_address": "127.0.0.1"}


def finished(run_dir: Path) -> dict[str, str]:
    """{"task_id#idx": finished_at} of the results committed in the run's store, read-only (empty while the
    store does not exist yet). A result written again later (a sample run twice) gets a new finished_at."""
    db = run_dir / "run.sqlite"
    if not db.exists():
        return {}
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as con:
            return {f"{t}#{i}": at for t, i, at in con.execute("SELECT task_id, idx, finished_at FROM results")}
    except sqlite3.OperationalError:  # not made yet, or locked for longer than the timeout
        return {}


def committed(run_dir: Path) -> int:
    return len(finished(run_dir))


def start_cluster(nodes: int):
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={**NODE, "include_dashboard": False})
    workers = [cluster.add_node(**NODE) for _ in range(nodes - 1)]
    cluster.wait_for_nodes()
    return cluster, workers


class Eval:
    """One `coderun eval` process, output in files."""

    def __init__(self, name: str, argv: list[str], out: Path):
        self.name, self.argv = name, argv
        self.stdout, self.stderr = out / f"{name}.stdout", out / f"{name}.stderr"
        self.started = time.monotonic()
        with self.stdout.open("w") as o, self.stderr.open("w") as e:
            self.proc = subprocess.Popen(argv, stdout=o, stderr=e, start_new_session=True)

    def wait(self, deadline: float) -> int | None:
        try:
            return self.proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            return None

    def record(self) -> dict:
        return {"name": self.name, "argv": self.argv, "returncode": self.proc.returncode,
                "seconds": round(time.monotonic() - self.started, 2), "stdout": str(self.stdout),
                "stderr": str(self.stderr)}


def watch(ev: Eval, run_dir: Path, after: int, deadline: float) -> int | None:
    """Wait until `after` results are committed (the count then) or the process ends first (None)."""
    while time.monotonic() < deadline and ev.proc.poll() is None:
        n = committed(run_dir)
        if n >= after:
            return n
        time.sleep(0.05)
    return None


def event(name: str, n: int, run_dir: Path) -> dict:
    """What happened, the results committed when it was decided (n) and right after, with their times."""
    rows = finished(run_dir)
    return {"event": name, "committed": n, "committed_after": len(rows), "finished": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--run-dir", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--remove-after", type=int)
    ap.add_argument("--kill-after", type=int)
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("eval_args", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    eval_args = [a for a in args.eval_args if a != "--"]
    args.out.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + args.timeout
    t0 = time.monotonic()
    cluster, workers = start_cluster(args.nodes)
    report: dict = {"address": cluster.address, "nodes": args.nodes, "cluster_start_s": round(time.monotonic() - t0, 2),
                    "events": [], "evals": []}
    coderun = [sys.executable, "-m", "coderun", "eval"]
    try:
        ev = Eval("eval", [*coderun, *eval_args, "--run-dir", str(args.run_dir), "--cluster", cluster.address],
                  args.out)
        if args.remove_after is not None:
            n = watch(ev, args.run_dir, args.remove_after, deadline)
            if n is not None and workers:
                cluster.remove_node(workers.pop())
                report["events"].append(event("node removed", n, args.run_dir))
        if args.kill_after is not None:
            n = watch(ev, args.run_dir, args.kill_after, deadline)
            if n is not None:
                os.kill(ev.proc.pid, signal.SIGKILL)
                ev.proc.wait()
                report["events"].append(event("driver killed", n, args.run_dir))
        ev.wait(deadline)
        report["evals"].append(ev.record())
        if any(e["event"] == "driver killed" for e in report["events"]):
            resume = Eval("resume", [*coderun, "--resume", str(args.run_dir), "--cluster", cluster.address,
                                     "--json"], args.out)
            resume.wait(deadline)
            report["evals"].append(resume.record())
    finally:
        report["committed"] = committed(args.run_dir)
        cluster.shutdown()
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
