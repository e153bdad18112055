"""coderun rank's records in the run: tables of its own in the run's `run.sqlite`, on the run store's connection.

    rank_executions   (task, hash, tests, key) -> Execution, recorded as each finishes
    rank_tests        task -> GeneratedTests: the tests the model wrote (`--tests model`)
    rankings          (tests, task) -> TaskRanking
    rank_summaries    tests -> RankSummary, and when it was made

The tables are made by the first ranking (a run never ranked has none; readers then find nothing); their
schema is the one runs have always been ranked with, so every ranked run still opens. Writes go through the
run store's transaction (its lock held) and are committed before they return, so ranking resumes where it
stopped.
"""

from __future__ import annotations

from collections.abc import Iterable

from coderun.evaluation.store import RunStore, load_record, utc_now
from coderun.rank.records import Execution, GeneratedTests, RankSummary, RankTests, TaskRanking

_SCHEMA = """
CREATE TABLE IF NOT EXISTS rank_executions (
    task_id TEXT NOT NULL, hash TEXT NOT NULL, tests TEXT NOT NULL, key TEXT NOT NULL, record TEXT NOT NULL,
    PRIMARY KEY (task_id, hash, tests, key));
CREATE TABLE IF NOT EXISTS rank_tests (task_id TEXT PRIMARY KEY, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rankings (
    tests TEXT NOT NULL, task_id TEXT NOT NULL, record TEXT NOT NULL, PRIMARY KEY (tests, task_id));
CREATE TABLE IF NOT EXISTS rank_summaries (tests TEXT PRIMARY KEY, record TEXT NOT NULL, at TEXT NOT NULL);
"""


class RankStore:
    """coderun rank's tables of one open run store."""

    def __init__(self, run: RunStore):
        self.run = run
        self._tables = False   # made (or found) by this object

    def _tx(self):
        """A transaction on coderun rank's tables, made the first time this object writes them."""
        if not self._tables:
            with self.run.transaction() as c:
                c.executescript(_SCHEMA)
            self._tables = True
        return self.run.transaction()

    def record_execution(self, e: Execution) -> None:
        """Committed before returning, so ranking resumes where it stopped."""
        with self._tx() as c:
            c.execute("INSERT OR REPLACE INTO rank_executions VALUES (?, ?, ?, ?, ?)",
                      (e.task_id, e.hash, e.tests.value, e.key, e.model_dump_json()))

    def executions(self, tests: RankTests) -> dict[tuple[str, str, str], Execution]:
        """(task, hash, key) -> the stored execution, for one kind of tests."""
        if not self.run.has_table("rank_executions"):
            return {}
        rows = self.run.connection.execute("SELECT record FROM rank_executions WHERE tests = ?", (tests.value,))
        out = {}
        for (text,) in rows:
            e = load_record(Execution, text, self.run.path)
            out[e.task_id, e.hash, e.key] = e
        return out

    def set_generated_tests(self, tests: GeneratedTests) -> None:
        with self._tx() as c:
            c.execute("INSERT OR REPLACE INTO rank_tests VALUES (?, ?)", (tests.task_id, tests.model_dump_json()))

    def generated_tests(self) -> dict[str, GeneratedTests]:
        if not self.run.has_table("rank_tests"):
            return {}
        rows = self.run.connection.execute("SELECT record FROM rank_tests").fetchall()
        return {g.task_id: g for g in (load_record(GeneratedTests, r[0], self.run.path) for r in rows)}

    def set_ranking(self, rankings: Iterable[TaskRanking], summary: RankSummary) -> None:
        """One ranking per kind of tests: a new one replaces the previous."""
        rows = [(t.tests.value, t.task_id, t.model_dump_json()) for t in rankings]
        with self._tx() as c:
            c.execute("DELETE FROM rankings WHERE tests = ?", (summary.tests.value,))
            c.executemany("INSERT INTO rankings VALUES (?, ?, ?)", rows)
            c.execute("INSERT OR REPLACE INTO rank_summaries VALUES (?, ?, ?)",
                      (summary.tests.value, summary.model_dump_json(), utc_now()))

    def rankings(self) -> dict[RankTests, tuple[RankSummary, list[TaskRanking]]]:
        """Every ranking of the run, by kind of tests (empty when the run was never ranked)."""
        if not self.run.has_table("rank_summaries"):
            return {}
        conn, path = self.run.connection, self.run.path
        out = {}
        for tests, text in conn.execute("SELECT tests, record FROM rank_summaries ORDER BY tests").fetchall():
            rows = conn.execute("SELECT record FROM rankings WHERE tests = ? ORDER BY task_id", (tests,))
            out[RankTests(tests)] = (load_record(RankSummary, text, path),
                                     [load_record(TaskRanking, r[0], path) for r in rows])
        return out
