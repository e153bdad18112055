"""The task store: task records in SQLite under `settings.store_path`, exportable as JSONL.

One row per task (the full record as JSON, plus the columns queries filter on), one row per project
build (its report) and one per target the manifest declares (its outcome: verified or why not). Building a
project replaces all of that project's rows in one transaction, so the store never mixes tasks from two
builds. A failed build of a project with no stored build records only its targets' outcomes (why each failed).

While a build runs, each result (the test mapping, the shared runs of the original, a task's verdict) is kept in
`task_progress` as soon as it is made, under a key of the build's inputs (commit, manifest, environment,
backend). An interrupted build that starts again with the same inputs takes them from there instead of
running them again; other inputs discard them. A finished build removes its project's progress rows.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import ValidationError

from coderun.config import Settings
from coderun.errors import StoreError
from coderun.records import TargetOutcome, Task, TaskInputs

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tasks (
    task_id   TEXT PRIMARY KEY,
    project   TEXT NOT NULL,
    level     TEXT NOT NULL,
    status    TEXT NOT NULL,
    explicit  INTEGER NOT NULL,
    position  INTEGER NOT NULL,
    aliases   TEXT NOT NULL,
    record    TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS tasks_project ON tasks(project);
CREATE TABLE IF NOT EXISTS task_builds (
    project   TEXT PRIMARY KEY,
    commit_sha TEXT NOT NULL,
    include_weak INTEGER NOT NULL,
    report    TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS task_targets (
    project   TEXT NOT NULL,
    position  INTEGER NOT NULL,
    record    TEXT NOT NULL,
    PRIMARY KEY (project, position)
);
CREATE TABLE IF NOT EXISTS task_inputs (
    task_id   TEXT PRIMARY KEY,
    project   TEXT NOT NULL,
    record    TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS task_progress (
    project   TEXT NOT NULL,
    inputs    TEXT NOT NULL,
    key       TEXT NOT NULL,
    record    TEXT NOT NULL,
    PRIMARY KEY (project, key)
);
"""


@contextmanager
def connect(settings: Settings) -> Iterator[sqlite3.Connection]:
    path = settings.store_path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, timeout=30)
    except (OSError, sqlite3.Error) as e:
        raise StoreError(f"cannot open the run store {path}: {e}",
                         hint="check that $CODERUN_HOME is writable") from None
    try:
        conn.executescript(_SCHEMA)
        with conn:
            yield conn
    except sqlite3.DatabaseError as e:
        raise StoreError(f"the run store {path} is unusable: {e}",
                         hint="move it aside and rebuild the tasks") from None
    finally:
        conn.close()


def save_project(settings: Settings, project: str, commit: str, tasks: list[Task], report_json: str,
                 include_weak: bool = False, targets: Iterable[TargetOutcome] = ()) -> None:
    """Replace `project`'s tasks, build report and target outcomes (`include_weak`: its weak tasks join the
    benchmark)."""
    rows = [(t.task_id, t.project, t.level.value, t.status.value, int(t.explicit), i,
             json.dumps(t.aliases), t.model_dump_json()) for i, t in enumerate(tasks)]
    with connect(settings) as conn:
        for table in ("tasks", "task_progress", "task_inputs"):  # a new build's inputs come with its rigor
            conn.execute(f"DELETE FROM {table} WHERE project = ?", (project,))
        conn.executemany("INSERT OR REPLACE INTO tasks VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
        conn.execute("INSERT OR REPLACE INTO task_builds VALUES (?, ?, ?, ?)",
                     (project, commit, int(include_weak), report_json))
        _replace_targets(conn, project, targets)


def save_rigor(settings: Settings, project: str, tasks: list[Task], inputs: Iterable[TaskInputs]) -> None:
    """Store the differential inputs of `project`'s tasks and their summaries on the task records (which
    must be stored already): every inputs row of the project is replaced."""
    with connect(settings) as conn:
        conn.execute("DELETE FROM task_inputs WHERE project = ?", (project,))
        conn.executemany("INSERT OR REPLACE INTO task_inputs VALUES (?, ?, ?)",
                         [(i.task_id, project, i.model_dump_json()) for i in inputs])
        conn.executemany("UPDATE tasks SET record = ? WHERE task_id = ?",
                         [(t.model_dump_json(), t.task_id) for t in tasks])


def load_inputs(settings: Settings, task_ids: Iterable[str]) -> dict[str, TaskInputs]:
    """The stored differential inputs of these tasks (a task without any is absent)."""
    ids = list(task_ids)
    out: dict[str, TaskInputs] = {}
    with connect(settings) as conn:
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            rows = conn.execute(f"SELECT record FROM task_inputs WHERE task_id IN ({','.join('?' * len(chunk))})",
                                chunk).fetchall()
            for (record,) in rows:
                with contextlib.suppress(ValidationError):  # from another coderun version: rebuilt by `tasks rigor`
                    inputs = TaskInputs.model_validate_json(record)
                    out[inputs.task_id] = inputs
    return out


def save_failed_targets(settings: Settings, project: str, targets: Iterable[TargetOutcome]) -> None:
    """Record why a failed build left `project`'s targets unverified, unless a finished build is stored
    (its outcomes describe the tasks the store holds)."""
    with connect(settings) as conn:
        if conn.execute("SELECT 1 FROM task_builds WHERE project = ?", (project,)).fetchone() is None:
            _replace_targets(conn, project, targets)


def _replace_targets(conn: sqlite3.Connection, project: str, targets: Iterable[TargetOutcome]) -> None:
    conn.execute("DELETE FROM task_targets WHERE project = ?", (project,))
    conn.executemany("INSERT INTO task_targets VALUES (?, ?, ?)",
                     [(project, i, t.model_dump_json()) for i, t in enumerate(targets)])


def target_outcomes(settings: Settings, project: str | None = None) -> list[TargetOutcome]:
    """The stored outcome of every declared target (of `project`), in manifest order."""
    sql, args = "SELECT record FROM task_targets", ()
    if project is not None:
        sql, args = sql + " WHERE project = ?", (project,)
    with connect(settings) as conn:
        rows = conn.execute(sql + " ORDER BY project, position", args).fetchall()
    try:
        return [TargetOutcome.model_validate_json(r[0]) for r in rows]
    except ValidationError as e:
        raise StoreError(f"a target outcome in the run store does not match this coderun version: {e}",
                         hint="rebuild the tasks with `coderun tasks build`") from None


def progress(settings: Settings, project: str, inputs: str) -> dict[str, str]:
    """The decisions an unfinished build of `project` with these `inputs` kept (key -> JSON record);
    those of a build with other inputs are deleted."""
    with connect(settings) as conn:
        conn.execute("DELETE FROM task_progress WHERE project = ? AND inputs != ?", (project, inputs))
        rows = conn.execute("SELECT key, record FROM task_progress WHERE project = ?", (project,)).fetchall()
    return dict(rows)


def keep_progress(settings: Settings, project: str, inputs: str, key: str, record: str) -> None:
    """Keep one decision of a running build (committed at once: a killed build loses nothing kept)."""
    with connect(settings) as conn:
        conn.execute("INSERT OR REPLACE INTO task_progress VALUES (?, ?, ?, ?)", (project, inputs, key, record))


def stored_projects(settings: Settings) -> dict[str, int]:
    """Every project the store holds anything of: its number of tasks (0 for an unfinished first build)."""
    with connect(settings) as conn:
        counts = dict(conn.execute("SELECT project, COUNT(*) FROM tasks GROUP BY project").fetchall())
        others = {r[0] for r in conn.execute("SELECT project FROM task_builds UNION SELECT project FROM "
                                             "task_progress UNION SELECT project FROM task_targets")}
    return {p: counts.get(p, 0) for p in sorted(set(counts) | others)}


def remove_projects(settings: Settings, projects: Iterable[str]) -> None:
    """Delete every row of these projects: tasks, build report, progress."""
    names = [(p,) for p in projects]
    with connect(settings) as conn:
        for table in ("tasks", "task_builds", "task_progress", "task_targets", "task_inputs"):
            conn.executemany(f"DELETE FROM {table} WHERE project = ?", names)


def query(settings: Settings, *, project: str | None = None, level: str | None = None,
          statuses: Iterable[str] | None = None) -> list[Task]:
    sql, args = "SELECT record FROM tasks WHERE 1=1", []
    if project is not None:
        sql += " AND project = ?"
        args.append(project)
    if level is not None:
        sql += " AND level = ?"
        args.append(level)
    if statuses is not None:
        statuses = list(statuses)
        sql += f" AND status IN ({','.join('?' * len(statuses))})"
        args += statuses
    sql += " ORDER BY project, position"
    with connect(settings) as conn:
        rows = conn.execute(sql, args).fetchall()
    return [_task(r[0]) for r in rows]


def build_reports(settings: Settings) -> dict[str, str]:
    with connect(settings) as conn:
        return dict(conn.execute("SELECT project, report FROM task_builds ORDER BY project").fetchall())


def build_report(settings: Settings, project: str) -> str | None:
    """One project's stored build report (JSON), None when it has none."""
    with connect(settings) as conn:
        row = conn.execute("SELECT report FROM task_builds WHERE project = ?", (project,)).fetchone()
    return row[0] if row else None


def weak_included(settings: Settings) -> set[str]:
    """Projects built with --include-weak."""
    with connect(settings) as conn:
        return {r[0] for r in conn.execute("SELECT project FROM task_builds WHERE include_weak = 1")}


def _task(record: str) -> Task:
    try:
        return Task.model_validate_json(record)
    except ValidationError as e:
        raise StoreError(f"a task record in the run store does not match this coderun version: {e}",
                         hint="rebuild the tasks with `coderun tasks build`") from None


def export_jsonl(tasks: list[Task], path: Path) -> int:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8") as fh:
            for t in tasks:
                fh.write(t.model_dump_json() + "\n")
    except OSError as e:
        raise StoreError(f"cannot write {path}: {e.strerror}") from None
    return len(tasks)
