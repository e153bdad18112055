"""`python -m pytest ARGS` inside an interpreter that is already running (a worker's child or template):
the environment, sys.path and argv that command would have, pytest.main, and the interpreter's exit.
Also what a priming run reports of its imports, and inspect's module maps a child inherits.
Standalone (stdlib and pytest, Python 3.7): imported by the worker.
"""

from __future__ import annotations

import atexit
import contextlib
import inspect
import linecache
import os
import sys
import tempfile
import threading
from typing import TYPE_CHECKING

import coderun_protocol as protocol
import pytest

if TYPE_CHECKING:
    from coderun_worker import SampleServer

REPORTER = "coderun_reporter"  # coderun.runner.execute.REPORTER_MODULE


def project_packages(root: str) -> set[str]:
    names = set()
    for entry in os.listdir(root):
        if entry.endswith(".py"):
            names.add(entry[:-3])
        elif os.path.isfile(os.path.join(root, entry, "__init__.py")):
            names.add(entry)
    return names


def forget_folder(base: str) -> None:
    """Drop what the import system and linecache remember of files under `base`: every sample's folder
    has the same path, and a directory listing cached for an earlier one must not be used."""
    for key in [k for k in sys.path_importer_cache if isinstance(k, str) and k.startswith(base)]:
        del sys.path_importer_cache[key]
    for key in [k for k in linecache.cache if not os.path.isabs(k) or k.startswith(base)]:
        del linecache.cache[key]


def _forget_project_modules(root: str) -> None:
    """The child must import the project from its copy. The worker's warm-up may have imported it already
    (a plugin such as pytest-django loads the project's settings module), from site-packages when the
    project is installed there; such modules would shadow the copy, so they are dropped."""
    names = project_packages(root)
    for module in [m for m in sys.modules if m.split(".", 1)[0] in names]:
        del sys.modules[module]


def import_root(w: SampleServer, project: str) -> str:
    return os.path.join(project, w.cfg["import_root"]) if w.cfg.get("import_root") else project


def child_env(w: SampleServer, req: dict, base: str, project: str) -> dict[str, str]:
    env = dict(w.cfg.get("base_env") or {})
    env.update({"HOME": os.path.join(base, "home"), "TMPDIR": os.path.join(base, "tmp")})
    env.update(req.get("env") or {})
    env["PYTHONPATH"] = f"{w.cfg['harness']}:{import_root(w, project)}"
    return env


def sample_env(req: dict, rep_w: int) -> dict[str, str]:
    """The reporter's variables for one sample. The differential payload, the trusted mark and the collection
    and CPU limits are named again here: a template's reporter popped them from the environment the child inherits,
    and it re-arms from this."""
    env = req.get("env") or {}
    return {"CODERUN_REPORT": f"/dev/fd/{rep_w}", "CODERUN_REPORT_TOKEN": req["token"],
            "CODERUN_TEST_TIMEOUT": str(req["per_test_timeout"]), "CODERUN_SAMPLE": req["token"],
            "CODERUN_DIFF": env.get("CODERUN_DIFF", ""), "CODERUN_TRUSTED": env.get("CODERUN_TRUSTED", ""),
            "CODERUN_COLLECT_TIMEOUT": env.get("CODERUN_COLLECT_TIMEOUT", ""),
            "CODERUN_TEST_CPU_TIMEOUT": env.get("CODERUN_TEST_CPU_TIMEOUT", "")}


def enter_project(w: SampleServer, req: dict, base: str, project: str, env: dict[str, str]) -> None:
    """The interpreter state of `python -m pytest ARGS` with PYTHONPATH=harness:import_root."""
    os.environ.clear()
    os.environ.update(env)
    tempfile.tempdir = None
    root = import_root(w, project)
    _forget_project_modules(root)
    forget_folder(base)
    sys.path[:] = [project, w.cfg["harness"], root, *w.base_path]
    sys.argv = [os.path.join(os.path.dirname(pytest.__file__), "__main__.py"), *req["args"]]
    atexit._clear()


def call_pytest(args: list[str], plugins: list | None) -> int:
    try:
        return int(pytest.main(list(args), plugins=plugins))
    except SystemExit as e:
        return _exit_code(e.code)
    except KeyboardInterrupt:
        return 130


class Probe:
    """Priming only: keeps pytest's config, to read which modules it marked for assertion rewriting."""

    config = None

    def pytest_configure(self, config) -> None:
        self.config = config


def report_imports(fd: int, before: set[str], probe: Probe, base: str, harness: str) -> None:
    """Priming only: the installed modules the collection imported, in import order (and see
    _module_files)."""
    names, inside = [], tuple(os.path.realpath(d) + os.sep for d in (base, harness))
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if name in before or (path is None and name not in sys.builtin_module_names):
            continue
        if path is None or not os.path.realpath(path).startswith(inside):
            names.append(name)
    hook = getattr(getattr(probe.config, "pluginmanager", None), "rewrite_hook", None)
    line = protocol.priming_report(names, sorted(getattr(hook, "_must_rewrite", ())), _module_files(base))
    with contextlib.suppress(OSError):
        os.write(fd, line)


def _module_files(base: str) -> list[dict[str, str]]:
    """Priming only: what inspect.getmodule maps (module -> file, file -> module) for the modules under
    the sample's folder, computed as a failure's repr computes it in every child (same folder path)."""
    caches = _inspect_caches()
    if caches is None:
        return [{}, {}]
    map_modules()
    inside = tuple({os.path.join(base, ""), os.path.join(os.path.realpath(base), "")})
    return [{m: f for m, f in caches[0].items() if isinstance(f, str) and f.startswith(inside)},
            {f: m for f, m in caches[1].items() if isinstance(f, str) and f.startswith(inside)}]


def _inspect_caches() -> tuple[dict, dict] | None:
    """inspect's module -> file and file -> module maps (None in a Python that has no such maps)."""
    caches = (getattr(inspect, "_filesbymodname", None), getattr(inspect, "modulesbyfile", None))
    return caches if all(isinstance(c, dict) for c in caches) else None


def map_modules() -> None:
    """inspect.getmodule maps every loaded module to its file (a realpath per path component) when asked
    about a file it does not know, as pytest's failure repr does: done before forking, a child maps only
    what it loads itself. The file asked about is one no module has (a known one returns at once)."""
    with contextlib.suppress(Exception):
        inspect.getmodule(map_modules.__code__, "<coderun: no such file>")


def map_module_files(files: object) -> None:
    """Take a priming's _module_files into inspect's caches: a child's failure repr then maps (a realpath
    per path component) only the modules the priming did not import."""
    caches = _inspect_caches()
    if caches is not None and isinstance(files, list) and len(files) == 2 and all(isinstance(c, dict) for c in files):
        caches[0].update(files[0])
        caches[1].update(files[1])


def _exit_code(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    with contextlib.suppress(Exception):
        print(value, file=sys.stderr)
    return 1


def shutdown(code: int) -> int:
    """What the interpreter does at exit: wait for non-daemon threads, then run atexit handlers."""
    try:
        threading._shutdown()  # type: ignore[attr-defined]
        atexit._run_exitfuncs()
    except SystemExit as e:
        code = _exit_code(e.code)
    except BaseException:  # noqa: BLE001  (printed, like the interpreter does; the code is unchanged)
        with contextlib.suppress(Exception):
            import traceback

            traceback.print_exc()
    return code

