# attack: ends the test process with status 0 while the module is imported (during collection),
#   through a module-level helper assignment
# targets: a run in which no test ran at all
# expect: fail
_BOOT = __import__("os")._exit(0)


def typedkey(*args, **kwargs):
    """Return a typed cache key for the specified hashable arguments."""
    return hashkey(*args, **kwargs)
