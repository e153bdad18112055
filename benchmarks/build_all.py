"""The whole benchmark's task build from an empty home, timed per project; two such builds compared.

    python benchmarks/build_all.py run --home EMPTY_DIR [--code CHECKOUT] [--project P ...] [-j 2]
    python benchmarks/build_all.py whole --home EMPTY_DIR [--code CHECKOUT] [--project P ...] [--like HOME]
    python benchmarks/build_all.py pairs --home-a HOME_A --code-a OLD --home-b HOME_B --group P,Q --group R,S ...
    python benchmarks/build_all.py compare HOME_A HOME_B [--code-a DIR] [--code-b DIR] [--markdown]

`run` builds each project with `coderun tasks build P -j J` in turn, as `tasks build --all` does, in a
subprocess whose CODERUN_HOME is the given home; pip's and uv's caches are the user's (warm), so downloads of
wheels are not what is timed. `--code` runs another checkout of coderun (an older commit, via PYTHONPATH)
with its own built-in manifests; the projects default to every one it ships. Each project's wall time, exit
code and the machine's load go to HOME.jsonl as they finish, and its output to HOME.logs/P.log. A project
already in HOME.jsonl is not built again, so a stopped run goes on where it stopped (the project it stopped in
resumes its build, and its time is then only the part after the restart).

`whole` builds them all with one `coderun tasks build P1 P2 ...` (the projects `--like` HOME built, else every
one the checkout ships), as a user would, with that command's own defaults (builds side by side where the
code has them); its wall time goes to HOME.total.json, and to HOME.jsonl each project's own build time as its
stored report says (they overlap: their sum is more than the wall time).

Both also record the CPU seconds (user + system) of the whole build's process tree (`cpu_seconds`, from
getrusage of the finished children: processes left to init are missed, and the sandbox's workers are) and
print them as a share of the cores over the wall time: the work a build costs, apart from how it was packed
on the cores and from the machine's speed, which differs between machines of the same size. The machine's
own busy share over the same time (`machine_busy`, from /proc/stat: every process, this build's and any
other's) says how much of the cores the build left idle, on a machine with nothing else running.

`pairs` measures two codes back to back in groups of projects, for a comparison too long for one sitting on a
slow machine: per group, A's `run` of its projects and B's `whole` of them, one right after the other (B
first in the first, third, ... group, A first in the others, so that the machine's drift within a pair
cancels over the pairs), each side in one home for every group. B's wall time is then the sum of its
groups' commands: each group's command ends with its own tail (its last builds alone on the cores), which
one command for every project would not have, so the sum is at least what `tasks build --all` would take.
A's is the same sum as one `run` (it builds one project after another anyway). A group already done on a
side is not built again, so pairs left for later go on in another sitting; a group B did not finish is
built again in full (a stopped `whole` leaves no total).

`compare` reads two such homes: per project both wall times and their ratio, the verified tasks of each, and
whether the verified sets, their mapped tests and their pass+ input counts are the same (read with
`coderun tasks list --json --status all`, each home by its own code); then the totals over the projects both
built and every task that differs, with how. `per stage`: `benchmarks/build_stages.py` on the newer home.
Measurement, not product code.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import yaml
from codereval_coverage import render


def coderun_env(home: Path, code: Path | None) -> dict[str, str]:
    env = {**os.environ, "CODERUN_HOME": str(home), "COLUMNS": "120"}
    if code:
        env["PYTHONPATH"] = str(code)
    return env


def run_coderun(argv: list[str], home: Path, code: Path | None, **kwargs) -> subprocess.CompletedProcess:
    """`python ARGV` for the checkout `code` (default: this one). It runs in that checkout: `-m` and `-c` put the
    working directory first on sys.path, so from another checkout's root its `coderun` would be imported
    instead of the one PYTHONPATH names (every `--code` build run from this repository's root ran this code)."""
    cwd = code or Path(__file__).resolve().parents[1]
    return subprocess.run([sys.executable, *argv], env=coderun_env(home, code), cwd=cwd, check=False, **kwargs)


def shipped_projects(code: Path) -> list[str]:
    """The names of the built-in manifests of a checkout, sorted as `tasks build --all` takes them."""
    names = [yaml.safe_load(p.read_text())["name"] for p in (code / "projects").glob("*.yaml")]
    return sorted(names, key=str.lower)


def done_already(out: Path) -> dict[str, dict]:
    if not out.exists():
        return {}
    rows = (json.loads(line) for line in out.read_text().splitlines() if line.strip())
    return {r["project"]: r for r in rows}


def children_cpu() -> float:
    """User + system CPU seconds of this process's finished children and all their descendants: what a build
    cost the machine, apart from how its work was packed on the cores."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def cpu_jiffies() -> tuple[int, int]:
    """(busy, total) clock ticks of all the machine's cores since boot, from /proc/stat ((0, 0) without it)."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    except (OSError, ValueError):
        return 0, 0
    idle = fields[3] + fields[4]   # idle and iowait
    return sum(fields) - idle, sum(fields)


def machine_busy(before: tuple[int, int], after: tuple[int, int]) -> float | None:
    """The share of the cores busy between two cpu_jiffies() readings."""
    total = after[1] - before[1]
    return round((after[0] - before[0]) / total, 3) if total > 0 else None


def share(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def busy(cpu: float, wall: float) -> str:
    return f"{cpu / (wall * (os.cpu_count() or 1)):.0%}" if wall else "–"


def build_one(project: str, home: Path, code: Path | None, jobs: int, logs: Path) -> dict:
    logs.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()[0]
    start, cpu, jiffies = time.monotonic(), children_cpu(), cpu_jiffies()
    with (logs / f"{project}.log").open("w") as log:
        rc = run_coderun(["-m", "coderun", "tasks", "build", project, "-j", str(jobs)], home, code,
                         stdout=log, stderr=subprocess.STDOUT).returncode
    return {"project": project, "seconds": round(time.monotonic() - start, 1), "rc": rc,
            "cpu_seconds": round(children_cpu() - cpu, 1), "machine_busy": machine_busy(jiffies, cpu_jiffies()),
            "load_before": round(load, 2), "load_after": round(os.getloadavg()[0], 2),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def run(args) -> int:
    home = args.home.resolve()
    code = args.code.resolve() if args.code else None
    out, logs = home.with_suffix(".jsonl"), home.with_suffix(".logs")
    home.mkdir(parents=True, exist_ok=True)
    projects = args.project or shipped_projects(code or Path(__file__).resolve().parents[1])
    done = done_already(out)
    print(f"{len(projects)} projects, home {home}, code {code or 'this checkout'}, {os.cpu_count()} cores")
    for i, project in enumerate(projects, 1):
        if project in done:
            continue
        row = build_one(project, home, code, args.jobs, logs)
        with out.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(f"[{i}/{len(projects)}] {project}: {row['seconds']:.1f} s (CPU {row['cpu_seconds']:.1f} s, machine "
              f"{share(row['machine_busy'])} busy), exit {row['rc']}, load {row['load_before']:.1f} -> "
              f"{row['load_after']:.1f}", flush=True)
    rows = done_already(out)
    wall, cpu = sum(r["seconds"] for r in rows.values()), sum(r.get("cpu_seconds", 0.0) for r in rows.values())
    print(f"total {wall:.1f} s over {len(rows)} projects; CPU {cpu:.0f} s ({busy(cpu, wall)} of the cores)")
    return 0


def whole(args) -> int:
    home = args.home.resolve()
    code = args.code.resolve() if args.code else None
    projects = args.project or (sorted(done_already(args.like.resolve().with_suffix(".jsonl")), key=str.lower)
                                if args.like else shipped_projects(code or Path(__file__).resolve().parents[1]))
    build_whole(projects, home, code)
    return 0


def build_whole(projects: list[str], home: Path, code: Path | None) -> dict:
    """One `tasks build` of `projects` in `home`, timed; its total is added to HOME.total.json's groups and
    each project's own time (from its stored report) to HOME.jsonl."""
    home.mkdir(parents=True, exist_ok=True)
    print(f"{len(projects)} projects in one command, home {home}, code {code or 'this checkout'}, "
          f"{os.cpu_count()} cores", flush=True)
    load, start, cpu, jiffies = os.getloadavg()[0], time.monotonic(), children_cpu(), cpu_jiffies()
    with home.with_suffix(".log").open("a") as log:
        rc = run_coderun(["-m", "coderun", "tasks", "build", *projects], home, code,
                         stdout=log, stderr=subprocess.STDOUT).returncode
    total = {"projects": projects, "seconds": round(time.monotonic() - start, 1), "rc": rc,
             "cpu_seconds": round(children_cpu() - cpu, 1), "machine_busy": machine_busy(jiffies, cpu_jiffies()),
             "load_before": round(load, 2), "load_after": round(os.getloadavg()[0], 2),
             "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    groups = [g for g in whole_groups(home) if not set(g["projects"]) & set(projects)]
    home.with_suffix(".total.json").write_text(json.dumps({"groups": [*groups, total]}, indent=1))
    reports = stored_reports(home, code)
    rows = {**done_already(home.with_suffix(".jsonl")),
            **{p: {"project": p, "seconds": reports.get(p, {}).get("seconds", 0.0), "rc": rc} for p in projects}}
    home.with_suffix(".jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows.values()))
    print(f"wall {total['seconds']:.1f} s, exit {rc}, load {total['load_before']:.1f} -> {total['load_after']:.1f}; "
          f"sum of the projects' own times {sum(reports.get(p, {}).get('seconds', 0.0) for p in projects):.1f} s; "
          f"CPU {total['cpu_seconds']:.0f} s ({busy(total['cpu_seconds'], total['seconds'])} of the cores); "
          f"machine busy {share(total['machine_busy'])}", flush=True)
    return total


def whole_groups(home: Path) -> list[dict]:
    """The `whole` commands that built `home`, each {projects, seconds, ...} (one, in older files)."""
    path = home.with_suffix(".total.json")
    if not path.exists():
        return []
    total = json.loads(path.read_text())
    return total.get("groups", [total])


def pairs(args) -> int:
    home_a, home_b = args.home_a.resolve(), args.home_b.resolve()
    code_a, code_b = (c.resolve() if c else None for c in (args.code_a, args.code_b))
    groups = [[p for p in g.split(",") if p] for g in args.group]
    for i, group in enumerate(groups, 1):
        b_done = any(sorted(g["projects"]) == sorted(group) for g in whole_groups(home_b))
        sides = ["b", "a"] if i % 2 else ["a", "b"]
        for side in sides:
            if side == "a" and not set(group) <= done_already(home_a.with_suffix(".jsonl")).keys():
                print(f"group {i}/{len(groups)}, A: {', '.join(group)}", flush=True)
                run(argparse.Namespace(home=home_a, code=code_a, project=group, jobs=args.jobs))
            elif side == "b" and not b_done:
                print(f"group {i}/{len(groups)}, B: {', '.join(group)}", flush=True)
                build_whole(group, home_b, code_b)
    return 0


def stored_reports(home: Path, code: Path | None) -> dict[str, dict]:
    """project -> its stored build report (seconds, stage_seconds, ...)."""
    script = ("import json; from coderun.config import load_settings; from coderun.tasks.store import build_reports;"
              "print(json.dumps({p: json.loads(r) for p, r in build_reports(load_settings()).items()}))")
    done = run_coderun(["-c", script], home, code, capture_output=True, text=True)
    done.check_returncode()
    return json.loads(done.stdout)


def stored_tasks(home: Path, code: Path | None) -> dict[str, dict[str, dict]]:
    """project -> task id -> the task's listed fields, every status."""
    done = run_coderun(["-m", "coderun", "tasks", "list", "--json", "--status", "all"], home, code,
                       capture_output=True, text=True)
    done.check_returncode()
    tasks: dict[str, dict[str, dict]] = {}
    for line in done.stdout.splitlines():
        t = json.loads(line)
        tasks.setdefault(t["project"], {})[t["task_id"]] = t
    return tasks


def verified(tasks: dict[str, dict]) -> dict[str, dict]:
    return {k: t for k, t in tasks.items() if t["status"] == "verified"}


def inputs(t: dict) -> int:
    return (t.get("rigor") or {}).get("inputs", 0)


def task_differences(a: dict[str, dict], b: dict[str, dict]) -> list[str]:
    """How the verified tasks of one project differ between builds A and B, one line per task."""
    va, vb = verified(a), verified(b)
    lines = [f"{k}: verified in A only (B: {b[k]['status'] if k in b else 'absent'})"
             for k in sorted(va.keys() - vb.keys())]
    lines += [f"{k}: verified in B only (A: {a[k]['status'] if k in a else 'absent'})"
              for k in sorted(vb.keys() - va.keys())]
    for k in sorted(va.keys() & vb.keys()):
        if sorted(va[k]["tests"]) != sorted(vb[k]["tests"]):
            lines.append(f"{k}: mapped tests differ ({len(va[k]['tests'])} in A, {len(vb[k]['tests'])} in B)")
        elif inputs(va[k]) != inputs(vb[k]):
            lines.append(f"{k}: pass+ inputs differ ({inputs(va[k])} in A, {inputs(vb[k])} in B)")
    return lines


def compare(args) -> int:
    homes = [args.home_a.resolve(), args.home_b.resolve()]
    times = [done_already(h.with_suffix(".jsonl")) for h in homes]
    tasks = [stored_tasks(h, c.resolve() if c else None) for h, c in zip(homes, (args.code_a, args.code_b), strict=True)]
    common = sorted(times[0].keys() & times[1].keys(), key=str.lower)
    head = ["project", "A s", "B s", "B/A", "verified A", "verified B", "same tasks, tests, inputs"]
    rows, differences, total = [], [], [0.0, 0.0, 0, 0]   # seconds A, B; verified A, B
    for p in common:
        a, b = tasks[0].get(p, {}), tasks[1].get(p, {})
        diff = task_differences(a, b)
        differences += diff
        row = [times[0][p]["seconds"], times[1][p]["seconds"], len(verified(a)), len(verified(b))]
        total = [x + y for x, y in zip(total, row, strict=True)]
        rows.append(_row(p, row, "yes" if not diff else f"{len(diff)} differ"))
    rows.append(_row(f"total ({len(common)} projects)", total, f"{len(differences)} tasks differ"))
    walls = [_wall(h, common) for h in homes]
    if any(w is not None for w in walls):  # a home built in one command: its wall time, not the sum
        wall = [w if w is not None else t for w, t in zip(walls, total[:2], strict=True)]
        rows.append(_row("wall time, one command (or one a group) where one built them", [*wall, *total[2:]], ""))
    print(render(head, rows, args.markdown))
    for line in differences:
        print(f"- {line}" if args.markdown else f"  {line}")
    return 0


def _wall(home: Path, common: list[str]) -> float | None:
    """The wall time of the commands that built `home` (`whole`, one or a group each), summed, when together
    they built just these projects."""
    groups = whole_groups(home)
    built = sorted((p for g in groups for p in g["projects"]), key=str.lower)
    return sum(g["seconds"] for g in groups) if groups and built == common else None


def _row(name: str, figures: list, same: str) -> list[str]:
    sa, sb, va, vb = figures
    return [name, f"{sa:.1f}", f"{sb:.1f}", f"{sb / sa:.2f}", str(va), str(vb), same]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="build every project into an empty home, timed")
    r.add_argument("--home", type=Path, required=True, help="the CODERUN_HOME to build in (new or empty)")
    r.add_argument("--code", type=Path, help="another checkout of coderun to run (default: this one)")
    r.add_argument("--project", action="append", default=[], help="only these projects (repeatable)")
    r.add_argument("-j", "--jobs", type=int, default=2, help="tasks build -j (default 2)")
    w = sub.add_parser("whole", help="build the projects with one `tasks build` command, timed")
    w.add_argument("--home", type=Path, required=True, help="the CODERUN_HOME to build in (new or empty)")
    w.add_argument("--code", type=Path, help="another checkout of coderun to run (default: this one)")
    w.add_argument("--project", action="append", default=[], help="only these projects (repeatable)")
    w.add_argument("--like", type=Path, help="the projects this home (built by `run`) holds")
    pr = sub.add_parser("pairs", help="two codes back to back, a group of projects at a time")
    pr.add_argument("--home-a", type=Path, required=True, help="A's CODERUN_HOME (built by `run`)")
    pr.add_argument("--code-a", type=Path, help="A's checkout (default: this one)")
    pr.add_argument("--home-b", type=Path, required=True, help="B's CODERUN_HOME (built by `whole`, per group)")
    pr.add_argument("--code-b", type=Path, help="B's checkout (default: this one)")
    pr.add_argument("--group", action="append", required=True, help="a group's projects, comma-separated")
    pr.add_argument("-j", "--jobs", type=int, default=2, help="A's tasks build -j (default 2)")
    c = sub.add_parser("compare", help="two homes built by `run` or `whole`, per project")
    c.add_argument("home_a", type=Path)
    c.add_argument("home_b", type=Path)
    c.add_argument("--code-a", type=Path, help="the checkout that built HOME_A (default: this one)")
    c.add_argument("--code-b", type=Path, help="the checkout that built HOME_B (default: this one)")
    c.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    return {"run": run, "whole": whole, "pairs": pairs, "compare": compare}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
