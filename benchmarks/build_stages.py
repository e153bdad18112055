"""Where a whole-benchmark task build spends its time: per project and per stage, read from what it left.

    coderun tasks build --all -j 2          # from an empty $CODERUN_HOME, pip's cache warm
    python benchmarks/build_stages.py [--markdown] [--projects DIR ...]

Per project: the environment (venv and installs; the baseline run of the project's suite), from the env's
env.json, then the task build's stages from its stored report (`stage_seconds`): analysis, coverage map (one
coverage run of the suite), recording (the original's calls, for pass+), verification (the original three
times, the stubbed and trivial bodies), pass+ (input derivation). The total is the environment's (install
and baseline, from env.json) plus the task build's own time, whether the task build made the environment or
`tasks build` of several projects built every environment first (its own `coderun env build`). Projects
whose stored build predates stage times show only the total.
A second table splits verification's and pass+'s sandbox runs by kind (the report's `run_kinds`): each
kind's seconds summed over its runs (runs in parallel add up), and the harness's integrity checks among them.
Measurement, not product code.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from codereval_coverage import render

from coderun.config import load_settings
from coderun.envs.local import find_local_env
from coderun.errors import CoderunError
from coderun.manifests.schema import known_manifests
from coderun.tasks import store
from coderun.tasks.sandbox_runs import RUN_KINDS

STAGES = ("analysis", "coverage map", "recording", "verification", "pass+")
HEAD = ["project", "verified", "install", "baseline", *STAGES, "total"]


def env_seconds(manifest, settings) -> tuple[float | None, float | None]:
    """(install, baseline) seconds of the project's local environment, None where not recorded."""
    try:
        env = find_local_env(manifest, settings)
    except CoderunError:
        env = None
    if env is None:
        return None, None
    meta = json.loads((env.path / "env.json").read_text())
    install, whole = meta.get("install_seconds"), meta.get("build_seconds")
    return install, (whole - install if whole is not None and install is not None else None)


def fmt(x: float | None) -> str:
    return "–" if x is None else f"{x:.1f}"


def rows(settings) -> list[list[str]]:
    manifests, _ = known_manifests(settings)
    reports = {p: json.loads(r) for p, r in store.build_reports(settings).items()}
    out, totals = [], [0.0] * (len(HEAD) - 2)
    for m in sorted(manifests, key=lambda m: m.name.lower()):
        report = reports.get(m.name)
        if report is None:
            continue
        stages = report.get("stage_seconds", {})
        install, baseline = env_seconds(m, settings)
        total = report["seconds"] - stages.get("environment", 0.0) + (install or 0.0) + (baseline or 0.0)
        cells = [install, baseline, *(stages.get(s) for s in STAGES), total]
        totals = [t + (c or 0.0) for t, c in zip(totals, cells, strict=True)]
        out.append([m.name, str(report["statuses"].get("verified", 0)), *map(fmt, cells)])
    verified = sum(int(r[1]) for r in out)
    out.append([f"total ({len(out)} projects)", str(verified), *map(fmt, totals)])
    return out


def kind_rows(settings) -> list[list[str]]:
    """Per project with run kinds stored: each kind's summed run seconds, the integrity checks' and the runs'."""
    reports = {p: json.loads(r) for p, r in store.build_reports(settings).items()}
    out, totals = [], [0.0] * (len(RUN_KINDS) + 2)
    for name in sorted(reports, key=str.lower):
        kinds = reports[name].get("run_kinds") or {}
        if not kinds:
            continue
        cells = [kinds.get(k, {}).get("seconds", 0.0) for k in RUN_KINDS]
        cells += [sum(k.get("checks_seconds", 0.0) for k in kinds.values()), sum(cells)]
        totals = [t + c for t, c in zip(totals, cells, strict=True)]
        out.append([name, *map(fmt, cells)])
    if out:
        out.append([f"total ({len(out)} projects)", *map(fmt, totals)])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--markdown", action="store_true", help="a Markdown table (for docs/benchmarks.md)")
    ap.add_argument("--projects", type=Path, action="append", default=[], help="more manifest folders")
    args = ap.parse_args()
    body = rows(load_settings(args.projects))
    print("seconds per stage (install and baseline from each environment's env.json; total: those and the task "
          "build's stages)")
    print(render(HEAD, body, args.markdown))
    kinds = kind_rows(load_settings(args.projects))
    if kinds:
        print("\nseconds of sandbox runs by kind (each run's own time, summed; integrity checks: of all of them)")
        print(render(["project", *RUN_KINDS, "integrity checks", "all runs"], kinds, args.markdown))


if __name__ == "__main__":
    main()
