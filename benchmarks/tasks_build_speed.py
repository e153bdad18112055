"""Task build speed: `coderun tasks build PROJECT -j 1` against `-j 2` (or any list of job counts).

    python benchmarks/tasks_build_speed.py [--project P] [--jobs 1 2] [--base-home DIR] [--keep]

The project's environment (venv and baseline) is built once in `--base-home` (default: a folder under the
system's temporary directory, kept between invocations) before anything is timed. Each measured build then
runs in a fresh home that links to that environment, its source checkout and caches, but has no analysis
cache, no task store and no logs: what is timed is the whole `tasks build` (analysis, coverage mapping,
verification). The build goes through the command line in a subprocess, as a person would run it.

Printed per job count: wall time, the build's own time and its verification part, tasks per status, resumed tasks (always 0 here),
workers that fell back to the naive executor, and tasks capped; then the machine's load (`uptime`) before
and after, since other processes share the cores. Without --project: the built-in project with the most
candidate functions among those whose environment is already in the base home, else zope.interface.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SHARED = ("envs", "src", "git", "sdists", "wheelhouse")  # built once, linked into every fresh home
DEFAULT_BASE = Path(tempfile.gettempdir()) / "coderun-bench-tasks-base"


def coderun(home: Path, *args: str, capture: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "CODERUN_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "coderun", *args], env=env, text=True,
                          capture_output=capture, check=False)


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def fresh_home(base: Path, where: Path, name: str) -> Path:
    home = where / name
    home.mkdir(parents=True)
    for d in SHARED:
        (base / d).mkdir(exist_ok=True)
        (home / d).symlink_to(base / d)
    return home


def measure(base: Path, where: Path, project: str, jobs: int, i: int) -> dict:
    home = fresh_home(base, where, f"{i}-j{jobs}")
    t0 = time.perf_counter()
    res = coderun(home, "tasks", "build", project, "-j", str(jobs), "--json")
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        sys.exit(f"tasks build -j {jobs} failed (exit {res.returncode}):\n{res.stderr[-3000:]}")
    report = json.loads(res.stdout)["projects"][0]
    return {"jobs": jobs, "wall": wall, "report": report}


def _best(rows: list[dict], jobs: int) -> dict:
    return min((r for r in rows if r["jobs"] == jobs), key=lambda r: r["wall"])


def largest(base: Path) -> str:
    """The built-in project with the most candidate functions among those with an environment in `base`."""
    from coderun.analyzers import analyze_cached
    from coderun.config import Settings
    from coderun.envs.local import find_local_env
    from coderun.manifests.schema import all_manifests
    from coderun.tasks.discovery import select

    settings = Settings(home=base)
    sizes = {}
    for m in all_manifests(settings):
        env = find_local_env(m, settings)
        if env is not None:
            analysis = analyze_cached(env.checkout, settings, python=env.python, import_root=m.import_root)
            sizes[m.name] = len(select(m, analysis).candidates)
    for name, n in sorted(sizes.items(), key=lambda kv: -kv[1]):
        print(f"  {name}: {n} candidate functions")
    return max(sizes, key=lambda k: sizes[k]) if sizes else "zope.interface"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--project", help="built-in project name (default: the largest with an environment)")
    ap.add_argument("--jobs", type=int, nargs="+", default=[1, 2],
                    help="job counts, in order; repeat them to measure again (e.g. 1 2 1 2)")
    ap.add_argument("--base-home", type=Path, default=DEFAULT_BASE)
    ap.add_argument("--keep", action="store_true", help="keep the fresh homes (their logs and stores)")
    args = ap.parse_args()
    base = args.base_home.resolve()
    base.mkdir(parents=True, exist_ok=True)
    project = args.project or largest(base)
    print(f"project: {project}; environment in {base}")
    env = coderun(base, "env", "build", project, capture=False)  # finds it when built, else builds it
    if env.returncode != 0:
        sys.exit(f"env build {project} failed (exit {env.returncode})")
    where = Path(tempfile.mkdtemp(prefix="coderun-bench-tasks-"))
    rows = []
    try:
        before = uptime()
        for i, jobs in enumerate(args.jobs):
            rows.append(measure(base, where, project, jobs, i))
            r = rows[-1]
            print(f"-j {jobs}: {r['wall']:.1f}s", flush=True)
        after = uptime()
    finally:
        if not args.keep:
            shutil.rmtree(where, ignore_errors=True)
    print(f"\n{project}: tasks build, {os.cpu_count()} cores")
    print(f"{'jobs':>4}  {'wall s':>7}  {'build s':>7}  {'verify s':>8}  tasks per status")
    for r in rows:
        rep = r["report"]
        statuses = ", ".join(f"{n} {k}" for k, n in sorted(rep["statuses"].items(), key=lambda kv: -kv[1]))
        print(f"{r['jobs']:>4}  {r['wall']:>7.1f}  {rep['seconds']:>7.1f}  {rep['verify_seconds']:>8.1f}  {statuses}; "
              f"{len(rep['capped'])} capped, {len(rep['fallbacks'])} fallbacks, {rep['resumed']} resumed")
    if len({r["jobs"] for r in rows}) > 1:
        first, last = (_best(rows, j) for j in (min(args.jobs), max(args.jobs)))
        print(f"speed-up -j {last['jobs']} over -j {first['jobs']} (best of each): {first['wall'] / last['wall']:.2f}x "
              f"whole build, {first['report']['verify_seconds'] / max(last['report']['verify_seconds'], 0.1):.2f}x "
              "verification")
    print(f"load before: {before}\nload after:  {after}")
    if args.keep:
        print(f"homes kept in {where}")


if __name__ == "__main__":
    main()
