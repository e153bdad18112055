# attack: while the module is imported (during collection) it sets a profile function that waits for
#   each test module's body to finish executing, and then swaps the code of its test methods for a no-op
#   before pytest collects them: the tests that run are not the tests in the files. The function is
#   wrong (an untyped key)
# targets: the tests that run are the tests that were verified (issue 34): collected test code compared
#   with the code of the test files, not only watched from the end of collection
# expect: tampering
# forgery: yes
import os as _os
import sys as _sys
import types as _types


def _empty(*args, **kwargs):
    return None


def _on_module_end(frame, event, arg):
    if event != "return" or frame.f_code.co_name != "<module>":
        return
    if not _os.path.basename(frame.f_code.co_filename).startswith("test_"):
        return
    for cls in [v for v in list(frame.f_globals.values()) if isinstance(v, type)]:
        for func in list(vars(cls).values()):
            if isinstance(func, _types.FunctionType) and func.__name__.startswith("test"):
                func.__code__ = _empty.__code__


_PROFILE = _sys.setprofile(_on_module_end)


def typedkey(*args, **kwargs):
    """Return a typed cache key for the specified hashable arguments."""
    _sys.setprofile(None)
    return hashkey(*args, **kwargs)
