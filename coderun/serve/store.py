"""The verdict service's store: every accepted request and every verdict, in one sqlite file (WAL).

    store = VerdictStore(path)
    row, new = store.accept(id, task_id, code, rigor)   committed before the request is acknowledged
    store.finish(id, judged)                            committed as the verdict is made, once
    store.pending()                                     what a restarted server still owes

A request's id is a hash of (task id, code up to whitespace, rigor): the same request is the same row, so
it is judged once and answered from the store after. A verdict is written only over a pending row, so
a request is never recorded twice, whatever a restart does.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from coderun.errors import StoreError
from coderun.evaluation.store import code_hash

_SCHEMA = """
CREATE TABLE IF NOT EXISTS verdicts (
    id TEXT PRIMARY KEY,
    task_id TEXT NOT NULL,
    code_hash TEXT NOT NULL,
    rigor TEXT NOT NULL,
    code TEXT NOT NULL,
    state TEXT NOT NULL,            -- pending | done
    accepted_at TEXT NOT NULL,
    finished_at TEXT,
    judged TEXT                     -- the Judgement (JSON) once done
);
CREATE INDEX IF NOT EXISTS verdicts_code ON verdicts (task_id, code_hash, state);
"""


def verdict_id(task_id: str, code: str, rigor: str) -> str:
    return hashlib.sha256(f"{task_id}\0{rigor}\0{code_hash(code)}".encode()).hexdigest()[:24]


@dataclass(frozen=True)
class Row:
    id: str
    task_id: str
    rigor: str
    code: str
    state: str
    accepted_at: str
    finished_at: str | None
    judged: str | None


class VerdictStore:
    """One connection, shared by the server's threads under a lock (sqlite serialises writes anyway)."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
        except sqlite3.Error as e:
            raise StoreError(f"cannot open the verdict store {path}: {e}",
                             hint="check the folder is writable, or give another --state") from None

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def accept(self, task_id: str, code: str, rigor: str) -> tuple[Row, bool]:
        """The request's row, recorded (committed) if new; (row, True) when it was new."""
        vid = verdict_id(task_id, code, rigor)
        with self._lock:
            cur = self._db.execute(
                "INSERT OR IGNORE INTO verdicts (id, task_id, code_hash, rigor, code, state, accepted_at) "
                "VALUES (?, ?, ?, ?, ?, 'pending', ?)", (vid, task_id, code_hash(code), rigor, code, _now()))
            new = cur.rowcount == 1
            return self._get(vid), new  # type: ignore[return-value]

    def get(self, vid: str) -> Row | None:
        with self._lock:
            return self._get(vid)

    def judged_code(self, task_id: str, code: str) -> str | None:
        """A finished judgement of the same code for the task under another rigor (both rigors come from
        one judging)."""
        with self._lock:
            row = self._db.execute("SELECT judged FROM verdicts WHERE task_id = ? AND code_hash = ? AND "
                                   "state = 'done' LIMIT 1", (task_id, code_hash(code))).fetchone()
        return row[0] if row else None

    def finish(self, vid: str, judged: str) -> bool:
        """Record the verdict over the pending row; False when it was already done (never written twice)."""
        with self._lock:
            cur = self._db.execute("UPDATE verdicts SET state = 'done', judged = ?, finished_at = ? "
                                   "WHERE id = ? AND state = 'pending'", (judged, _now(), vid))
            return cur.rowcount == 1

    def retry(self, vid: str) -> None:
        """Make a finished row pending again (its verdict was infra: the sandbox failed, not the code)."""
        with self._lock:
            self._db.execute("UPDATE verdicts SET state = 'pending', judged = NULL, finished_at = NULL "
                             "WHERE id = ?", (vid,))

    def pending(self) -> list[Row]:
        with self._lock:
            rows = self._db.execute(f"SELECT {_COLUMNS} FROM verdicts WHERE state = 'pending' "
                                    "ORDER BY accepted_at").fetchall()
        return [Row(*r) for r in rows]

    def _get(self, vid: str) -> Row | None:
        r = self._db.execute(f"SELECT {_COLUMNS} FROM verdicts WHERE id = ?", (vid,)).fetchone()
        return Row(*r) if r else None


_COLUMNS = "id, task_id, rigor, code, state, accepted_at, finished_at, judged"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")
