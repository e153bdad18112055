"""Priming: what the worker does once so that every sample's child finds it done.

- warm_up: at start, run two failing tests, so that what pytest loads and compiles lazily to collect,
  run and report a failure is loaded before the first fork;
- prime, once per test file: a child collects the request's test files in a copy of the *pristine*
  tree with bytecode writing on, and the worker keeps the `.pyc` files it wrote (pytest's rewritten test
  modules, conftests, the project modules they import) in its own memory. Only unmodified project code
  runs there, so what is kept cannot come from a sample; a child cannot reach the worker's memory.
  The worker then imports, itself, the installed modules (third-party and standard library) that this
  collection imported, so a child finds them loaded (preimport).
Standalone (stdlib and pytest, Python 3.7): imported by the worker.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import tempfile
import threading
import time
import warnings
from typing import TYPE_CHECKING

import coderun_protocol as protocol
import coderun_testcode as testcode
import pytest
from coderun_children import fork_and_wait, new_cgroup
from coderun_folders import pycs, rmtree
from coderun_pytest_run import (
    child_env,
    forget_folder,
    import_root,
    map_module_files,
    map_modules,
    project_packages,
)

if TYPE_CHECKING:
    from coderun_worker import SampleServer


def unprimed(w: SampleServer, req: dict) -> bool:
    return any(n.split("::", 1)[0] not in w.primed for n in req["nodeids"])


def prime(w: SampleServer, req: dict) -> float:
    """Collect this request's new test files in a pristine copy with bytecode writing on; keep the
    .pyc files written and import what the collection imported from outside the project. The files the
    host says the next requests need (`prime_files`) are collected with them. A failed priming only means
    that those files get compiled, and those modules imported, by every sample."""
    own = [n.split("::", 1)[0] for n in req["nodeids"]]
    files = [f for f in dict.fromkeys([*own, *req.get("prime_files", ())]) if f not in w.primed]
    if not any(f in files for f in own):
        return 0.0
    t0 = time.monotonic()
    w.primed.update(files)
    base, project = w.folders.pristine()
    job = {**req, "token": "prime-" + req["token"], "cgroup": None, "prime": True,
           "args": [*req["args"], *(f for f in files if f not in own), "--collect-only"]}
    try:
        job["cgroup"] = new_cgroup(w, job["token"])
        answer = fork_and_wait(w, job, base, project)
        if answer["returncode"] == 0 and not answer["timed_out"]:
            w.folders.bytecode.update(pycs(project))
            for f in files:
                text = w.folders.snapshot.text(f)
                if w.statements and text is not None:
                    w.statements.remember_bytes(os.path.join(project, f), text)
            precompile_tests(w, files, project)
            found = protocol.priming_reports(answer["report"])
            if found:
                preimport(w, found[-1]["prime"], found[-1]["rewrite"], req, base, project)
                map_module_files(found[-1].get("files"))
    finally:
        w.finish(base, job)
    return time.monotonic() - t0


def precompile_tests(w: SampleServer, files: list[str], project: str) -> None:
    """The test code the reporter compares with its files (coderun_testcode), compiled once here for every
    sample: the test files, the other modules of their folders and the conftest files."""
    folders = {os.path.dirname(f) for f in files}
    for rel, data, *_ in w.folders.snapshot.files:
        if rel.endswith(".py") and (os.path.dirname(rel) in folders or os.path.basename(rel) == "conftest.py"):
            with contextlib.suppress(Exception):  # a file that does not compile is compiled (and fails) later
                testcode.precompile(os.path.realpath(os.path.join(project, rel)), data)


def preimport(w: SampleServer, names: list[str], rewrite: list[str], req: dict, base: str, project: str) -> None:
    """Import `names` here, as the child would: same environment, folder and sys.path."""
    root = import_root(w, project)
    skip = project_packages(root) | {n.split(".", 1)[0] for n in rewrite} | {"conftest", "__main__"}
    todo = [n for n in names if n not in sys.modules and n.split(".", 1)[0] not in skip]
    if not todo:
        return
    before, threads = set(sys.modules), threading.active_count()
    saved = (dict(os.environ), os.getcwd(), list(sys.path))
    try:
        os.environ.clear()
        os.environ.update(child_env(w, req, base, project))
        os.chdir(project)
        sys.path[:] = [project, w.cfg["harness"], root, *w.base_path]
        with warnings.catch_warnings():  # pytest undoes an import's filters after collection, too
            for name in todo:
                with contextlib.suppress(BaseException):
                    importlib.import_module(name)
    finally:
        os.environ.clear()
        os.environ.update(saved[0])
        os.chdir(saved[1])
        sys.path[:] = saved[2]
        forget_folder(base)
    added = set(sys.modules) - before
    if threading.active_count() != threads or any(m.split(".", 1)[0] in skip for m in added):
        for m in added:
            sys.modules.pop(m, None)
    map_modules()


def warm_up(w: SampleServer) -> None:
    """Run two failing tests once, so that what pytest loads and compiles lazily to collect, run and
    report a failure (modules, the tokenizer's regular expressions) is there before the first fork.
    Never with coderun's reporter, which reads its channel when imported."""
    folder = tempfile.mkdtemp(prefix="warm-", dir=w.scratch)
    cwd, path, argv = os.getcwd(), list(sys.path), list(sys.argv)
    try:
        with open(os.path.join(folder, f"{_WARM_MODULE}.py"), "w") as f:
            f.write(_WARM_TEST)
        os.chdir(folder)
        with contextlib.suppress(BaseException):
            pytest.main(["-q", "-p", "no:cacheprovider", "-o", "addopts=", folder])
    finally:
        os.chdir(cwd)
        sys.path[:], sys.argv = path, argv
        sys.modules.pop(_WARM_MODULE, None)
        rmtree(folder)
    map_modules()


_WARM_MODULE = "test_coderun_warm_up"
_WARM_TEST = """\
def nested(value):
    return {"key": value}[
        "missing"]


def test_compare():
    assert [1, "two", {"three": 3}] == [1, "two", {"three": 4}]


def test_raises():
    nested('''a
    b''' + \"\"\"c\"\"\" + 'd\\
e' + "f\\
g")
"""
