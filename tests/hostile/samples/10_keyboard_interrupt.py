# attack: raise KeyboardInterrupt (pytest stops the session: "Interrupted")
# targets: tests that never ran must count as not passed
# expect: fail
def typedkey(*args, **kwargs):
    """Return a typed cache key for the specified hashable arguments."""
    raise KeyboardInterrupt
