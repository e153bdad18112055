"""The hostile corpus (tests/hostile/samples) and the tools to run it through `coderun eval` as a user
would: a subprocess on the built-in cachetools project, with a user manifest copy that only tightens the
time limits, so a hanging sample costs seconds rather than minutes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from coderun.config import BUILTIN_PROJECTS_DIR, load_settings
from coderun.evaluation.store import RunStore

SAMPLES_DIR = Path(__file__).parent / "hostile" / "samples"
PROJECT = "cachetools"
TARGET = "cachetools/cachetools/keys.py::typedkey"      # file_runnable, 12 fast tests
OTHER = "cachetools/cachetools/cache.py::Cache.get"      # self_contained, 8 fast tests
PER_TEST_TIMEOUT = 8
RUN_TIMEOUT = 40

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
