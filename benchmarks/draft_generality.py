"""Drafts that build unedited: `projects add` → `env build` → `tasks build` → ground truth → blank, per spec.

    python benchmarks/draft_generality.py SPEC... [--out DIR] [--home DIR] [--backend local] [--markdown]
    python benchmarks/draft_generality.py --file specs.txt ...

A SPEC is what `coderun projects add` takes (`pkg==version`, a git URL, a local checkout), optionally followed
by `projects add` options after a `;` (e.g. `./checkout;--name parse`). Each step runs through the command line
in a subprocess, as a person would, with nothing edited between steps: the draft goes to `DIR/<n>.yaml`, every
step's output to `DIR/<n>.<step>.log`. `tasks build` runs with `--no-rigor` (pass+ inputs are not what ground
truth and blank measure) unless `--rigor`. A project counts as unedited when every step exits 0, ground truth
passes 100% and blank 0%. Printed: one row per spec (its build backend, the draft's source date and its
evidence, Python, baseline passed/failed, verified tasks, ground truth and blank pass@1, minutes, the first
failing step and its first error line), then the unedited total. Builds share `--home` (default: a folder under the
system's temporary directory, kept between invocations, so a rerun reuses sources and venvs).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from coderun.draft.configfiles import read_toml

DEFAULT_HOME = Path(tempfile.gettempdir()) / "coderun-bench-drafts"


def coderun(home: Path, log: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "CODERUN_HOME": str(home)}
    with log.open("w") as fh:
        fh.write(f"$ coderun {shlex.join(args)}\n")
        fh.flush()
        proc = subprocess.run([sys.executable, "-m", "coderun", *args], env=env, text=True, stdout=subprocess.PIPE,
                              stderr=fh, stdin=subprocess.DEVNULL, check=False)
        fh.write(proc.stdout)
    return proc


def first_error(log: Path) -> str:
    """The first line of the log that says what went wrong."""
    lines = log.read_text(errors="replace").splitlines()
    for line in lines:
        if re.match(r"^\s*(error|Error|✗)", line) or "Error:" in line:
            return line.strip()[:160]
    return (lines[-1].strip() if lines else "")[:160]


def pass_at_1(run_dir: str) -> float | None:
    report = json.loads((Path(run_dir) / "report.json").read_text())
    overall = report.get("overall") or {}
    value = (overall.get("pass@k") or {}).get("1")
    return None if value is None else round(100 * float(value), 2)  # the report's fraction, as a percentage


def draft_facts(manifest: Path) -> dict:
    text = manifest.read_text()
    data = yaml.safe_load(text)
    date = (data.get("install") or {}).get("resolve_as_of")
    evidence = re.search(r"^# resolve_as_of: ((?:.|\n# )*?)(?:;|$)", text, re.M)
    why = evidence.group(1).replace("\n# ", " ") if evidence else ""
    labels = (("--as-of", "--as-of"), ("moved to", "newest pin"), ("tag ", "tag's release"),
              ("the release", "release upload"), ("version ", "metadata version's release"),
              ("commit's date", "commit date"), ("only commit", "lone commit"), ("sdist was made", "PKG-INFO time"),
              ("dates version", "changelog"), ("newest date", "changelog"), ("its pin", "newest pin"))
    return {"name": data["name"], "python": data["python"], "as_of": str(date) if date else "–",
            "evidence": next((label for key, label in labels if key in why), why[:40])}


def build_backend(home: Path, manifest: Path) -> str:
    """The source's PEP 517 backend (its pyproject's `build-backend`, or setuptools for a bare setup.py)."""
    commit = re.search(r"at commit ([0-9a-f]{7,40})", manifest.read_text())
    trees = sorted((home / "src").glob(f"*-{commit.group(1)[:12]}")) if commit else []
    if not trees:
        return "–"
    backend = str(read_toml(trees[0] / "pyproject.toml").get("build-system", {}).get("build-backend", ""))
    return backend.split(".")[0] or ("setuptools" if (trees[0] / "setup.py").is_file() else "–")


def run_spec(spec: str, n: int, out: Path, home: Path, backend: str, rigor: bool = False) -> dict:
    source, _, extra = spec.partition(";")
    manifest = out / f"{n:02d}.yaml"
    row: dict = {"spec": source, "step": "", "error": "", "unedited": False}
    started = time.monotonic()
    steps = [("add", ["projects", "add", source, "-o", str(manifest), "--force", *shlex.split(extra)]),
             ("env", ["env", "build", str(manifest), "--backend", backend]),
             ("tasks", ["tasks", "build", str(manifest), "--backend", backend, "-j", "1", "--json",
                        *([] if rigor else ["--no-rigor"])]),
             ("truth", ["eval", "--project", str(manifest), "--ground-truth", "--backend", backend, "-j", "1",
                        "--json"]),
             ("blank", ["eval", "--project", str(manifest), "--blank", "--backend", backend, "-j", "1", "--json"])]
    for step, args in steps:
        log = out / f"{n:02d}.{step}.log"
        proc = coderun(home, log, *args)
        if step == "add" and manifest.is_file():
            row.update(draft_facts(manifest), build=build_backend(home, manifest))
        if proc.returncode != 0:
            row.update(step=step, error=first_error(log))
            break
        if step == "env":
            row["baseline"] = _baseline(home, row.get("name", ""))
        elif step == "tasks":
            report = json.loads(proc.stdout.strip().splitlines()[-1])["projects"][0]
            row["verified"] = f"{report['statuses'].get('verified', 0)}/{report['candidates']}"
            row["mapping"] = report["mapping"]
        elif step in ("truth", "blank"):
            row[step] = pass_at_1(json.loads(proc.stdout.strip().splitlines()[-1])["run_dir"])
    row["minutes"] = round((time.monotonic() - started) / 60, 1)
    row["unedited"] = not row["step"] and row.get("truth") == 100.0 and row.get("blank") == 0.0
    if not row["step"] and not row["unedited"]:
        row["step"] = "verdicts"
        row["error"] = f"ground truth {row.get('truth')}%, blank {row.get('blank')}%"
    return row


def _baseline(home: Path, name: str) -> str:
    envs = sorted((home / "envs").glob(f"{name}-*/env.json"), key=lambda p: p.stat().st_mtime)
    if not envs:
        return "–"
    counts = json.loads(envs[-1].read_text()).get("counts") or {}
    return f"{counts.get('passed', 0)}/{counts.get('failed', 0)}"


COLUMNS = ("spec", "build", "as_of", "python", "baseline", "verified", "truth", "blank", "minutes", "unedited", "step",
           "error")


def print_rows(rows: list[dict], markdown: bool) -> None:
    def cell(r: dict, c: str) -> str:
        v = r.get(c, "–")
        if c == "unedited":
            return "yes" if v else "no"
        if c == "as_of" and r.get("evidence"):
            return f"{v} ({r['evidence']})"
        return "–" if v in (None, "") else str(v)

    if markdown:
        print("| " + " | ".join(COLUMNS) + " |")
        print("|" + "---|" * len(COLUMNS))
        for r in rows:
            print("| " + " | ".join(cell(r, c).replace("|", "\\|") for c in COLUMNS) + " |")
    else:
        for r in rows:
            print("  ".join(f"{c}={cell(r, c)}" for c in COLUMNS))
    done = sum(r["unedited"] for r in rows)
    print(f"\nunedited: {done} of {len(rows)} (add → env → tasks → ground truth 100% → blank 0%)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("specs", nargs="*", help="pkg==version, a git URL or a local checkout; `;` then add options")
    ap.add_argument("--file", type=Path, help="specs, one a line (# comments)")
    ap.add_argument("--out", type=Path, default=None, help="drafts and logs (default: a new temporary folder)")
    ap.add_argument("--home", type=Path, default=DEFAULT_HOME, help=f"CODERUN_HOME (default {DEFAULT_HOME})")
    ap.add_argument("--backend", default="local", choices=["local", "docker"])
    ap.add_argument("--markdown", action="store_true", help="a table for docs/benchmarks.md")
    ap.add_argument("--rigor", action="store_true", help="also derive the pass+ inputs in `tasks build` (ground "
                    "truth and blank do not need them; off by default to save time)")
    ap.add_argument("--rows", type=Path, help="print the table of an earlier run's rows.json, running nothing")
    args = ap.parse_args()
    if args.rows:
        print_rows(json.loads(args.rows.read_text()), args.markdown)
        return
    specs = list(args.specs)
    if args.file:
        specs += [ln.split("#", 1)[0].strip() for ln in args.file.read_text().splitlines() if ln.split("#", 1)[0].strip()]
    if not specs:
        ap.error("give at least one SPEC (or --file)")
    out = args.out or Path(tempfile.mkdtemp(prefix="coderun-drafts-"))
    out.mkdir(parents=True, exist_ok=True)
    args.home.mkdir(parents=True, exist_ok=True)
    print(f"drafts and logs in {out}; CODERUN_HOME={args.home}", file=sys.stderr)
    rows = []
    for n, spec in enumerate(specs, start=1):
        row = run_spec(spec, n, out, args.home, args.backend, args.rigor)
        print(f"[{n}/{len(specs)}] {spec}: {'unedited' if row['unedited'] else 'failed at ' + row['step']} "
              f"({row['minutes']} min) {row['error']}", file=sys.stderr, flush=True)
        rows.append(row)
        (out / "rows.json").write_text(json.dumps(rows, indent=1))  # after each spec: a stopped run keeps its rows
    print_rows(rows, args.markdown)


if __name__ == "__main__":
    main()
