"""The hostile corpus (tests/hostile/samples) and the tools to run it through `coderun eval` as a user
would: a subprocess on the built-in cachetools project, with a user manifest copy that only tightens the
time limits, so a hanging sample costs seconds rather than minutes."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from types import SimpleNamespace

from coderun.config import BUILTIN_PROJECTS_DIR, load_settings
from coderun.envs.sources import checkout
from coderun.evaluation.store import RunStore
from coderun.manifests.schema import find_manifest

SAMPLES_DIR = Path(__file__).parent / "hostile" / "samples"
PROJECT = "cachetools"
TARGET = "cachetools/cachetools/keys.py::typedkey"      # file_runnable, 12 fast tests
OTHER = "cachetools/cachetools/cache.py::Cache.get"      # self_contained, 8 fast tests
PER_TEST_TIMEOUT = 8
RUN_TIMEOUT = 40
SAMPLE_PORT = 47613        # 21_network connects here, on 127.0.0.1 only: the Listener's port replaces it
CANARY_GLOB = "coderun-hostile-canary"

TYPEDKEY_OK = '''def typedkey(*args, **kwargs):
    """Return a typed cache key for the specified hashable arguments."""
    key = hashkey(*args, **kwargs)
    key += tuple(type(v) for v in args)
    key += tuple(type(v) for _, v in sorted(kwargs.items()))
    return key
'''
TYPEDKEY_UNTYPED = '''def typedkey(*args, **kwargs):
    """Return a typed cache key for the specified hashable arguments."""
    return hashkey(*args, **kwargs)
'''
GET_OK = '''def get(self, key, default=None):
    if key in self:
        return self[key]
    else:
        return default
'''


@dataclass(frozen=True)
class Hostile:
    name: str          # file stem, e.g. 01_infinite_loop
    attack: str
    targets: str
    expect: str        # timeout | tampering | fail
    code: str
    task: str = TARGET  # the function the sample replaces (header `# task:`)
    forgery: bool = False  # a wrong function that tries to be graded pass (header `# forgery: yes`)


def corpus() -> list[Hostile]:
    out = []
    for path in sorted(SAMPLES_DIR.glob("[0-9][0-9]_*.py")):
        code = path.read_text()
        head = _header(code)
        out.append(Hostile(path.stem, head["attack"], head["targets"], head["expect"], code,
                           head.get("task", TARGET), head.get("forgery") == "yes"))
    return out


def plus_forgeries() -> list[Hostile]:
    """The samples that fool the project's tests and try to forge agreement in the differential step
    (issue 23, `tests/hostile/plus`): a pass on the base verdict, they must fail pass+."""
    out = []
    for path in sorted((SAMPLES_DIR.parent / "plus").glob("[0-9][0-9]_*.py")):
        code = path.read_text()
        head = _header(code)
        out.append(Hostile(path.stem, head["attack"], head["targets"], head["expect"], code,
                           head.get("task", TARGET), True))
    return out


def forgeries() -> list[Hostile]:
    """The samples that are wrong (an honest run fails) and try to be graded pass from inside the test
    process (issue 21): they need no sandbox to fail, so they are cheap to run with every executor."""
    return [h for h in corpus() if h.forgery]


def _header(code: str) -> dict[str, str]:
    """`# key: value` lines at the top; an indented `#   ...` line continues the previous value."""
    fields: dict[str, str] = {}
    key = None
    for line in code.splitlines():
        m = re.match(r"# (\w+): (.*)", line)
        if m:
            key = m.group(1)
            fields[key] = m.group(2).strip()
        elif line.startswith("#   ") and key:
            fields[key] += " " + line[4:].strip()
        elif not line.startswith("#"):
            break
    return fields


def benign() -> list[tuple[str, str, str]]:
    """(task id, code, label) of well-behaved samples: copies of the ground truth (a comment makes each
    copy its own unit, so it really runs) and one wrong sample, with verdicts known in advance."""
    rows = [(TARGET, TYPEDKEY_OK + f"# benign copy {i}\n", f"typedkey-ok-{i}") for i in range(8)]
    rows.append((TARGET, TYPEDKEY_UNTYPED, "typedkey-untyped"))
    rows += [(OTHER, GET_OK + f"# benign copy {i}\n", f"get-ok-{i}") for i in range(2)]
    return rows


def write_samples(path: Path, hostile: list[Hostile], *, benign_every: int = 4) -> dict[str, str]:
    """A samples file: the hostile samples with a benign copy after every `benign_every` of them (so
    each sandbox slot runs benign code right after hostile code). Returns {code: label}."""
    good = benign()
    good_ok = [g for g in good if g[2].startswith("typedkey-ok")]
    rest = [g for g in good if not g[2].startswith("typedkey-ok")]
    rows: list[tuple[str, str, str]] = []
    for i, h in enumerate(hostile):
        rows.append((h.task, h.code, h.name))
        if (i + 1) % benign_every == 0 and good_ok:
            rows.append(good_ok.pop(0))
    rows += good_ok + rest
    path.write_text("".join(json.dumps({"task_id": t, "solution": c}) + "\n" for t, c, _ in rows))
    return {c: label for _, c, label in rows}


def user_manifests(folder: Path) -> Path:
    """A user projects folder with a copy of the built-in cachetools manifest with short time limits (a
    user manifest with the same name wins; the install section, hence env and image, is unchanged)."""
    text = (BUILTIN_PROJECTS_DIR / f"{PROJECT}.yaml").read_text()
    text = re.sub(r"timeout_per_test: \d+", f"timeout_per_test: {PER_TEST_TIMEOUT}", text)
    text = re.sub(r"\n  timeout: \d+", f"\n  timeout: {RUN_TIMEOUT}", text)
    assert f"timeout: {RUN_TIMEOUT}" in text and f"timeout_per_test: {PER_TEST_TIMEOUT}" in text
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{PROJECT}.yaml").write_text(text)
    return folder


def eval_popen(samples: Path, run_dir: Path, backend: str, projects: Path, *extra: str,
               env: dict[str, str] | None = None, resume: bool = False, executor: str | None = None,
               **kw) -> subprocess.Popen:
    """`coderun eval` in its own process (and session), as a user runs it (with coderun's default
    executor unless one is named)."""
    args = ["--resume", str(run_dir)] if resume else [
        "--samples", str(samples), "--project", PROJECT, "--backend", backend, "--run-dir", str(run_dir)]
    if executor is not None and not resume:
        args += ["--executor", executor]
    full_env = {**os.environ, "CODERUN_PROJECTS": str(projects), **(env or {})}
    return subprocess.Popen([sys.executable, "-m", "coderun", "eval", *args, "-j", "2", "--json", *extra],
                            env=full_env, start_new_session=True, **kw)


def run_eval(samples: Path, run_dir: Path, backend: str, projects: Path, *extra: str, resume: bool = False,
             env: dict[str, str] | None = None, timeout: float = 1800,
             executor: str | None = None) -> subprocess.CompletedProcess:
    proc = eval_popen(samples, run_dir, backend, projects, *extra, env=env, resume=resume, executor=executor,
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        out, err = proc.communicate()
    done = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    done.pid = proc.pid  # what the run's sandbox folders and containers are labelled with
    return done


def verdicts_by_code(run_dir: Path) -> dict[str, tuple[str, str | None]]:
    """{sample code: (verdict, failure class)} of a finished run."""
    with RunStore.open(run_dir) as store:
        codes = {(s.task_id, s.index): s.code for s in store.samples()}
        return {codes[(r.task_id, r.index)]: (r.verdict.value, r.failure) for r in store.results()}


def settings():
    return load_settings()


# -- the corpus's runs, made once per backend and session (tests/test_hostile.py; test_serve.py compares
# the service's verdicts with the local one) -------------------------------------------------------------

class Listener:
    """Accepts connections on a free port of 127.0.0.1 and records what arrives (a fixed port can be taken by
    another test's connection when tests run in parallel)."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.sock.listen(16)
        self.sock.settimeout(0.5)
        self.received: list[bytes] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    self.received.append(conn.recv(1024))
                except OSError:
                    self.received.append(b"")

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.sock.close()


def git_status(path: Path) -> str:
    return subprocess.run(["git", "status", "--porcelain", "--ignored"], cwd=path, capture_output=True,
                          text=True, check=True).stdout


def hostile_run(tmp_path_factory, backend: str) -> dict:
    """The corpus's runs on `backend` (_hostile_runs), made once per session whichever test asks first, as the
    tests read them."""
    from tests.shared_home import built_once

    return _load_hostile_runs(built_once(tmp_path_factory, f"hostile-{backend}",
                                         lambda folder: _hostile_runs(folder, backend)))


def _hostile_runs(folder: Path, backend: str) -> None:
    """Into `folder`: one eval of the whole corpus mixed with benign samples (run/) and one of the benign
    samples alone (control/), with a listener on the host's loopback and a canary file outside the project
    watched around them; state.json keeps what the tests check besides the two run folders."""
    projects = user_manifests(folder / "projects")
    settings = load_settings()
    tree = checkout(find_manifest(PROJECT, settings), settings).path
    status_before = git_status(tree)
    canary_dir = Path(tempfile.mkdtemp(prefix=f"{CANARY_GLOB}-"))
    try:
        secret = f"canary-{uuid.uuid4().hex}"
        (canary_dir / "secret.txt").write_text(secret + "\n")
        listener = Listener()
        labels = write_samples(folder / "hostile.jsonl", _with_port(corpus(), listener.port))
        try:
            result = run_eval(folder / "hostile.jsonl", folder / "run", backend, projects)
        finally:
            listener.close()
        canary_after = (canary_dir / "secret.txt").read_text()
    finally:
        subprocess.run(["rm", "-rf", str(canary_dir)], check=False)
    good = [(t, c) for t, c, _ in benign()]
    (folder / "benign.jsonl").write_text("".join(json.dumps({"task_id": t, "solution": c}) + "\n" for t, c in good))
    control = run_eval(folder / "benign.jsonl", folder / "control", backend, projects)
    state = {"backend": backend, "port": listener.port, "labels": labels, "tree": str(tree),
             "status_before": status_before, "secret": secret, "canary_after": canary_after,
             "received": [r.decode("latin-1") for r in listener.received],
             "result": _process(result), "control": _process(control)}
    (folder / "state.json").write_text(json.dumps(state))


def _load_hostile_runs(folder: Path) -> dict:
    """What _hostile_runs left in `folder`, as the tests read it."""
    state = json.loads((folder / "state.json").read_text())
    return {**state, "tmp": folder, "tree": Path(state["tree"]), "projects": folder / "projects",
            "hostile": _with_port(corpus(), state["port"]),
            "received": [r.encode("latin-1") for r in state["received"]],
            "result": SimpleNamespace(**state["result"]), "control": SimpleNamespace(**state["control"])}


def _with_port(hostile: list[Hostile], port: int) -> list[Hostile]:
    return [replace(h, code=h.code.replace(str(SAMPLE_PORT), str(port))) for h in hostile]


def _process(done: subprocess.CompletedProcess) -> dict:
    return {"returncode": done.returncode, "stdout": done.stdout, "stderr": done.stderr, "pid": done.pid}
