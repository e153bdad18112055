"""The run store: one folder per run, holding `run.sqlite` and what a person opens (spliced files, logs,
the report).

    <run dir>/run.sqlite       meta (run info, config, environment), tasks, samples, results
    <run dir>/environment.txt  versions of coderun, its dependencies and each project's environment
    <run dir>/spliced/         each sample's spliced file
    <run dir>/logs/            each sample's test log
    <run dir>/report.json, report.md   written when the run ends
    <run dir>/rank/            what `coderun rank` wrote (its executions and rankings are tables it keeps in
                               run.sqlite, on the store's connection: coderun/rank/store.py)

Crash safety: WAL journal, one transaction per finished sample (`record_result` commits before it
returns), so a SIGKILL loses at most the samples still running. `pending()` lists the samples without a
result, for `--resume`. A result is keyed by (task_id, sample index): recording it again replaces it and
never duplicates it. One store may be shared by worker threads (a lock serialises writes). A later stage
that keeps records of its own in the run (`coderun rank`) makes its tables on the same connection
(`connection`, `has_table`) and writes them through `transaction`, under the same lock.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from coderun.choices import Backend, Executor, Isolation
from coderun.config import Settings
from coderun.errors import StoreError
from coderun.records import (
    ContextSet,
    Evidence,
    FindingKind,
    Level,
    PlusOutcome,
    RunEnvironment,
    Task,
    TaskInputs,
    Verdict,
    VerdictKind,
)

SCHEMA_VERSION = 1
DB_NAME = "run.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tasks (
    task_id TEXT PRIMARY KEY, project TEXT NOT NULL, level TEXT NOT NULL, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS samples (
    task_id TEXT NOT NULL REFERENCES tasks(task_id), idx INTEGER NOT NULL, code TEXT NOT NULL,
    hash TEXT NOT NULL, metadata TEXT NOT NULL DEFAULT '{}', PRIMARY KEY (task_id, idx));
CREATE TABLE IF NOT EXISTS results (
    task_id TEXT NOT NULL, idx INTEGER NOT NULL, verdict TEXT NOT NULL, failure TEXT, reason TEXT NOT NULL,
    evidence TEXT, spliced_path TEXT, log_path TEXT, duration REAL NOT NULL DEFAULT 0,
    finished_at TEXT NOT NULL, rigor TEXT, PRIMARY KEY (task_id, idx),
    FOREIGN KEY (task_id, idx) REFERENCES samples(task_id, idx));
"""


class RunKind(str, Enum):
    EVAL = "eval"
    IMPORTED = "imported"     # someone else's verdicts (e.g. CoderEval's released results), not re-run


class RunConfig(BaseModel):
    """How an eval run was asked for, checked when it starts; `--resume` reads it back. Stored as the
    JSON object earlier versions wrote as a dict (field names and order kept), so their runs still open."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    samples: str | None = None                        # the samples file, or None for ground truth / blank
    ground_truth: bool = False
    blank: bool = False
    level: Level | None = None
    backend: Backend = Backend.LOCAL
    jobs: int = 1
    include_weak: bool = False
    manifests: dict[str, str] = Field(default_factory=dict)   # project -> the manifest file it was run from
    executor: Executor = Executor.WORKERS             # runs made before executors existed: the default
    rigor: Literal["base", "plus"] = "base"           # what the headline verdict uses (both are kept)
    isolation: Isolation = Isolation.AUTO             # local: asked for (what was made: RunEnvironment)


class ImportConfig(BaseModel):
    """Where an imported run's verdicts came from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    importer: str
    results_sha256: str
    dataset: str | None = None
    verdicts: str = ""


class RunInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str
    kind: RunKind = RunKind.EVAL
    created_at: str = Field(default_factory=lambda: utc_now())
    label: str = ""                                   # shown in reports (model, prompt variant...)
    source: str | None = None                         # imported runs: the file the verdicts came from
    # How the run was made; the first that validates (both forbid unknown fields, so they cannot mix).
    config: RunConfig | ImportConfig = Field(default_factory=RunConfig, union_mode="left_to_right")

    def eval_config(self) -> RunConfig:
        """The config of a run coderun evaluates (not an imported one)."""
        if not isinstance(self.config, RunConfig):
            raise StoreError(f"run {self.run_id} was imported ({self.source}): its verdicts are not coderun's "
                             "to evaluate or resume")
        return self.config


class RunTask(BaseModel):
    """What a report needs of a task; an eval run keeps the full Task record too."""

    model_config = ConfigDict(extra="forbid")

    task_id: str
    project: str
    level: Level
    file: str = ""
    name: str = ""
    aliases: list[str] = Field(default_factory=list)
    oracle_context: ContextSet | None = None          # None: unknown (Acc@k unavailable for the task)
    task: Task | None = None
    inputs: TaskInputs | None = None                  # the differential step's, as stored when the run began

    @classmethod
    def from_task(cls, task: Task, inputs: TaskInputs | None = None) -> RunTask:
        return cls(task_id=task.task_id, project=task.project, level=task.level, file=task.file,
                   name=task.qualname, aliases=task.aliases, oracle_context=task.oracle_context, task=task,
                   inputs=inputs)


class RunSample(BaseModel):
    """A sample of a run, as the run store keeps it (the `samples` table)."""

    model_config = ConfigDict(extra="forbid")

    task_id: str
    index: int                                        # its index in the input (unique within the task)
    code: str
    hash: str = ""
    metadata: dict[str, JsonValue] = Field(default_factory=dict)


class Result(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task_id: str
    index: int
    verdict: VerdictKind
    failure: str | None = None
    reason: str = ""
    evidence: Evidence | None = None
    spliced_path: str | None = None                   # relative to the run folder when inside it
    log_path: str | None = None
    duration: float = 0.0
    finished_at: str = Field(default_factory=lambda: utc_now())
    rigor: PlusOutcome | None = None                  # both verdicts (runs made before pass+: None)

    @classmethod
    def of(cls, task_id: str, index: int, verdict: Verdict, **kw: Any) -> Result:
        return cls(task_id=task_id, index=index, verdict=verdict.verdict, failure=verdict.failure,
                   reason=verdict.reason, **kw)


def code_hash(code: str) -> str:
    """Identity of a sample up to whitespace that cannot change its meaning: line endings, trailing
    spaces, blank lines. Indentation is kept (it is syntax)."""
    lines = [line.rstrip() for line in code.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    return hashlib.sha256("\n".join(line for line in lines if line).encode("utf-8")).hexdigest()


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def new_run_id(prefix: str = "run") -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"{prefix}-{stamp}-{hashlib.sha256(str(datetime.now().timestamp()).encode()).hexdigest()[:6]}"


def resolve_run_dir(run: str, settings: Settings) -> Path:
    """A run folder path, or a run id under $CODERUN_HOME/runs."""
    path = Path(run).expanduser()
    for candidate in (path, settings.runs / run):
        if (candidate / DB_NAME).is_file():
            return candidate
    if re.fullmatch(r"[\w.-]+", run) is None or path.exists():
        raise StoreError(f"{run}: not a run folder (no {DB_NAME} in it)",
                         hint="give the folder `coderun eval` printed, or a run id under " f"{settings.runs}")
    raise StoreError(f"no run {run!r}: neither a folder nor a run id under {settings.runs}",
                     hint="list runs with `ls " f"{settings.runs}`")


class RunStore:
    """Typed access to one run folder. Create with `RunStore.create`, reopen with `RunStore.open`."""

    def __init__(self, path: Path, conn: sqlite3.Connection):
        self.path = path
        self._conn = conn
        self._lock = threading.Lock()

    # -- lifecycle ------------------------------------------------------------------------------
    @classmethod
    def create(cls, path: Path, info: RunInfo) -> RunStore:
        path = Path(path)
        if (path / DB_NAME).exists():
            raise StoreError(f"{path} already holds a run", hint="resume it with --resume, or pick another --run-dir")
        try:
            for sub in ("spliced", "logs"):
                (path / sub).mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StoreError(f"cannot create the run folder {path}: {e.strerror or e}") from None
        store = cls(path, _connect(path / DB_NAME))
        with store.transaction() as c:
            c.executescript(_SCHEMA)
            c.execute("INSERT INTO meta VALUES ('schema', ?), ('info', ?)",
                      (str(SCHEMA_VERSION), info.model_dump_json()))
        return store

    @classmethod
    def open(cls, path: Path) -> RunStore:
        path = Path(path)
        if not (path / DB_NAME).is_file():
            raise StoreError(f"{path}: not a run folder (no {DB_NAME})")
        store = cls(path, _connect(path / DB_NAME))
        try:
            schema = store._conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{path / DB_NAME} is not a readable run store: {e}") from None
        if schema is None or int(schema[0]) != SCHEMA_VERSION:
            raise StoreError(f"{path / DB_NAME} has schema {schema and schema[0]}, this coderun reads {SCHEMA_VERSION}")
        store._add_rigor_column()
        return store

    def _add_rigor_column(self) -> None:
        """Runs made before pass+ have no `rigor` column: added (empty), so they open and resume as before."""
        columns = {row[1] for row in self._conn.execute("PRAGMA table_info(results)")}
        if "rigor" not in columns:
            with self.transaction() as c:
                c.execute("ALTER TABLE results ADD COLUMN rigor TEXT")

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write on the run's connection, under the store's lock: committed when the block ends, rolled
        back (and a StoreError raised) when it fails."""
        with self._lock:
            try:
                with self._conn:          # commits on success, rolls back on error
                    yield self._conn
            except sqlite3.Error as e:
                raise StoreError(f"run store {self.path / DB_NAME}: {e}",
                                 hint="check free disk space; the run can be resumed") from None

    # -- writing -----------------------------------------------------------------------------------
    def set_info(self, info: RunInfo) -> None:
        with self.transaction() as c:
            c.execute("INSERT OR REPLACE INTO meta VALUES ('info', ?)", (info.model_dump_json(),))

    def set_environment(self, env: RunEnvironment) -> None:
        with self.transaction() as c:
            c.execute("INSERT OR REPLACE INTO meta VALUES ('environment', ?)", (env.model_dump_json(),))

    def add_tasks(self, tasks: Iterable[RunTask | Task]) -> None:
        rows = []
        for t in tasks:
            rt = t if isinstance(t, RunTask) else RunTask.from_task(t)
            rows.append((rt.task_id, rt.project, rt.level.value, rt.model_dump_json()))
        with self.transaction() as c:
            c.executemany("INSERT OR REPLACE INTO tasks VALUES (?, ?, ?, ?)", rows)

    def add_samples(self, samples: Iterable[RunSample]) -> None:
        rows = [(s.task_id, s.index, s.code, s.hash or code_hash(s.code), json.dumps(s.metadata))
                for s in samples]
        with self.transaction() as c:
            c.executemany("INSERT OR IGNORE INTO samples VALUES (?, ?, ?, ?, ?)", rows)

    def record_result(self, result: Result) -> None:
        """Committed before returning: a finished sample survives a kill of the runner."""
        self.record_results([result])

    def record_results(self, results: Iterable[Result]) -> None:
        rows = [(r.task_id, r.index, r.verdict.value, r.failure, r.reason,
                 r.evidence.model_dump_json() if r.evidence else None, self._rel(r.spliced_path),
                 self._rel(r.log_path), r.duration, r.finished_at, r.rigor.model_dump_json() if r.rigor else None)
                for r in results]
        with self.transaction() as c:
            c.executemany("INSERT OR REPLACE INTO results (task_id, idx, verdict, failure, reason, evidence, "
                          "spliced_path, log_path, duration, finished_at, rigor) "
                          "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)

    def _rel(self, p: str | None) -> str | None:
        if p is None:
            return None
        try:
            return str(Path(p).resolve().relative_to(self.path.resolve()))
        except ValueError:
            return p

    # -- the connection, for the tables of later stages ------------------------------------------------
    @property
    def connection(self) -> sqlite3.Connection:
        """The run's sqlite connection, to read; writes go through `transaction`."""
        return self._conn

    def has_table(self, table: str) -> bool:
        return self._conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?",
                                  (table,)).fetchone() is not None

    # -- reading -----------------------------------------------------------------------------------
    def info(self) -> RunInfo:
        row = self._conn.execute("SELECT value FROM meta WHERE key='info'").fetchone()
        return load_record(RunInfo, row[0], self.path)

    def environment(self) -> RunEnvironment | None:
        """What ran the benchmark; None for a run made before coderun recorded it, or imported."""
        row = self._conn.execute("SELECT value FROM meta WHERE key='environment'").fetchone()
        return load_record(RunEnvironment, row[0], self.path) if row else None

    def tasks(self) -> list[RunTask]:
        rows = self._conn.execute("SELECT record FROM tasks ORDER BY task_id").fetchall()
        return [load_record(RunTask, r[0], self.path) for r in rows]

    def samples(self) -> list[RunSample]:
        rows = self._conn.execute("SELECT task_id, idx, code, hash, metadata FROM samples ORDER BY task_id, idx")
        return [RunSample(task_id=t, index=i, code=c, hash=h, metadata=json.loads(m)) for t, i, c, h, m in rows]

    def results(self) -> list[Result]:
        rows = self._conn.execute("SELECT task_id, idx, verdict, failure, reason, evidence, spliced_path, "
                                  "log_path, duration, finished_at, rigor FROM results ORDER BY task_id, idx")
        return [Result(task_id=t, index=i, verdict=VerdictKind(v), failure=f, reason=r,
                       evidence=_load_evidence(e, self.path) if e else None, spliced_path=s, log_path=lg,
                       duration=d, finished_at=fa, rigor=PlusOutcome.model_validate_json(rg) if rg else None)
                for t, i, v, f, r, e, s, lg, d, fa, rg in rows]

    def pending(self) -> list[RunSample]:
        """Samples without a result, in input order: what `--resume` still has to run."""
        rows = self._conn.execute(
            "SELECT s.task_id, s.idx, s.code, s.hash, s.metadata FROM samples s LEFT JOIN results r "
            "ON r.task_id = s.task_id AND r.idx = s.idx WHERE r.task_id IS NULL ORDER BY s.task_id, s.idx")
        return [RunSample(task_id=t, index=i, code=c, hash=h, metadata=json.loads(m)) for t, i, c, h, m in rows]

    def counts(self) -> dict[str, int]:
        c = self._conn
        return {"tasks": c.execute("SELECT count(*) FROM tasks").fetchone()[0],
                "samples": c.execute("SELECT count(*) FROM samples").fetchone()[0],
                "results": c.execute("SELECT count(*) FROM results").fetchone()[0]}

    def file(self, rel: str | None) -> Path | None:
        """A stored path (relative to the run folder, or absolute) as a path on this machine."""
        if rel is None:
            return None
        p = Path(rel)
        return p if p.is_absolute() else self.path / p


def _connect(db: Path) -> sqlite3.Connection:
    try:
        conn = sqlite3.connect(db, timeout=30, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
    except sqlite3.Error as e:
        raise StoreError(f"cannot open the run store {db}: {e}") from None
    return conn


def load_record(model: type[BaseModel], text: str, path: Path) -> Any:
    try:
        return model.model_validate_json(text)
    except ValidationError as e:
        raise StoreError(f"{path / DB_NAME}: a stored {model.__name__} does not validate: {e}") from None


# Runs stored before findings had kinds hold `tampering` as messages; grading then decided on these words.
_LEGACY_MACHINERY_MARKS = ("test file ", "conftest.py created", "pytest plugin", "was replaced", "plugins registered")


def _load_evidence(text: str, path: Path) -> Evidence:
    """A stored Evidence; one of an older run gets its messages as findings of a legacy kind, sorted by the
    words grading decided on then, so it reads (and would grade) as before."""
    try:
        return Evidence.model_validate_json(text)
    except ValidationError:
        data = _json_or_none(text)
    old = data.get("tampering") if isinstance(data, dict) else None
    if not isinstance(old, list) or not any(isinstance(t, str) for t in old):
        return load_record(Evidence, text, path)  # not an older run's evidence: say what does not validate
    data["tampering"] = [_legacy_finding(t) if isinstance(t, str) else t for t in old]
    return load_record(Evidence, json.dumps(data), path)


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _legacy_finding(message: str) -> dict[str, str]:
    machinery = any(mark in message for mark in _LEGACY_MACHINERY_MARKS)
    kind = FindingKind.LEGACY_MACHINERY if machinery else FindingKind.LEGACY_NOTE
    return {"kind": kind.value, "detail": message}
