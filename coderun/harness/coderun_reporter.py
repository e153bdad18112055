"""coderun's pytest reporter: loaded with `-p coderun_reporter` from a folder outside the sample's copy.

Standalone on purpose (no coderun imports): it runs inside the project's interpreter, which may be
another Python version without coderun installed. It is configured by the environment variables below,
removed from os.environ as soon as it is imported (before conftest files or test modules are):

    CODERUN_REPORT          path of the report file (JSON lines, opened once for appending)
    CODERUN_REPORT_TOKEN    a random token copied into every record, so stray lines are ignored
    CODERUN_TEST_TIMEOUT    seconds allowed per test (setup + call + teardown); 0 disables
    CODERUN_COLLECT_TIMEOUT seconds allowed from here to the end of collection (conftest files, test modules
                            and what they import); unset or 0 disables. Set for coderun's own bodies only
                            (a task build's stub that loops at import): a hang there fails every test
    CODERUN_TEST_CPU_TIMEOUT CPU seconds allowed per test besides the wall-clock limit; unset or 0 disables.
                            Set for coderun's own bodies only: a stub that loops burns CPU, and CPU time,
                            unlike the wall clock, does not grow when other processes share the cores
    CODERUN_DIFF            path of the differential step's payload (JSON, read at once; see below)
    CODERUN_TRUSTED         "1": the code under test is coderun's own (a task build's stub, trivial body or
                            the original in a pass+ run), so the test-code snapshot (coderun_testcode) is
                            skipped; never set for a sample. The harness's own integrity is checked as always

Records: `start`, `collected` (node ids and collection errors), `begin` / `test` per test, `tamper`
(the harness changed: a stable `code` and the words `what`), `note` (the same machinery replaced by code of
an installed package, i.e. a test dependency such as flexmock), `finish`.
`--coderun-keep NODEID` (repeatable) selects the tests to run after collection.
With a payload, the session's end first runs the differential step (coderun_differential) when every test
that ran passed (or, for a payload saying `"tests": "none"`, when nothing failed: no test is wanted), and
writes its result as a `differential` record (else `{"skipped": "tests failed"}`); the integrity check that
follows covers what the calls did.

What this guarantees, honestly: the generated code runs in this same process, so code written to attack
coderun specifically can forge records; the host corroborates a pass with what the process wrote elsewhere
(runner/corroborate.py). Generic moves are caught: an early exit leaves tests without a `test` record; a hang
is stopped by SIGALRM, then faulthandler; any change to pytest's, pluggy's, unittest's or this module's
objects, the builtins or the sys attributes pytest calls is named (coderun_integrity); a phase that
raised cannot be reported as passed.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import signal
import sys
import time

import _pytest.outcomes as _pytest_outcomes
import coderun_differential as differential
import coderun_integrity as integrity
import coderun_testcode as testcode
import pytest

_TOKEN, _TIMEOUT, _ROOT, _FD, _STDERR, _TRUSTED = "", 0.0, "", -1, None, False
_COLLECT_TIMEOUT, _ARMED_AT, _CPU_TIMEOUT = 0.0, 0.0, 0.0
# The payload as read: (its text, the reason it could not be read) or None without CODERUN_DIFF. Kept as an
# immutable string (parsed at the end), so the sample's code can neither edit it in place nor rebind it
# unseen (the reporter's globals are watched).
_DIFF = None
_run_differential = differential.run


def _read_payload(path: str) -> tuple[str, str]:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read(), ""
    except (OSError, ValueError) as e:
        return "", f"the payload could not be read: {type(e).__name__}: {e}"


def _arm() -> None:
    """Read (and remove) the variables above, and start the collection limit's alarm. Called on import; coderun's worker, which imports this
    module once per task before forking a process per sample, calls it again in each of them."""
    global _TOKEN, _TIMEOUT, _ROOT, _FD, _STDERR, _DIFF, _TRUSTED, _COLLECT_TIMEOUT, _ARMED_AT, _CPU_TIMEOUT
    _ARMED_AT = time.monotonic()
    path = os.environ.pop("CODERUN_REPORT", "")
    diff = os.environ.pop("CODERUN_DIFF", "")
    _DIFF = _read_payload(diff) if diff else None
    _TOKEN = os.environ.pop("CODERUN_REPORT_TOKEN", "")
    _TIMEOUT = float(os.environ.pop("CODERUN_TEST_TIMEOUT", "0") or 0)
    _TRUSTED = os.environ.pop("CODERUN_TRUSTED", "") == "1"
    _CPU_TIMEOUT = float(os.environ.pop("CODERUN_TEST_CPU_TIMEOUT", "0") or 0)
    _ROOT = os.path.realpath(os.getcwd())   # the sample's copy: pytest runs from its root
    _FD = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600) if path else -1
    # The real stderr, kept before pytest captures fd 2, so faulthandler's dump reaches the parent.
    _STDERR = os.fdopen(os.dup(2), "w") if _TIMEOUT > 0 else None
    _COLLECT_TIMEOUT = float(os.environ.pop("CODERUN_COLLECT_TIMEOUT", "0") or 0)
    if _COLLECT_TIMEOUT > 0:
        _arm_alarm(_COLLECT_TIMEOUT, _on_collect_alarm)


def _arm_alarm(seconds: float, handler) -> None:
    """SIGALRM in `seconds`; if it is swallowed or the process hangs in C code, faulthandler ends the
    process five seconds later with every thread's stack."""
    signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    faulthandler.dump_traceback_later(seconds + 5, exit=True, file=_STDERR or sys.stderr)


def _disarm_alarm() -> None:
    signal.setitimer(signal.ITIMER_REAL, 0)
    faulthandler.cancel_dump_traceback_later()


_MAX_MESSAGE = 4000
_MAX_LINES = 40

_phases: dict[str, dict[str, object]] = {}
_state: dict[str, object] = {"plugins_after_collection": None, "plugins_before_session": set()}
_timed_out: set[str] = set()
_config = None


def _emit(kind: str, **data: object) -> None:
    # Once the integrity snapshot is taken, records go to the channel and token it saw: a sample that
    # rebinds the reporter's _FD or _TOKEN is then reported on the real channel, not wherever it points.
    fd, token = _state.get("channel") or (_FD, _TOKEN)
    if fd < 0:
        return
    line = json.dumps({"token": token, "kind": kind, **data}, default=str) + "\n"
    # When the channel is gone, the missing records make every remaining test count as not run.
    with contextlib.suppress(OSError):
        os.write(fd, line.encode("utf-8", "replace"))


class TestTimeout(BaseException):
    """Raised in the main thread when a test overruns; a BaseException so `except Exception` in the
    code under test does not swallow it."""

    __test__ = False


def _on_alarm(signum, frame):
    raise TestTimeout(_MESSAGES["timeout"].format(seconds=f"{_TIMEOUT:g}"))


def _on_cpu_alarm(signum, frame):
    raise TestTimeout(_MESSAGES["cpu_timeout"].format(seconds=f"{_CPU_TIMEOUT:g}"))


def _on_collect_alarm(signum, frame):
    raise TestTimeout(_MESSAGES["collect_timeout"].format(seconds=f"{_COLLECT_TIMEOUT:g}"))


_isinstance, _type, _list, _len = isinstance, type, list, len   # bound before any sample's code runs
_SKIP = (_pytest_outcomes.Skipped,)


def _from_installed_package(obj) -> bool:
    """Whether `obj`'s code lives in an installed distribution (site-packages), outside the project copy."""
    func = getattr(obj, "__func__", None) or getattr(obj, "fget", None) or obj
    code = getattr(func, "__code__", None)
    path = os.path.realpath(getattr(code, "co_filename", "") or "")
    inside_copy = path.startswith(_ROOT + os.sep)
    return bool(path) and not inside_copy and ("/site-packages/" in path or "/dist-packages/" in path)


# A `tamper` record carries a stable `code` (the host grades on it, never on the words) and `what`, the
# words a person reads. The host treats a code it does not know as tampering.
_REPLACED_CODES = {"_pytest": "pytest_replaced", "pytest": "pytest_replaced", "pluggy": "pytest_replaced",
                   "unittest": "unittest_replaced", "coderun_reporter": "reporter_replaced",
                   "coderun_integrity": "reporter_replaced", "coderun_values": "reporter_replaced",
                   "coderun_differential": "reporter_replaced", "coderun_mutants": "reporter_replaced",
                   "coderun_testcode": "reporter_replaced",
                   "builtins": "runtime_replaced",
                   "sys": "runtime_replaced"}
_PLUGINS_CODE = "plugin_registered_during_tests"
_FORGED_CODE = "outcome_forged"
_TESTS_CODE = "tests_changed"
_MESSAGES = {
    "replaced": "{name} was replaced ({where})",
    "added": "{name} was added ({where})",
    "removed": "{name} was removed ({where})",
    "code": "the code of {name} was replaced ({where})",
    "replaced_by_package": "{name} was {change} by an installed package ({where})",
    "plugins": "pytest plugins registered during the tests ({where}): {names}",
    "forged": "{nodeid} ({when}): the call raised {error} but its report says {outcome}",
    "timeout": "Timeout: test exceeded {seconds} s (coderun per-test timeout)",
    "cpu_timeout": "Timeout: test used over {seconds} s of CPU (coderun per-test CPU limit of its own bodies)",
    "collect_timeout": "Timeout: collection exceeded {seconds} s (coderun collection timeout)",
    "tests": "{what} ({where})",
}
_arm()   # at import, before any conftest or test module (with what the collection limit's alarm needs above)


def _check_tampering(config, where: str) -> None:
    if config is None:
        return
    changes = integrity.changes()
    for change, name, new in changes:
        if _from_installed_package(new):
            # A test dependency hooking pytest (flexmock wraps call_runtest_hook): the project's own setup.
            _emit("note", what=_MESSAGES["replaced_by_package"].format(name=name, change=change, where=where))
        else:
            _emit("tamper", code=_REPLACED_CODES[name.partition(".")[0]],
                  what=_MESSAGES[change].format(name=name, where=where))
    for what in testcode.changes() if _state.get("tests_taken") else ():
        _emit("tamper", code=_TESTS_CODE, what=_MESSAGES["tests"].format(what=what, where=where))
    after = _state.get("plugins_after_collection")
    if after is not None:
        current = {id(p) for p in config.pluginmanager.get_plugins()}
        added = current - after
        if added:
            names = [config.pluginmanager.get_name(p) or repr(p) for p in config.pluginmanager.get_plugins()
                     if id(p) in added]
            _emit("tamper", code=_PLUGINS_CODE, what=_MESSAGES["plugins"].format(where=where, names=names))
        _state["plugins_after_collection"] = current


# -- hooks -------------------------------------------------------------------------------------

@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    """After (nearly) every other plugin's configure: the watched machinery is taken as it is now."""
    global _config
    _config = config
    _emit("start", pid=os.getpid(), python=sys.version.split()[0], pytest=pytest.__version__,
          timeout=_TIMEOUT, rootdir=str(getattr(config, "rootpath", None) or config.rootdir))


def pytest_addoption(parser):
    parser.addoption("--coderun-keep", action="append", default=None, metavar="NODEID",
                     help="run only these node ids (repeatable); the others collected are deselected")
    parser.addoption("--coderun-sample", default="", metavar="FILE",
                     help="the file holding the sample's code (relative to the root): not test code")


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
    import state, say) is then only missing, instead of aborting the whole run as a bad argument would.
    A wanted id may be a test's position key (see position_key): the test is then reported under it."""
    keep = config.getoption("coderun_keep")
    if not keep:
        return
    wanted = set(keep)
    selected, deselected = [], []
    for item in items:
        key = item.nodeid if item.nodeid in wanted else position_key(item)
        if key in wanted:
            _report_ids[item.nodeid] = key
            selected.append(item)
        else:
            deselected.append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
    items[:] = selected


_report_ids: dict[str, str] = {}   # node id -> the id the host asked for (a position key, or the node id)


def position_key(item):
    """A parametrized test by what does not change between runs: `FILE::NAME[#i-j]`, the positions of its
    parameters (an id made of an object's repr or the time is another in every run). None otherwise.
    tasks/coverage_map's plugin makes the same keys."""
    indices = getattr(getattr(item, "callspec", None), "indices", None)
    if not indices or not item.nodeid.endswith(item.name):
        return None
    base = item.nodeid[:len(item.nodeid) - len(item.name)] + item.name.split("[", 1)[0]
    return f"{base}[#{'-'.join(str(i) for i in indices.values())}]"


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_sessionstart(session):
    """Every plugin's configure has run (pytest-benchmark registers its session in a trylast configure,
    after ours): what is registered now came with the environment. The harness's integrity is taken once
    every plugin's sessionstart has run too. A sample's code runs this early only from a conftest the
    project loads first."""
    _state["plugins_before_session"] = {id(p) for p in session.config.pluginmanager.get_plugins()}
    if not _TRUSTED:
        testcode.read_sources(_test_sources(session.config))
    yield
    integrity.take()
    _state["channel"] = (_FD, _TOKEN)


def pytest_collectreport(report):
    if report.failed:
        _emit("collect_error", nodeid=report.nodeid, message=_trim(report))


def pytest_collection_finish(session):
    """Name every plugin registered during collection: the project's conftest files, or something the
    sample registered while its module was imported (the parent tells them apart). `seconds`: since the
    reporter was armed, i.e. what starting pytest and collecting took (the limit of coderun's own bodies'
    collection is a multiple of the original's)."""
    if _COLLECT_TIMEOUT > 0:
        _disarm_alarm()
    pm = session.config.pluginmanager
    plugins = pm.get_plugins()
    _state["plugins_after_collection"] = {id(p) for p in plugins}
    before = _state["plugins_before_session"]
    added = [{"name": str(pm.get_name(p)), "module": _module_of(p), "file": str(getattr(p, "__file__", "") or "")}
             for p in plugins if id(p) not in before and not _is_pytest_own(p)]
    _emit("collected", nodeids=[_report_ids.get(item.nodeid, item.nodeid) for item in session.items],
          plugins=added, seconds=round(time.monotonic() - _ARMED_AT, 3))
    if _TRUSTED:  # coderun's own body: nothing to guard the tests against (build runs, 18% of their time)
        return
    for what in testcode.take(list(session.items), _ROOT, session.config.getoption("coderun_sample")):
        _emit("tamper", code=_TESTS_CODE, what=_MESSAGES["tests"].format(what=what, where="when collection ended"))
    _state["tests_taken"] = True


def _test_sources(config) -> list[str]:
    """The test files the kept node ids name and the conftest files loaded: their text as the session starts."""
    files = {os.path.join(_ROOT, k.split("::", 1)[0]) for k in config.getoption("coderun_keep") or ()}
    files |= {str(getattr(m, "__file__", "")) for n, m in list(sys.modules.items())
              if n.rpartition(".")[2] == "conftest" and str(getattr(m, "__file__", "")).startswith(_ROOT)}
    return sorted(os.path.realpath(f) for f in files if f)


def pytest_runtest_logstart(nodeid, location):
    _phases[nodeid] = {}
    _emit("begin", nodeid=_report_ids.get(nodeid, nodeid))


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    """Arm the per-test alarms around setup, call and teardown."""
    if _TIMEOUT > 0:
        _arm_alarm(_TIMEOUT, _on_alarm)
    if _CPU_TIMEOUT > 0:
        signal.signal(signal.SIGPROF, _on_cpu_alarm)
        signal.setitimer(signal.ITIMER_PROF, _CPU_TIMEOUT)
    try:
        yield
    finally:
        _disarm()


def _disarm() -> None:
    if _TIMEOUT > 0:
        _disarm_alarm()
    if _CPU_TIMEOUT > 0:
        signal.setitimer(signal.ITIMER_PROF, 0)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    """The phase's outcome where pytest caught it (`call.excinfo`, read before any plugin turns it into a
    report), cross-checked with the report made of it: a call that raised cannot be reported as passed
    (an expected failure is reported as skipped, a strict unexpected pass as failed, never the reverse)."""
    error = _raw_error(item, call)
    # A timeout is the alarm's exception, alone or anywhere in the chain of what the test raised (as
    # pytest prints it), recognised by its type: its words may change.
    if error is not None and _caused_by_timeout(error):
        _timed_out.add(item.nodeid)
    result = yield
    if error is None or _isinstance(error, _SKIP):
        return
    report = result.get_result()
    outcome = getattr(report, "outcome", None)
    stored = vars(report).get("outcome") if hasattr(report, "__dict__") else None
    if outcome == "passed" or stored == "passed" or outcome != stored:
        _emit("tamper", code=_FORGED_CODE, what=_MESSAGES["forged"].format(
            nodeid=item.nodeid, when=call.when, error=_type(error).__name__, outcome=repr(outcome)))


def _raw_error(item, call):
    """What the phase raised: pytest's CallInfo caught it, or, for a unittest case, unittest's own run
    did and handed it to pytest (recorded there, see _record_unittest_errors; else as pytest kept it on
    the item, read through the instance dict as it wrote it)."""
    if call.excinfo is not None:
        return call.excinfo.value
    raised = _unittest_raised.pop(id(item), None) if call.when == "call" else None
    if raised is not None:
        return raised
    kept = vars(item).get("_excinfo") if hasattr(item, "__dict__") else None
    return kept[0].value if _isinstance(kept, _list) and kept else None


# What unittest handed to pytest, per item, recorded where pytest receives it: an item's own state (the
# list it keeps what unittest raised in) is within reach of code walking the stack, this record is not by
# a generic move, and the wrapper, installed at import before any sample's code, is part of the watched
# harness like the rest of pytest's classes.
_unittest_raised: dict[int, BaseException] = {}


def _record_unittest_errors() -> None:
    try:
        from _pytest.unittest import TestCaseFunction
    except ImportError:
        return
    original = vars(TestCaseFunction).get("_addexcinfo")
    if original is None or getattr(original, "_coderun", False):
        return

    def _addexcinfo(self, rawexcinfo):
        value = rawexcinfo[1] if _isinstance(rawexcinfo, tuple) and _len(rawexcinfo) == 3 else None
        if _isinstance(value, BaseException):
            _unittest_raised.setdefault(id(self), value)
        return original(self, rawexcinfo)

    _addexcinfo._coderun = True
    TestCaseFunction._addexcinfo = _addexcinfo


_record_unittest_errors()


def _caused_by_timeout(exc) -> bool:
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, TestTimeout):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ if exc.__cause__ is not None else (None if exc.__suppress_context__ else exc.__context__)
    return False


def pytest_runtest_logreport(report):
    phases = _phases.setdefault(report.nodeid, {})
    # A phase reports once, but with subtests (pytest 9's, or pytest-subtests) each subtest reports its call
    # before the test's own report, which says passed although a unittest subTest failed: a failure stays.
    if getattr(phases.get(report.when), "outcome", None) != "failed":
        phases[report.when] = report


def pytest_runtest_logfinish(nodeid, location):
    _disarm()
    _check_tampering(_config, f"after {nodeid}")
    phases = _phases.pop(nodeid, {})
    outcome, message, duration = _merge(phases)
    _ran[outcome] = _ran.get(outcome, 0) + 1
    _emit("test", nodeid=_report_ids.get(nodeid, nodeid), outcome=outcome, duration=duration, message=message,
          timeout=nodeid in _timed_out, at=time.time())


_ran: dict[str, int] = {}   # tests by outcome (the differential step runs when all that ran passed)


def pytest_sessionfinish(session, exitstatus):
    if _DIFF is not None:
        _differential(session)
    _check_tampering(session.config, "at the end of the session")
    _emit("finish", exitstatus=int(exitstatus), integrity={**integrity.cost, **testcode.cost})


def _differential(session) -> None:
    """The differential step, after the tests and before the session's last integrity check. A payload
    with `"tests": "none"` (coderun rank: a sample run on inputs only, its tests selecting nothing) asks for
    the step without any test having passed; a collection error (the module does not import) still skips it."""
    text, unreadable = _DIFF
    if session.testsfailed or _ran.get("failed") or _ran.get("error"):
        _emit("differential", skipped="tests failed")
        return
    if not _ran.get("passed") and not _no_tests_wanted(text):
        _emit("differential", skipped="no test ran")
        return
    try:
        started = time.perf_counter()
        result = {"error": unreadable} if unreadable else _run_differential(json.loads(text), root=_ROOT)
        result["step_seconds"] = round(time.perf_counter() - started, 4)  # what the step added to the run
    except Exception as e:  # a malformed payload, or a bug of the step: said in the record, tests unaffected
        result = {"error": f"the differential step raised {type(e).__name__}: {e}"}
    _emit("differential", **result)


def _no_tests_wanted(text: str) -> bool:
    try:
        payload = json.loads(text)
    except ValueError:
        return False
    return isinstance(payload, dict) and payload.get("tests") == "none"


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
