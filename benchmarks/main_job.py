"""The quick start's main job, timed as a new user meets it: cold (empty home) and warm (tasks built);
the figures are in docs/benchmarks.md.

    python benchmarks/main_job.py [--runs 3] [--project cachetools] [--homes DIR] [--pip-cache DIR]

Each cold run gets a new, empty `$CODERUN_HOME` (in `--homes`, default ~/.cache, beside the default home);
pip's cache stays warm (`--pip-cache`, default: pip's own or PIP_CACHE_DIR), so downloads are not timed.
After the last cold run, the same command runs as many times again in that home: the warm time. Printed:
every run's wall time, exit code and the ground truth it reported, the cold and warm medians, and the
machine's load and speed (`speed_probe`) before and after (other processes share the cores).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run(home: Path, project: str, env: dict[str, str]) -> tuple[float, int, str]:
    """(seconds, exit code, the run's ground truth as passed/tasks) of one `coderun eval` line."""
    run_dir = Path(tempfile.mkdtemp(prefix="main-job-run-"))
    argv = [sys.executable, "-m", "coderun", "eval", "--project", project, "--ground-truth", "--backend", "local",
            "--run-dir", str(run_dir / "run")]
    start = time.monotonic()
    done = subprocess.run(argv, env={**env, "CODERUN_HOME": str(home)}, capture_output=True, text=True,
                          check=False)
    seconds = time.monotonic() - start
    report = run_dir / "run" / "report.json"
    truth = "-"
    if report.exists():
        overall = json.loads(report.read_text())["overall"]
        truth = f"{overall['pass@k']['1'] * overall['tasks']:.0f}/{overall['tasks']}"
    elif done.returncode:
        print(done.stderr[-2000:], file=sys.stderr)
    shutil.rmtree(run_dir, ignore_errors=True)
    return seconds, done.returncode, truth


def speed_probe() -> float:
    """Seconds one core takes for a fixed pure-Python loop (10 million additions): a machine's speed, which varies
    on shared hosts from hour to hour (1.27 s on a slow one), so that figures from two days can be compared."""
    start, total = time.perf_counter(), 0
    for i in range(10_000_000):
        total += i
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3, help="cold runs (default 3)")
    ap.add_argument("--project", default="cachetools")
    ap.add_argument("--homes", type=Path, default=Path.home() / ".cache",
                    help="where the homes are made (default ~/.cache)")
    ap.add_argument("--pip-cache", default=os.environ.get("PIP_CACHE_DIR"), help="pip's cache, kept warm")
    args = ap.parse_args()
    # A user's installed coderun imports from its bytecode: a shell that turns writing it off would time
    # compiling every changed module instead (about 0.1 s a run here).
    env = {k: v for k, v in os.environ.items() if k not in ("CODERUN_HOME", "PYTHONDONTWRITEBYTECODE")}
    if args.pip_cache:
        env["PIP_CACHE_DIR"] = args.pip_cache
    print(f"load before: {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} cores; homes in {args.homes}")
    print(f"speed probe before: {speed_probe():.2f} s")
    cold, home = [], None
    for i in range(args.runs):
        if home:
            shutil.rmtree(home, ignore_errors=True)
        args.homes.mkdir(parents=True, exist_ok=True)
        home = Path(tempfile.mkdtemp(prefix="main-job-home-", dir=args.homes))
        seconds, code, truth = run(home, args.project, env)
        cold.append(seconds)
        print(f"cold {i + 1}: {seconds:6.1f} s  exit {code}  ground truth {truth}", flush=True)
    warm = []
    for i in range(args.runs):
        seconds, code, truth = run(home, args.project, env)
        warm.append(seconds)
        print(f"warm {i + 1}: {seconds:6.1f} s  exit {code}  ground truth {truth}", flush=True)
    print(f"cold median of {len(cold)}: {statistics.median(cold):.1f} s; warm median of {len(warm)}: "
          f"{statistics.median(warm):.1f} s")
    print(f"load after: {os.getloadavg()[0]:.2f} (1 min); speed probe after: {speed_probe():.2f} s")
    shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
