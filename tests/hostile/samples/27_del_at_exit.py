# attack: an object whose __del__ runs at interpreter exit, raises, and forces exit status 0 (to turn
#   pytest's "tests failed" status into success)
# targets: grading on exit code; crashes at shutdown
# expect: fail
class _AtExit:
    def __del__(self, _exit=__import__("os")._exit):
        try:
            raise RuntimeError("hostile __del__")
        finally:
            _exit(0)


_HOLDER = []


def typedkey(*args, **kwargs):
    """Return a typed cache key for the specified hashable arguments."""
    if not _HOLDER:
        _HOLDER.append(_AtExit())
    return hashkey(*args, **kwargs)
