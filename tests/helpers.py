"""Small builders for real test fixtures: git repositories and tiny Python projects in temp dirs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# CoderEval's released files, beside the repository (../shared/codereval) as on CI and developers' machines.
CODEREVAL_DATA = Path(__file__).resolve().parents[2] / "shared" / "codereval"

# CoderEval's released CodeGen samples (tests/test_cluster.py and tests/test_serve.py run cachetools' ones).
CODEGEN = CODEREVAL_DATA / "results-CodeGen-raw.jsonl"


def codegen_samples(folder: Path, project: str) -> Path:
    """CoderEval's CodeGen records of `project`'s tasks, in CoderEval's own format (coderun maps the ids),
    written to a file in `folder`; a pytest skip when the released file is missing."""
    import pytest

    from coderun.config import load_settings
    from coderun.manifests.schema import find_manifest

    if not CODEGEN.is_file():
        pytest.skip(f"CoderEval's CodeGen samples are not at {CODEGEN}")
    manifest = find_manifest(project, load_settings())
    aliases = {a for t in manifest.tasks.targets for a in t.aliases}
    rows = [line for line in CODEGEN.read_text().splitlines() if json.loads(line)["_id"] in aliases]
    assert len(rows) >= 10, f"only {len(rows)} CodeGen records for {project}"
    path = folder / f"codegen-{project}.jsonl"
    path.write_text("\n".join(rows) + "\n")
    return path


def codegen_local_run(tmp_path_factory, project: str) -> Path:
    """The run folder of `coderun eval` on CoderEval's CodeGen samples of `project` (codegen_samples), local
    backend, workers executor, two slots: made once per session (tests/shared_home.py), the reference of
    tests/test_cluster.py and tests/test_serve.py alike."""
    from tests.shared_home import built_once

    def build(folder: Path) -> None:
        samples = codegen_samples(folder, project)
        done = subprocess.run([sys.executable, "-m", "coderun", "eval", "--samples", str(samples), "--project",
                               project, "--backend", "local", "--executor", "workers", "-j", "2", "--run-dir",
                               str(folder / "run"), "--json"], capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-4000:]

    return built_once(tmp_path_factory, f"codegen-{project}-local", build) / "run"


# A documented function of a small hand-made project, as several end-to-end tests use it.
DOC = '"""Return the {what} of the values, computed step by step for the caller."""'
MEAN = f"""def mean(values):
    {DOC.format(what="mean")}
    total = 0
    for v in values:
        total += v
    return total / len(values)
"""

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@localhost", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@localhost", "HOME": "/tmp", "PATH": "/usr/bin:/bin"}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, env=GIT_ENV, check=True, capture_output=True,
                          text=True).stdout.strip()


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def make_repo(root: Path, files: dict[str, str], message: str = "init") -> str:
    """A real git repository at `root` with `files` committed; returns the commit sha."""
    root.mkdir(parents=True, exist_ok=True)
    if not (root / ".git").exists():
        git(root, "init", "-q", "-b", "main")
    write_tree(root, files)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)
    return git(root, "rev-parse", "HEAD")


TINY_PROJECT = {
    "calc/__init__.py": "",
    "calc/ops.py": '''"""Arithmetic helpers."""


def add(a, b):
    """Return the sum of a and b."""
    total = a
    total = total + b
    result = total
    return result


def unused(x):
    """Never called by any test."""
    y = x * 2
    y = y + 1
    return y
''',
    "tests/test_ops.py": '''from calc.ops import add


def test_add():
    assert add(2, 3) == 5


def test_add_negative():
    assert add(-1, 1) == 0


def test_unrelated():
    assert 1 + 1 == 2
''',
}


# Tests of the tiny project that hang: one the per-test alarm stops, one that swallows it (faulthandler ends it).
HANGING_TESTS = {"calc/tests/test_hang.py": '''import time


def test_sleeps_forever():
    time.sleep(600)


def test_swallows_the_alarm():
    while True:
        try:
            time.sleep(600)
        except BaseException:
            pass
'''}
