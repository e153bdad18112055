"""Local against docker over the built benchmark: ground truth, blank bodies and CoderEval's CodeGen samples
evaluated on both backends, per project, and every sample whose verdict or failure class differs.

    python benchmarks/backend_agreement.py RUNS [--project P ...] [--samples FILE] [--markdown]

RUNS/<project>/<backend>/<kind> (kind: gt, blank, codegen) are run folders. One that is missing is made with
`coderun eval` (one that was interrupted is resumed), a project at a time, so an interrupted sweep goes on where
it stopped; the projects are those with built tasks in $CODERUN_HOME (default) or the ones named. Prints per
project, for each backend: ground truth's and the blank bodies' pass@1 and acc@1, samples with an
infrastructure verdict; then the CodeGen samples both backends graded and how many got the same verdict and
failure class. `--differences` lists each differing sample with both reasons. The docker images are built by
the first run that needs them (time them with `benchmarks/image_table.py` first). Measurement, not product code.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from coderun.config import load_settings
from coderun.tasks import store

DEFAULT_SAMPLES = Path(__file__).resolve().parents[2] / "shared" / "codereval" / "results-CodeGen-raw.jsonl"
KINDS = {"gt": ["--ground-truth"], "blank": ["--blank"], "codegen": ["--samples"]}
BACKENDS = ("local", "docker")
NO_SAMPLES = "no usable sample for the selected tasks"
HEAD = ["project", "tasks", "GT local", "GT docker", "blank local", "blank docker", "infra l/d",
        "CodeGen same/both"]


def ensure_run(run: Path, project: str, backend: str, kind: str, samples: Path) -> str:
    """The run folder made (or finished) when needed; "" when done, else why it has none."""
    if (run / "report.json").is_file():
        return ""
    if (run / "none.txt").is_file():
        return (run / "none.txt").read_text().strip()
    args = ["--resume", str(run)] if (run / "run.sqlite").is_file() else [
        "--project", project, *KINDS[kind], *([str(samples)] if kind == "codegen" else []),
        "--backend", backend, "--run-dir", str(run)]
    print(f"{project}: {kind} on {backend}", file=sys.stderr, flush=True)
    done = subprocess.run(["coderun", "eval", *args], capture_output=True, text=True)
    said = " ".join((done.stdout + done.stderr).split())  # the message may be wrapped to the terminal's width
    if done.returncode != 0 and NO_SAMPLES in said:
        run.mkdir(parents=True, exist_ok=True)
        (run / "none.txt").write_text("no CodeGen sample for its tasks\n")
        return "no CodeGen sample for its tasks"
    if done.returncode != 0:
        raise SystemExit(f"{project}: coderun eval {' '.join(args)} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return ""


def verdicts(run: Path) -> dict[tuple[str, int], tuple[str, str, str]]:
    db = run / "run.sqlite"
    if not db.is_file():
        return {}
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT task_id, idx, verdict, COALESCE(failure, ''), COALESCE(reason, '') "
                            "FROM results").fetchall()
    return {(t, i): (v, f, r) for t, i, v, f, r in rows}


def headline(run: Path) -> tuple[str, int, int]:
    """'pass@1 / acc@1' in percent, the tasks and the infrastructure verdicts of a run's report."""
    overall = json.loads((run / "report.json").read_text())["overall"]
    passed, acc = overall["pass@k"].get("1"), (overall.get("acc@k") or {}).get("1", {}).get("overall")
    text = "/".join("–" if v is None else f"{100 * v:.1f}" for v in (passed, acc))
    return text, overall["tasks"], overall.get("infra", 0)


def project_row(runs: Path, project: str, samples: Path) -> tuple[list[str], list[str]]:
    cells, infra, tasks = {}, [], "–"
    for backend in BACKENDS:
        for kind in KINDS:
            run = runs / project / backend / kind
            why = ensure_run(run, project, backend, kind, samples)
            if kind != "codegen":
                text, tasks, n = headline(run) if not why else ("–", tasks, 0)
                cells[kind, backend] = text
                infra.append(n)
    local, docker = (verdicts(runs / project / b / "codegen") for b in BACKENDS)
    both = sorted(set(local) & set(docker))
    differ = [k for k in both if local[k][:2] != docker[k][:2]]
    notes = [f"  {project} {t} #{i}: local {' | '.join(local[t, i])}\n      docker {' | '.join(docker[t, i])}"
             for t, i in differ]
    codegen = f"{len(both) - len(differ)}/{len(both)}" if both else "–"
    row = [project, str(tasks), cells["gt", "local"], cells["gt", "docker"], cells["blank", "local"],
           cells["blank", "docker"], f"{sum(infra[:2])}/{sum(infra[2:])}", codegen]
    return row, notes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", type=Path, help="folder of the run folders (made when missing)")
    ap.add_argument("--project", action="append", default=[])
    ap.add_argument("--samples", type=Path, default=DEFAULT_SAMPLES)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--differences", action="store_true", help="list each sample graded differently")
    args = ap.parse_args()
    projects = args.project or sorted(store.build_reports(load_settings()))
    rows, notes = [], []
    for p in projects:
        row, differ = project_row(args.runs, p, args.samples)
        rows.append(row)
        notes += differ
    if args.markdown:
        print("| " + " | ".join(HEAD) + " |\n|" + "---|" * len(HEAD))
        print("\n".join("| " + " | ".join(r) + " |" for r in rows))
    else:
        widths = [max(len(r[i]) for r in [HEAD, *rows]) for i in range(len(HEAD))]
        for r in [HEAD, *rows]:
            print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))
    same = sum(int(r[-1].split("/")[0]) for r in rows if r[-1] != "–")
    total = sum(int(r[-1].split("/")[1]) for r in rows if r[-1] != "–")
    print(f"\nCodeGen samples graded alike on both backends (verdict and failure class): {same}/{total}")
    print("GT and blank cells: pass@1/acc@1 in %; infra: samples with an infrastructure verdict, local/docker")
    if args.differences and notes:
        print("\ndifferences:\n" + "\n".join(notes))


if __name__ == "__main__":
    main()
