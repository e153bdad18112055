"""A $CODERUN_HOME built once per test session and shared by the files (and pytest-xdist workers) that need
the same project built, instead of each file building it again.

`built_once(tmp_path_factory, name, build)` runs `build(folder)` the first time any worker asks for `name`;
the others wait on a file lock beside the workers' own temporary folders and reuse the folder. A test never
uses that folder's home directly: `home_view(shared_home, dest)` makes a home of its own that links the
shared, read-only parts (source checkouts, git mirrors, sdists, each environment's venv) and copies the
rest (the task store, analysis cache, logs, each environment's records), so a test that changes its home,
an environment's records included, changes only its copy. This is what benchmarks/tasks_build_speed.py does
for its measured builds.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock

LINKED = ("src", "git", "sdists", "wheelhouse")  # read-only once built: linked, never copied
LINKED_IN_ENV = ("venv",)                         # an environment's interpreter and packages


def _session_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of this session's temporary folders: under xdist each worker's basetemp is a child of it
    (…/pytest-N/popen-gwK), without xdist it is the basetemp itself (its parent is shared by sessions)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """`name`'s folder, made by `build(folder)` once per session whichever worker asks first. A build that
    fails leaves no folder behind, so the next test to ask tries again and reports its own failure."""
    root = _session_root(tmp_path_factory) / "shared"
    root.mkdir(exist_ok=True)
    folder, done = root / name, root / f"{name}.done"
    with FileLock(str(root / f"{name}.lock")):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            try:
                build(folder)
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)
                raise
            done.touch()
    return folder


def home_view(shared_home: Path, dest: Path) -> Path:
    """A new $CODERUN_HOME at `dest` with what `shared_home` built: the read-only parts linked, the rest
    copied (symlinks kept as links). `dest` may be an empty folder already."""
    dest.mkdir(parents=True, exist_ok=True)
    for entry in shared_home.iterdir():
        target = dest / entry.name
        if entry.name in LINKED:
            target.symlink_to(entry)
        elif entry.name == "envs":
            target.mkdir()
            for env in entry.iterdir():
                _env_view(env, target / env.name)
        elif entry.is_dir():
            shutil.copytree(entry, target, symlinks=True)
        else:
            shutil.copy2(entry, target)
    return dest


def _env_view(env: Path, dest: Path) -> None:
    dest.mkdir()
    for entry in env.iterdir():
        target = dest / entry.name
        if entry.name in LINKED_IN_ENV:
            target.symlink_to(entry)
        elif entry.is_dir():
            shutil.copytree(entry, target, symlinks=True)
        else:
            shutil.copy2(entry, target)
