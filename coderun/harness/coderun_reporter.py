"""coderun's pytest reporter: loaded with `-p coderun_reporter` from a folder outside the sample's copy.

Standalone on purpose (no coderun imports): it runs inside the project's interpreter, which may be
another Python version without coderun installed. It is configured by three environment variables,
removed from os.environ as soon as it is imported (before conftest files or test modules are):

    CODERUN_REPORT          path of the report file (JSON lines, opened once for appending)
    CODERUN_REPORT_TOKEN    a random token copied into every record, so stray lines are ignored
    CODERUN_TEST_TIMEOUT    seconds allowed per test (setup + call + teardown); 0 disables

Records: `start`, `collected` (node ids and collection errors), `begin` / `test` per test, `tamper`
(pytest or unittest result machinery patched, or plugins registered after collection; a stable `code`
and the words `what`), `note` (the same machinery replaced by code of an installed package, i.e. a test
dependency such as flexmock), `finish`.
`--coderun-keep NODEID` (repeatable) selects the tests to run after collection.

What this guarantees, honestly: the generated code runs in this same process, so code written to
attack coderun specifically can forge records. What it cannot do by accident or with generic tricks:
exiting early (`sys.exit`, `os._exit`, signals, KeyboardInterrupt) leaves tests without a `test`
record, and a missing test is a failure; printed "PASSED" lines and fake junit files are never read;
a test that hangs is stopped by SIGALRM, and by faulthandler (which ends the process) if the alarm is
swallowed; replacing pytest/unittest reporting functions or registering hooks after collection is
reported as tampering.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import signal
import sys
import time

import pytest

_TOKEN, _TIMEOUT, _ROOT, _FD, _STDERR = "", 0.0, "", -1, None


def _arm() -> None:
    """Read (and remove) the three variables. Called on import; coderun's worker, which imports this
    module once per task before forking a process per sample, calls it again in each of them."""
    global _TOKEN, _TIMEOUT, _ROOT, _FD, _STDERR
    path = os.environ.pop("CODERUN_REPORT", "")
    _TOKEN = os.environ.pop("CODERUN_REPORT_TOKEN", "")
    _TIMEOUT = float(os.environ.pop("CODERUN_TEST_TIMEOUT", "0") or 0)
    _ROOT = os.path.realpath(os.getcwd())   # the sample's copy: pytest runs from its root
    _FD = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600) if path else -1
    # The real stderr, kept before pytest captures fd 2, so faulthandler's dump reaches the parent.
    _STDERR = os.fdopen(os.dup(2), "w") if _TIMEOUT > 0 else None


_arm()
_MAX_MESSAGE = 4000
_MAX_LINES = 40

_phases: dict[str, dict[str, object]] = {}
_snapshot: dict[str, object] = {}
_plugins_after_collection: set[int] | None = None
_plugins_before_session: set[int] = set()
_timed_out: set[str] = set()
_config = None


def _emit(kind: str, **data: object) -> None:
    if _FD < 0:
        return
    line = json.dumps({"token": _TOKEN, "kind": kind, **data}, default=str) + "\n"
    # When the channel is gone, the missing records make every remaining test count as not run.
    with contextlib.suppress(OSError):
        os.write(_FD, line.encode("utf-8", "replace"))


class TestTimeout(BaseException):
    """Raised in the main thread when a test overruns; a BaseException so `except Exception` in the
    code under test does not swallow it."""

    __test__ = False


def _on_alarm(signum, frame):
    raise TestTimeout(_MESSAGES["timeout"].format(seconds=f"{_TIMEOUT:g}"))


# -- what a sample could patch to forge results ----------------------------------------------------

_WATCHED = (
    "_pytest.runner:call_and_report", "_pytest.runner:call_runtest_hook", "_pytest.runner:runtestprotocol",
    "_pytest.runner:pytest_runtest_makereport", "_pytest.runner:CallInfo.from_call",
    "_pytest.reports:TestReport.__init__", "_pytest.reports:TestReport.from_item_and_call",
    "_pytest.reports:BaseReport.passed", "_pytest.reports:BaseReport.failed",
    "_pytest.reports:BaseReport.skipped", "_pytest.reports:BaseReport.outcome",
    "_pytest.python:pytest_pyfunc_call", "_pytest.python:Function.runtest",
    "_pytest.unittest:TestCaseFunction.runtest", "_pytest.outcomes:fail", "_pytest.outcomes:skip",
    "unittest:TestCase.run", "unittest:TestCase.__call__", "unittest:TestResult.addFailure",
    "unittest:TestResult.addError", "unittest:TestResult.wasSuccessful",
    "coderun_reporter:_emit", "coderun_reporter:_merge",
)


def _lookup(spec: str) -> object:
    """The object at `module:Attr.path`, read through class __dict__s so properties are not called."""
    module_name, _, path = spec.partition(":")
    obj = sys.modules.get(module_name)
    for part in path.split("."):
        if obj is None:
            return None
        obj = vars(obj).get(part) if isinstance(obj, type) else getattr(obj, part, None)
    return obj


def _watched() -> dict[str, object]:
    import unittest  # noqa: F401  (so unittest's classes are there to be watched)

    return {spec: _lookup(spec) for spec in _WATCHED}


def _from_installed_package(obj) -> bool:
    """Whether `obj`'s code lives in an installed distribution (site-packages), outside the project copy."""
    func = getattr(obj, "__func__", obj)
    code = getattr(func, "__code__", None)
    path = os.path.realpath(getattr(code, "co_filename", "") or "")
    inside_copy = path.startswith(_ROOT + os.sep)
    return bool(path) and not inside_copy and ("/site-packages/" in path or "/dist-packages/" in path)


# A `tamper` record carries a stable `code` (the host grades on it, never on the words) and `what`, the
# words a person reads. The host treats a code it does not know as tampering.
_REPLACED_CODES = {"_pytest": "pytest_replaced", "unittest": "unittest_replaced",
                   "coderun_reporter": "reporter_replaced"}
_PLUGINS_CODE = "plugin_registered_during_tests"
_MESSAGES = {
    "replaced": "{name} was replaced ({where})",
    "replaced_by_package": "{name} was replaced by an installed package ({where})",
    "plugins": "pytest plugins registered during the tests ({where}): {names}",
    "timeout": "Timeout: test exceeded {seconds} s (coderun per-test timeout)",
}


def _check_tampering(config, where: str) -> None:
    if not _snapshot or config is None:
        return
    now = _watched()
    for name, original in _snapshot.items():
        if now.get(name) is not original:
            if _from_installed_package(now.get(name)):
                # A test dependency hooking pytest (flexmock wraps call_runtest_hook): the project's own setup.
                _emit("note", what=_MESSAGES["replaced_by_package"].format(name=name, where=where))
            else:
                _emit("tamper", code=_REPLACED_CODES[name.split(":")[0].split(".")[0]],
                      what=_MESSAGES["replaced"].format(name=name, where=where))
    _snapshot.update(now)  # report each replacement once
    global _plugins_after_collection
    if _plugins_after_collection is not None:
        current = {id(p) for p in config.pluginmanager.get_plugins()}
        added = current - _plugins_after_collection
        if added:
            names = [config.pluginmanager.get_name(p) or repr(p) for p in config.pluginmanager.get_plugins()
                     if id(p) in added]
            _emit("tamper", code=_PLUGINS_CODE, what=_MESSAGES["plugins"].format(where=where, names=names))
        _plugins_after_collection = current


# -- hooks -------------------------------------------------------------------------------------

@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    """After (nearly) every other plugin's configure: the watched machinery is taken as it is now."""
    global _config
    _config = config
    _snapshot.update(_watched())
    _emit("start", pid=os.getpid(), python=sys.version.split()[0], pytest=pytest.__version__,
          timeout=_TIMEOUT, rootdir=str(getattr(config, "rootpath", None) or config.rootdir))


def pytest_addoption(parser):
    parser.addoption("--coderun-keep", action="append", default=None, metavar="NODEID",
                     help="run only these node ids (repeatable); the others collected are deselected")


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector, name, obj):
    """Within the test files, build only the classes and functions a kept node id names: in a file of
    hundreds of tests, building the others is most of the collection time. Which items the named ones
    yield is pytest's business as always (a unittest class still yields all its methods, deselected below)."""
    wanted = _wanted_names(collector)
    return [] if wanted is not None and name not in wanted else None


_wanted_cache: dict[str, set[str] | None] = {}


def _wanted_names(collector) -> set[str] | None:
    """The names a kept node id has right below this module or class; None: keep everything."""
    nodeid = str(getattr(collector, "nodeid", "") or "")
    if nodeid not in _wanted_cache:
        keep = _config.getoption("coderun_keep") if _config is not None else None
        prefix = nodeid.replace("::()", "") + "::"
        ids = [k.replace("::()", "") for k in keep or ()]
        names = {k[len(prefix):].split("::", 1)[0].split("[", 1)[0] for k in ids if k.startswith(prefix)}
        _wanted_cache[nodeid] = names if keep else None
    return _wanted_cache[nodeid]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    """Select the wanted node ids after collection: an id that does not collect (tests generated from the
    import state, say) is then only missing, instead of aborting the whole run as a bad argument would."""
    keep = config.getoption("coderun_keep")
    if not keep:
        return
    wanted = set(keep)
    selected = [item for item in items if item.nodeid in wanted]
    deselected = [item for item in items if item.nodeid not in wanted]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
    items[:] = selected


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    """Every plugin's configure has run: what is registered now came with the environment. An installed
    plugin may register more objects in a configure that runs after ours (pytest-benchmark registers its
    session in a trylast configure too), so the line is drawn here, not at our configure. A sample's code
    could run this early only from a conftest the project loads first, as before."""
    global _plugins_before_session
    _plugins_before_session = {id(p) for p in session.config.pluginmanager.get_plugins()}


def pytest_collectreport(report):
    if report.failed:
        _emit("collect_error", nodeid=report.nodeid, message=_trim(report))


def pytest_collection_finish(session):
    """Name every plugin registered during collection: the project's conftest files, or something the
    sample registered while its module was imported (the parent tells them apart)."""
    global _plugins_after_collection
    pm = session.config.pluginmanager
    plugins = pm.get_plugins()
    _plugins_after_collection = {id(p) for p in plugins}
    added = [{"name": str(pm.get_name(p)), "module": _module_of(p), "file": str(getattr(p, "__file__", "") or "")}
             for p in plugins if id(p) not in _plugins_before_session and not _is_pytest_own(p)]
    _emit("collected", nodeids=[item.nodeid for item in session.items], plugins=added)


def pytest_runtest_logstart(nodeid, location):
    _phases[nodeid] = {}
    _emit("begin", nodeid=nodeid)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    """Arm the per-test alarm around setup, call and teardown."""
    if _TIMEOUT > 0:
        signal.signal(signal.SIGALRM, _on_alarm)
        signal.setitimer(signal.ITIMER_REAL, _TIMEOUT)
        # If the alarm is swallowed or the test hangs in C code, dump the stacks and end the process.
        faulthandler.dump_traceback_later(_TIMEOUT + 5, exit=True, file=_STDERR or sys.stderr)
    try:
        yield
    finally:
        _disarm()


def _disarm() -> None:
    if _TIMEOUT > 0:
        signal.setitimer(signal.ITIMER_REAL, 0)
        faulthandler.cancel_dump_traceback_later()


def pytest_runtest_makereport(item, call):
    # A timeout is the alarm's exception, alone or anywhere in the chain of what the test raised (as
    # pytest prints it), recognised by its type: its words may change.
    if call.excinfo is not None and _caused_by_timeout(call.excinfo.value):
        _timed_out.add(item.nodeid)


def _caused_by_timeout(exc) -> bool:
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, TestTimeout):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ if exc.__cause__ is not None else (None if exc.__suppress_context__ else exc.__context__)
    return False


def pytest_runtest_logreport(report):
    _phases.setdefault(report.nodeid, {})[report.when] = report


def pytest_runtest_logfinish(nodeid, location):
    _disarm()
    _check_tampering(_config, f"after {nodeid}")
    phases = _phases.pop(nodeid, {})
    outcome, message, duration = _merge(phases)
    _emit("test", nodeid=nodeid, outcome=outcome, duration=duration, message=message,
          timeout=nodeid in _timed_out, at=time.time())


def pytest_sessionfinish(session, exitstatus):
    _check_tampering(session.config, "at the end of the session")
    _emit("finish", exitstatus=int(exitstatus))


def _module_of(plugin) -> str:
    return str(getattr(plugin, "__name__", None) if isinstance(plugin, type(sys)) else type(plugin).__module__)


def _is_pytest_own(plugin) -> bool:
    """pytest registers its session and fixture manager as plugins once the session starts."""
    module = _module_of(plugin)
    return module == "_pytest" or module.startswith("_pytest.")


# -- helpers -----------------------------------------------------------------------------------

def _merge(phases: dict[str, object]) -> tuple[str, str, float]:
    """One outcome from setup/call/teardown reports: an error outside the call is `error`. Reads the
    plain `outcome` strings, not the report properties, which are easier to patch."""
    duration = sum(float(getattr(r, "duration", 0.0) or 0.0) for r in phases.values())
    setup, call, teardown = phases.get("setup"), phases.get("call"), phases.get("teardown")
    setup_outcome = getattr(setup, "outcome", None)
    if setup_outcome == "failed":
        return "error", _trim(setup), duration
    if setup_outcome == "skipped":
        return "skipped", _trim(setup), duration
    if call is None:
        return "error", "the test body did not run", duration
    call_outcome = getattr(call, "outcome", None)
    if call_outcome in ("failed", "skipped"):
        return call_outcome, _trim(call), duration
    if getattr(teardown, "outcome", None) == "failed":
        return "error", _trim(teardown), duration
    if call_outcome != "passed" or setup_outcome != "passed":
        return "error", f"unexpected outcomes setup={setup_outcome!r} call={call_outcome!r}", duration
    return "passed", "", duration


def _trim(report) -> str:
    """The exception line first, then the last frames of the traceback, within a few kilobytes."""
    longrepr = getattr(report, "longrepr", None)
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # a skip: (file, line, reason)
        return str(longrepr[2])[:_MAX_MESSAGE]
    text = getattr(report, "longreprtext", "") or str(longrepr or "")
    crash = getattr(getattr(longrepr, "reprcrash", None), "message", "")
    lines = text.rstrip().splitlines()[-_MAX_LINES:]
    body = "\n".join(lines)[-_MAX_MESSAGE:]
    return f"{crash}\n{body}" if crash and crash not in body[-len(crash) - 200:] else body
