"""`coderun serve` (issue 38): a real server in a subprocess on 127.0.0.1, talked to over HTTP.

The samples are CoderEval's released CodeGen samples of the built-in cachetools project (as tests/test_cluster.py
filters them); the reference is `coderun eval` on the same samples, same backend and slots. Every verdict
through the service must be eval's, at both rigors; bad input gets a 4xx saying what to fix and the server
stays up; off loopback a token is required; a server SIGKILLed with requests accepted answers every one of
them after a restart, none judged twice.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest
from typer.testing import CliRunner

from coderun.cli.main import app
from coderun.config import load_settings
from coderun.evaluation.store import RunStore
from coderun.serve.app import InFlight, openapi_schema
from coderun.serve.client import AsyncVerdictClient, VerdictClient, compute_score, trl_reward
from coderun.serve.engine import Busy, Engine, Rejected, ServeConfig
from tests.helpers import codegen_local_run
from tests.hostile_corpus import hostile_run, verdicts_by_code

REPO = Path(__file__).resolve().parents[1]
PROJECT = "cachetools"
TYPEDKEY = "cachetools/cachetools/keys.py::typedkey"
TYPEDKEY_OK = '''def typedkey(*args, **kwargs):
    """Return a typed cache key for the specified hashable arguments."""
    key = hashkey(*args, **kwargs)
    key += tuple(type(v) for v in args)
    key += tuple(type(v) for _, v in sorted(kwargs.items()))
    return key
'''
TYPEDKEY_SLOW = TYPEDKEY_OK.replace('    key = hashkey', '    import time\n    time.sleep(0.5)\n    key = hashkey')
START_TIMEOUT = 300     # a cold machine builds the project's environment first
TIMEOUT = 600           # a hang ends as a failure, not a stuck suite


def test_committed_openapi_schema_is_the_apps():
    """docs/serve-openapi.json is what the app serves at /openapi.json (regenerate it with
    `coderun serve --openapi > docs/serve-openapi.json`)."""
    committed = json.loads((REPO / "docs" / "serve-openapi.json").read_text())
    assert committed == openapi_schema()


def test_binding_off_loopback_without_a_token_is_refused():
    """A server other machines can reach never runs without a token."""
    result = CliRunner().invoke(app, ["serve", "--host", "0.0.0.0", "--port", "1"], env={"CODERUN_SERVE_TOKEN": ""})
    assert result.exit_code == 2, result.output
    assert "needs a token" in result.output and "--token" in result.output


def test_warm_pools_stay_within_the_budget_least_recently_used_idle_one_closed(tmp_path):
    """Past --warm projects, the least recently used pool that no judging holds is closed; a held one never."""
    engine = Engine(load_settings(), ServeConfig(state=tmp_path, warm=2))
    try:
        engine._projects.update({n: SimpleNamespace(spec=None) for n in "abcd"})
        engine._lend("a")                               # held by a judging throughout
        for name in ("b", "c"):
            engine._lend(name)
            engine._give_back(name)
        assert engine.warm_projects() == ["a", "c"] and engine.metrics.retired == 1
        engine._lend("d")                               # c idle: closed; a held: kept (over budget while held)
        assert engine.warm_projects() == ["a", "d"] and engine.metrics.retired == 2
    finally:
        engine.close()


def test_one_client_past_its_in_flight_limit_is_told_to_wait_or_split():
    flight = InFlight(3)
    with flight.hold("token-a", 2):
        with pytest.raises(Busy), flight.hold("token-a", 2):
            pass
        with flight.hold("token-b", 3):     # another client has its own allowance
            pass
    with pytest.raises(Rejected, match="split it"), flight.hold("token-a", 4):
        pass
    assert flight.now["token-a"] == 0


# ------------------------------------------------------------------------------- a real server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`coderun serve` in its own process group; `url` is always on 127.0.0.1, whatever it binds."""

    def __init__(self, state: Path, *args: str, host: str = "127.0.0.1", token: str | None = None,
                 env: dict[str, str] | None = None):
        self.state, self.args, self.host, self.token, self.env = state, args, host, token, env or {}
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.log = state.parent / f"{state.name}-server.log"

    def start(self) -> Server:
        cmd = [sys.executable, "-m", "coderun", "serve", PROJECT, "--backend", "local", "-j", "2",
               "--host", self.host, "--port", str(self.port), "--state", str(self.state), *self.args]
        env = {**os.environ, "CODERUN_SERVE_TOKEN": self.token or "", **self.env}
        with self.log.open("a") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env,
                                         start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"the server exited ({self.proc.returncode}):\n{self.output()}"
            try:
                if httpx.get(f"{self.url}/healthz", headers=self.headers(), timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise AssertionError(f"the server did not answer within {START_TIMEOUT} s:\n{self.output()}")

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def output(self) -> str:
        return self.log.read_text()[-4000:] if self.log.exists() else ""

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            self.proc.wait(timeout=60)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("serve") / "state", "--max-body", "300000").start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> list[tuple[str, str, tuple, tuple]]:
    """`coderun eval` on the samples (local, workers; tests/helpers.codegen_local_run, shared with
    tests/test_cluster.py): (task id, code, (base verdict, class), (pass+ verdict, class)) each."""
    with RunStore.open(codegen_local_run(tmp_path_factory, PROJECT)) as store:
        codes = {(s.task_id, s.index): s.code for s in store.samples()}
        out = [(r.task_id, codes[(r.task_id, r.index)], (r.rigor.base.value, r.rigor.base_failure),
                (r.rigor.plus.value, r.rigor.plus_failure)) for r in store.results()]
    assert out and not [r for r in out if r[2][0] == "infra"], "no verdicts, or infra ones, in the reference run"
    return out


async def _ask_all(url: str, rows: list[tuple[str, str, str]], concurrency: int = 8) -> list:
    gate = asyncio.Semaphore(concurrency)
    async with AsyncVerdictClient(url) as client:
        async def one(task_id: str, code: str, rigor: str):
            async with gate:
                return await client.verdict(task_id, code=code, rigor=rigor)
        return await asyncio.gather(*(one(*r) for r in rows))


@pytest.mark.slow
@pytest.mark.parametrize("rigor", ["base", "plus"])
def test_verdicts_equal_evals_on_codegen_samples(server, reference, rigor):
    """Every CodeGen sample of cachetools gets, through the service, the verdict and failure class that
    `coderun eval` gives it, at each rigor (eval records both from one run; its --rigor picks the headline)."""
    got = asyncio.run(_ask_all(server.url, [(t, code, rigor) for t, code, _, _ in reference]))
    differ = []
    for (task_id, _, base, plus), v in zip(reference, got, strict=True):
        want = base if rigor == "base" else plus
        if (v.verdict.value, v.failure) != want:
            differ.append((task_id, want, (v.verdict.value, v.failure), v.reason))
    assert not differ, f"{len(differ)} of {len(reference)} verdicts differ from eval's: {differ[:5]}"
    assert all(v.state == "done" and v.tests is not None for v in got)


BAD_INPUTS = [
    ("empty body", b"", 400, "the body is empty"),
    ("malformed JSON", b'{"task_id": "x", ', 400, "not valid JSON"),
    ("non-UTF-8 bytes", b'{"task_id": "\xff\xfe", "code": "def f(): pass"}', 400, "not UTF-8"),
    ("not an object", b'["def f(): pass"]', 422, "must be a JSON object"),
    ("wrong type", json.dumps({"task_id": 7, "code": "def f(): pass"}).encode(), 422, "task_id: Input should be"),
    ("code and completion", json.dumps({"task_id": TYPEDKEY, "code": "a", "completion": "b"}).encode(), 422,
     "exactly one of 'code'"),
    ("unknown field", json.dumps({"task_id": TYPEDKEY, "code": "a", "temperature": 1}).encode(), 422,
     "temperature"),
    ("unknown rigor", json.dumps({"task_id": TYPEDKEY, "code": "a", "rigor": "strict"}).encode(), 422, "rigor"),
    ("unknown task", json.dumps({"task_id": "nope.py::f", "code": "def f(): pass"}).encode(), 404,
     "GET /v1/tasks lists"),
    ("empty code", json.dumps({"task_id": TYPEDKEY, "code": "  "}).encode(), 422, "empty"),
    ("code over the size limit", json.dumps({"task_id": TYPEDKEY, "code": "#" * 70_000}).encode(), 413,
     "at most 65536"),
    ("body over the size limit", b'{"task_id": "' + b"x" * 400_000 + b'"}', 413, "--max-body"),
]


@pytest.mark.slow
@pytest.mark.parametrize("body,status,says", [pytest.param(b, s, m, id=name) for name, b, s, m in BAD_INPUTS])
def test_bad_input_gets_a_4xx_saying_what_to_fix_and_the_server_stays_up(server, body, status, says):
    r = httpx.post(f"{server.url}/v1/verdicts", content=body, headers={"Content-Type": "application/json"},
                   timeout=60)
    assert r.status_code == status, r.text
    assert says in r.json()["error"], r.json()
    assert server.alive() and httpx.get(f"{server.url}/healthz", timeout=10).status_code == 200


@pytest.mark.slow
def test_unknown_verdict_id_is_a_404(server):
    r = httpx.get(f"{server.url}/v1/verdicts/0123abc", timeout=10)
    assert r.status_code == 404 and "POST /v1/verdicts" in r.json()["error"]


@pytest.mark.slow
def test_tasks_come_with_prompts_and_completions_are_read_as_evals(server):
    """/v1/tasks lists the tasks with a prompt per context variant; a `completion` continuing a task's
    completion_prompt, and a chat answer with the function in a fence, are judged as whole functions."""
    with VerdictClient(server.url) as client:
        tasks = {t.task_id: t for t in client.tasks(context="oracle")}
        assert TYPEDKEY in tasks and "def typedkey" in tasks[TYPEDKEY].prompt
        body = TYPEDKEY_OK.split('"""\n', 2)[-1].removeprefix("    ")  # the body, its first indent in the prompt
        v = client.verdict(TYPEDKEY, completion=body)
        assert (v.verdict.value, v.reward) == ("pass", 1.0), v.reason
        chat = f"Here it is:\n```python\n{TYPEDKEY_OK}```\nIt adds the types."
        assert client.verdict(TYPEDKEY, completion=chat, rigor="plus").verdict.value == "pass"
        wrong = client.verdict(TYPEDKEY, code=TYPEDKEY_OK.replace("type(v)", "v"))
        assert wrong.verdict.value == "fail" and wrong.failure and wrong.reward == 0.0
        again = client.get(wrong.id)
        assert (again.verdict, again.failure, again.id) == (wrong.verdict, wrong.failure, wrong.id)
        assert client.verdict(TYPEDKEY, code=TYPEDKEY_OK.replace("type(v)", "v")).cached


@pytest.mark.slow
def test_reward_adapters_score_through_the_server(server, monkeypatch):
    """TRL's reward_func and verl's compute_score: 1.0 for a pass, 0.0 otherwise, in order."""
    reward = trl_reward(server.url)
    chat = [{"role": "assistant", "content": f"```python\n{TYPEDKEY_OK}```"}]
    scores = reward(["p1", "p2", "p3"], [chat, "    return None\n", f"```\n{TYPEDKEY_OK}```"],
                    task_id=[TYPEDKEY, TYPEDKEY, TYPEDKEY])
    assert scores == [1.0, 0.0, 1.0]
    monkeypatch.setenv("CODERUN_SERVE_URL", server.url)
    assert compute_score("coderun", f"```python\n{TYPEDKEY_OK}```", TYPEDKEY, {}) == 1.0
    assert compute_score("coderun", "    return 1\n", "x", {"task_id": TYPEDKEY}) == 0.0


@pytest.mark.slow
def test_metrics_are_prometheus_text(server):
    httpx.post(f"{server.url}/v1/verdicts", json={"task_id": TYPEDKEY, "code": TYPEDKEY_OK}, timeout=TIMEOUT)
    text = httpx.get(f"{server.url}/metrics", timeout=10).text
    for name in ("coderun_serve_queue_depth", 'coderun_serve_workers{state="busy"}', "coderun_serve_verdicts_total",
                 'coderun_serve_judging_seconds_bucket{le="+Inf"}', "coderun_serve_judging_seconds_count"):
        assert name in text, text


@pytest.mark.slow
def test_full_queue_answers_429_with_retry_after(tmp_path):
    """With room for one judging, a second distinct sample while the first runs is refused, saying when to
    come back; nothing is recorded for it."""
    s = Server(tmp_path / "state", "--queue", "1").start()
    try:
        first = httpx.post(f"{s.url}/v1/verdicts?wait=false", json={"task_id": TYPEDKEY, "code": TYPEDKEY_SLOW},
                           timeout=60)
        assert first.status_code == 202 and first.json()["state"] == "pending", first.text
        second = httpx.post(f"{s.url}/v1/verdicts", json={"task_id": TYPEDKEY, "code": TYPEDKEY_OK}, timeout=60)
        assert second.status_code == 429 and int(second.headers["Retry-After"]) >= 1, second.text
        with sqlite3.connect(tmp_path / "state" / "verdicts.sqlite") as con:
            assert con.execute("SELECT count(*) FROM verdicts").fetchone()[0] == 1
    finally:
        s.stop()


@pytest.mark.slow
def test_token_is_checked_on_every_request_off_loopback(tmp_path):
    """Bound to 0.0.0.0 (reached here on 127.0.0.1 only), every route answers 401 without the token or with a
    wrong one."""
    s = Server(tmp_path / "state", host="0.0.0.0", token="s3cret").start()
    try:
        for path in ("/healthz", "/metrics", "/v1/tasks", "/openapi.json"):
            assert httpx.get(f"{s.url}{path}", timeout=10).status_code == 401
            assert httpx.get(f"{s.url}{path}", headers={"Authorization": "Bearer nope"}, timeout=10).status_code == 401
        r = httpx.post(f"{s.url}/v1/verdicts", json={"task_id": TYPEDKEY, "code": TYPEDKEY_OK}, timeout=10)
        assert r.status_code == 401 and "Authorization: Bearer" in r.json()["error"]
        with VerdictClient(s.url, token="s3cret") as client:
            assert client.verdict(TYPEDKEY, code=TYPEDKEY_OK).verdict.value == "pass"
    finally:
        s.stop()


@pytest.mark.slow
def test_server_killed_mid_load_answers_every_accepted_request_once_after_restart(tmp_path, reference):
    """SIGKILL with requests accepted (202) and judgings running; after a restart on the same state every
    accepted request gets its verdict (eval's), the ones finished before the kill are not judged again."""
    unique = list({(t, code): (t, code, base) for t, code, base, _ in reference}.values())[:24]
    s = Server(tmp_path / "state").start()
    ids: dict[str, tuple] = {}
    for task_id, code, base in unique:
        r = httpx.post(f"{s.url}/v1/verdicts?wait=false", json={"task_id": task_id, "code": code}, timeout=60)
        assert r.status_code in (200, 202), r.text
        ids[r.json()["id"]] = base
    db = tmp_path / "state" / "verdicts.sqlite"
    deadline = time.monotonic() + TIMEOUT
    while _finished(db) == {} and time.monotonic() < deadline:
        time.sleep(0.2)
    s.stop(signal.SIGKILL)
    before = _finished(db)
    assert before and len(before) < len(ids), f"{len(before)} of {len(ids)} done at the kill: nothing was mid-load"
    s.start()
    try:
        with VerdictClient(s.url) as client:
            deadline = time.monotonic() + TIMEOUT
            while len(_finished(db)) < len(ids) and time.monotonic() < deadline:
                time.sleep(0.5)
            got = {vid: client.get(vid) for vid in ids}
    finally:
        s.stop()
    assert all(v.state == "done" for v in got.values()), [k for k, v in got.items() if v.state != "done"]
    assert {vid: (v.verdict.value, v.failure) for vid, v in got.items()} == ids
    after = _finished(db)
    assert {k: after[k] for k in before} == before, "a verdict finished before the kill was written again"
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT count(*) FROM verdicts").fetchone()[0] == len(ids)


def _finished(db: Path) -> dict[str, str]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
        return dict(con.execute("SELECT id, finished_at FROM verdicts WHERE state = 'done'").fetchall())


@pytest.mark.slow
def test_the_docs_loop_runs_against_a_server(server, capsys):
    """docs/serve.md's complete loop, as written, against a real server (its URL put in)."""
    page = (REPO / "docs" / "serve.md").read_text()
    (loop,) = [b for b in re.findall(r"^```python\n(.*?)^```$", page, re.M | re.S) if "trl_reward(" in b]
    code = loop.replace("http://127.0.0.1:8431", server.url)
    exec(compile(code, "docs/serve.md", "exec"), {})
    steps = capsys.readouterr().out.split("\n")[:3]
    assert [s.split()[0] for s in steps] == ["0", "1", "2"] and all(float(s.split()[1]) == 0.0 for s in steps)


@pytest.mark.slow
def test_hostile_corpus_gets_evals_verdicts_through_the_service(tmp_path, tmp_path_factory):
    """Every sample of the hostile corpus (tests/hostile), mixed with benign ones, gets through the service the
    verdict and failure class `coderun eval` gives it (local backend, workers, the corpus's tightened time
    limits: the run tests/test_hostile.py checks, made once per session). One leeway: a sample that expects
    only `fail` may reach its time limit on one run and not on the other (06_stdout_flood writes 1 GiB
    against the limit: timeout or runtime, by the machine's load)."""
    shared = hostile_run(tmp_path_factory, "local")
    assert shared["result"].returncode == 0, shared["result"].stderr[-3000:]
    projects, hostile, labels = shared["projects"], shared["hostile"], shared["labels"]
    reference = verdicts_by_code(shared["tmp"] / "run")
    rows = [json.loads(line) for line in (shared["tmp"] / "hostile.jsonl").read_text().splitlines()]
    s = Server(tmp_path / "state", env={"CODERUN_PROJECTS": str(projects)}).start()
    try:
        got = asyncio.run(_ask_all(s.url, [(r["task_id"], r["solution"], "base") for r in rows], concurrency=4))
    finally:
        s.stop()
    any_class = {h.code for h in hostile if h.expect == "fail"}
    differ = {}
    for r, v in zip(rows, got, strict=True):
        want, have = reference[r["solution"]], (v.verdict.value, v.failure)
        timing = have[0] == want[0] and any((c or "").startswith("timeout") for c in (have[1], want[1]))
        if have != want and not (r["solution"] in any_class and timing):
            differ[labels[r["solution"]]] = (want, have)
    assert not differ, f"{len(differ)} of {len(rows)} differ from eval's (eval, service): {differ}"
