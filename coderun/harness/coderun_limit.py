"""coderun's per-test time limit for whole-suite runs of the original code (the baseline, the coverage run):
a pytest plugin loaded with `-p coderun_limit`. Standalone (stdlib and pytest only, Python 3.6).

    CODERUN_TEST_TIMEOUT    seconds allowed per test (setup + call + teardown); 0 disables
    CODERUN_LIMIT_LOG       a file that gets `begin NODEID`, `end NODEID [timeout]` and `finish` lines

A test over its limit is stopped by SIGALRM (a BaseException, so `except Exception` in the test does not
swallow it) and fails; one that hangs where the alarm cannot reach it (in C code, or swallowing the
exception) is ended with the whole process by faulthandler five seconds later. Its `begin` without an `end`,
and no `finish`, say which test it was (coderun_baseline runs the suite again without it).
Not a sandbox's reporter: it watches nothing, since only the original code runs under it.
"""

import faulthandler
import os
import signal
import sys

import pytest

_TIMEOUT = float(os.environ.pop("CODERUN_TEST_TIMEOUT", "0") or 0)
_LOG = os.environ.pop("CODERUN_LIMIT_LOG", "")
_FD = os.open(_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) if _LOG else -1
# The real stderr, kept before pytest captures fd 2, so faulthandler's dump reaches the log.
_STDERR = os.fdopen(os.dup(2), "w") if _TIMEOUT > 0 else None
_timed_out = set()


class TestTimeout(BaseException):
    """Raised in the main thread when a test overruns its limit."""

    __test__ = False


def _on_alarm(signum, frame):
    raise TestTimeout(f"coderun: the test ran over its time limit of {_TIMEOUT:g}s")


def _write(*fields: str) -> None:
    if _FD >= 0:
        os.write(_FD, ("\t".join(fields) + "\n").encode("utf-8", "replace"))


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    _write("begin", item.nodeid)
    if _TIMEOUT > 0:
        signal.signal(signal.SIGALRM, _on_alarm)
        signal.setitimer(signal.ITIMER_REAL, _TIMEOUT)
        faulthandler.dump_traceback_later(_TIMEOUT + 5, exit=True, file=_STDERR or sys.stderr)
    try:
        yield
    finally:
        if _TIMEOUT > 0:
            signal.setitimer(signal.ITIMER_REAL, 0)
            faulthandler.cancel_dump_traceback_later()
        _write("end", item.nodeid, *(["timeout"] if item.nodeid in _timed_out else []))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    if call.excinfo is not None and _caused_by_timeout(call.excinfo.value):
        _timed_out.add(item.nodeid)
    yield


def pytest_sessionfinish(session, exitstatus):
    _write("finish")


def _caused_by_timeout(exc) -> bool:
    """The alarm's exception, alone or anywhere in the chain of what the test raised."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, TestTimeout):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ if exc.__cause__ is not None else (None if exc.__suppress_context__ else exc.__context__)
    return False
