"""How well coderun's analyzer agrees with runnable levels on CoderEval's tasks of the built-in projects.

    python benchmarks/level_agreement.py [--no-jedi] [--show-all]

For every CoderEval task whose project is built in (cachetools, python-dateutil, borgmatic (+ atticmatic,
whose files live in borgmatic 1.7.5's tree), sqlparams, shortuuid, federation, zope.interface), the task
(project, file_path, name) is mapped to a function of the analyzed checkout, and its computed level is
compared with
  - the adjudicated levels (`levels-adjudicated-dev.jsonl`, field `accept`): a prediction agrees when it is
    one of the accepted levels; tasks with an empty `accept` (ambiguous or not found) are left out and counted;
  - the same, reduced to standalone (self_contained, slib_runnable) vs non-standalone: agrees when some
    accepted level has the prediction's standalone-ness;
  - CoderEval's raw labels (`level` in results-CodeGen-raw.jsonl), which are noisy.
The benchmark reads CoderEval's files; the product never does. Sources come from coderun.envs.sources (PyPI
sdists cached under $CODERUN_HOME); the project environment's Python is used when one has been built.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter
from pathlib import Path

from coderun.analyzers import FunctionInfo, analyze_cached
from coderun.config import load_settings
from coderun.envs.local import find_local_env
from coderun.envs.sources import checkout
from coderun.manifests.schema import find_manifest
from coderun.records import Level

from _data import add_data_option, codereval_data

# CoderEval project (GitHub fork) -> (built-in manifest, function that maps CoderEval's file path)
PROJECTS = {
    "pexip/os-python-cachetools": ("cachetools", lambda p: p),
    "pexip/os-python-dateutil": ("python-dateutil", lambda p: p),
    "witten/borgmatic": ("borgmatic", lambda p: p),
    "witten/atticmatic": ("borgmatic", lambda p: re.sub(r"^atticmatic/", "borgmatic/", p)),
    "cpburnz/python-sql-parameters": ("sqlparams", lambda p: p),
    "skorokithakis/shortuuid": ("shortuuid", lambda p: p),
    "jaywink/federation": ("federation", lambda p: p),
    "pexip/os-zope": ("zope.interface", lambda p: p),
}
LEVELS = list(Level)
SHORT = {lv: lv.value.replace("_runnable", "").replace("self_contained", "self") for lv in LEVELS}


def load_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _norm(sig: str) -> str:
    return re.sub(r"\s+", "", sig).rstrip(":")


def map_task(task: dict, functions: list[FunctionInfo], signature: str | None) -> FunctionInfo | None:
    """The function named like the task in its file; the prompt's signature decides between several."""
    file = PROJECTS[task["project"]][1](task["file_path"])
    found = [f for f in functions if f.file == file and f.name == task["name"]]
    if not found:  # moved to another file in this release: accept a unique function of that name
        found = [f for f in functions if f.name == task["name"]]
        if len(found) != 1:
            return None
        print(f"  relocated: {task['project']} {task['file_path']}::{task['name']} -> {found[0].file}",
              file=sys.stderr)
    if len(found) > 1 and signature:
        same = [f for f in found if _norm(f.signature).endswith(_norm(signature).removeprefix("async"))]
        found = same or found
    return sorted(found, key=lambda f: f.qualname.count("."))[0]


def analyze_all(use_jedi: bool) -> dict[str, list[FunctionInfo]]:
    settings = load_settings()
    out: dict[str, list[FunctionInfo]] = {}
    for name in sorted({m for m, _ in PROJECTS.values()}):
        manifest = find_manifest(name, settings)
        co = checkout(manifest, settings)
        env = find_local_env(manifest, settings)
        python = env.python if env is not None and env.python.exists() else None
        t0 = time.perf_counter()
        result = analyze_cached(co, settings, python=python, use_jedi=use_jedi, import_root=manifest.import_root)
        print(f"  {name:16} {len(result.functions):5} functions, {len(result.skipped)} files skipped, "
              f"python={'env' if python else 'host'}, {time.perf_counter() - t0:.1f}s", file=sys.stderr)
        out[name] = result.functions
    return out


def evidence(f: FunctionInfo) -> str:
    refs = [f"{r.name}={r.kind.value}" for r in f.references if r.kind.value != "builtin"]
    return ", ".join(refs) or "builtins only"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-jedi", action="store_true", help="syntax only")
    ap.add_argument("--show-all", action="store_true", help="print every task, not only disagreements")
    add_data_option(ap)
    args = ap.parse_args()
    data = codereval_data(args.data, "results-CodeGen-raw.jsonl", "levels-adjudicated-dev.jsonl",
                          "CEPythonRaw.jsonl")

    raw = [t for t in load_jsonl(data / "results-CodeGen-raw.jsonl") if t["project"] in PROJECTS]
    adjudicated = {a["id"]: a for a in load_jsonl(data / "levels-adjudicated-dev.jsonl")}
    signatures = {q["question_id"]: q["signature"] for q in load_jsonl(data / "CEPythonRaw.jsonl")}
    print(f"analyzing {len({m for m, _ in PROJECTS.values()})} built-in projects "
          f"({'with' if not args.no_jedi else 'without'} jedi)…", file=sys.stderr)
    functions = analyze_all(not args.no_jedi)

    rows, missing, by_project = [], [], Counter()
    for t in raw:
        manifest_name = PROJECTS[t["project"]][0]
        f = map_task(t, functions[manifest_name], signatures.get(t["_id"]))
        if f is None:
            missing.append(t)
            continue
        by_project[t["project"]] += 1
        rows.append((t, f, adjudicated.get(t["_id"])))

    print(f"\ntasks of built-in projects: {len(raw)}; mapped to a function: {len(rows)}; not found: {len(missing)}")
    for p, n in sorted(by_project.items()):
        print(f"  {p:32} {n:3} found (→ {PROJECTS[p][0]})")
    for t in missing:
        print(f"  NOT FOUND: {t['project']} {t['file_path']}::{t['name']}")

    judged = [(t, f, a) for t, f, a in rows if a and a["accept"]]
    no_accept = [(t, f, a) for t, f, a in rows if a and not a["accept"]]
    no_adj = [(t, f, a) for t, f, a in rows if not a]
    agree = [r for r in judged if r[1].level.value in r[2]["accept"]]
    stand = [r for r in judged if any(Level(x).standalone == r[1].level.standalone for x in r[2]["accept"])]
    raw_agree = [r for r in rows if r[1].level.value == r[0]["level"]]
    pct = lambda a, b: f"{100 * a / b:.1f}% ({a}/{b})" if b else "n/a"  # noqa: E731
    print(f"\nagreement with adjudicated levels:   {pct(len(agree), len(judged))}"
          f"   [{len(no_accept)} task(s) with empty accept left out; {len(no_adj)} without adjudication]")
    print(f"standalone vs non-standalone:        {pct(len(stand), len(judged))}")
    print(f"raw agreement with CoderEval labels: {pct(len(raw_agree), len(rows))}")

    print("\nconfusion matrix, adjudicated (rows; the accepted level closest to the prediction) × predicted (columns)")
    matrix = Counter()
    for _t, f, a in judged:
        ref = f.level.value if f.level.value in a["accept"] else a["accept"][0]
        matrix[(Level(ref), f.level)] += 1
    print("            " + "".join(f"{SHORT[c]:>9}" for c in LEVELS))
    for r in LEVELS:
        print(f"  {SHORT[r]:>9} " + "".join(f"{matrix[(r, c)] or '.':>9}" for c in LEVELS))

    print("\nconfusion matrix, CoderEval label (rows) × predicted (columns)")
    matrix = Counter((Level(t["level"]), f.level) for t, f, _ in rows)
    print("            " + "".join(f"{SHORT[c]:>9}" for c in LEVELS))
    for r in LEVELS:
        print(f"  {SHORT[r]:>9} " + "".join(f"{matrix[(r, c)] or '.':>9}" for c in LEVELS))

    print("\ndisagreements with the adjudicated levels:")
    for t, f, a in judged:
        if f.level.value in a["accept"] and not args.show_all:
            continue
        mark = "ok " if f.level.value in a["accept"] else "XX "
        print(f"  {mark}{t['project']} {f.file}::{f.qualname}  predicted={f.level.value} "
              f"accept={a['accept']} codereval={t['level']}\n      status: {a['status']}\n"
              f"      evidence: {evidence(f)}")
    for t, f, a in no_accept:
        print(f"  (left out) {t['project']} {f.file}::{f.qualname} predicted={f.level.value}: {a['status']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
