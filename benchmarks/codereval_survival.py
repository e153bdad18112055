"""Which CoderEval tasks of the built-in projects survived `coderun tasks build`, and why the others did not.

    python benchmarks/codereval_survival.py [--data DIR]

Reads the task store (after `coderun tasks build <projects>`) and CoderEval's task list; prints one line
per CoderEval task of a built-in project, then the counts. Measurement, not product code.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter

from coderun.config import load_settings
from coderun.tasks import load_tasks, store

from _data import add_data_option, codereval_data

PROJECTS = {"pexip/os-python-cachetools": "cachetools", "pexip/os-python-dateutil": "python-dateutil",
            "witten/borgmatic": "borgmatic", "witten/atticmatic": "borgmatic",
            "cpburnz/python-sql-parameters": "sqlparams", "skorokithakis/shortuuid": "shortuuid",
            "jaywink/federation": "federation", "pexip/os-zope": "zope.interface"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_option(ap)
    raw = codereval_data(ap.parse_args().data, "results-CodeGen-raw.jsonl") / "results-CodeGen-raw.jsonl"
    settings = load_settings()
    by_alias = {a: t for t in load_tasks(settings, status="all") for a in t.aliases}
    reports = {p: json.loads(r) for p, r in store.build_reports(settings).items()}
    outcome: Counter[str] = Counter()
    for row in map(json.loads, raw.open()):
        project = PROJECTS.get(row["project"])
        if project is None:
            continue
        t = by_alias.get(row["_id"])
        if t is not None:
            why = reports.get(project, {}).get("reasons", {}).get(t.task_id, "")
            status = t.status.value
            detail = f"{len(t.tests)} tests" + (f", {len(t.flaky_tests)} flaky dropped" if t.flaky_tests else "")
        elif project not in reports:
            status, why, detail = "not built", f"`coderun tasks build {project}` has not completed", ""
        else:
            status, why, detail = "not a target", "not found in the sdist tree (see codereval_targets.py)", ""
        outcome[status] += 1
        print(f"{row['_id']}  {project:15} {row['file_path']}::{row['name']:32} {status:12} {detail} {why}")
    print(dict(outcome), "total", sum(outcome.values()))


if __name__ == "__main__":
    main()
