# attack: an infinite loop in the function body (CPU-bound Python code, never returns)
# targets: per-test timeout (SIGALRM), whole-run wall-clock limit
# expect: timeout
def typedkey(*args, **kwargs):
    """Return a typed cache key for the specified hashable arguments."""
    key = hashkey(*args, **kwargs)
    while True:
        key += ()
    return key
