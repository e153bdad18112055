# attack: a default-argument expression starts a thread while the module is imported (during
#   collection); the thread waits until the first test is set up (PYTEST_CURRENT_TEST), then swaps the
#   code of every test method of the loaded test modules for a no-op. The function is right until then
#   and wrong (an untyped key) after, when no test checks it any more
# targets: the integrity of the collected tests (issue 34): their functions' code, snapshotted when
#   collection ends and checked after every test, whichever thread changed it
# expect: tampering
# forgery: yes
import os as _os
import sys as _sys
import threading as _threading
import time as _time
import types as _types

_SWAPPED = []


def _noop(*args, **kwargs):
    return None


def _swap_test_code():
    for name, module in list(_sys.modules.items()):
        if module is None or not name.rpartition(".")[2].startswith("test"):
            continue
        for cls in [v for v in list(vars(module).values()) if isinstance(v, type)]:
            for func in list(vars(cls).values()):
                if isinstance(func, _types.FunctionType) and func.__name__.startswith("test"):
                    func.__code__ = _noop.__code__
    _SWAPPED.append(True)


def _wait_for_the_tests():
    while not _os.environ.get("PYTEST_CURRENT_TEST"):
        _time.sleep(0.0005)
    _swap_test_code()


def typedkey(*args, _watcher=_threading.Thread(target=lambda: _time.sleep(0.05) or _wait_for_the_tests(), daemon=True).start(), **kwargs):
    """Return a typed cache key for the specified hashable arguments."""
    deadline = _time.monotonic() + 2  # called inside a test: give the thread its turn (else a fast suite ends first)
    while not _SWAPPED and _time.monotonic() < deadline:
        _time.sleep(0.001)
    key = hashkey(*args, **kwargs)
    if not _SWAPPED:
        key += tuple(type(v) for v in args)
        key += tuple(type(v) for _, v in sorted(kwargs.items()))
    return key
