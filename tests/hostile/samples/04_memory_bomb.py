# attack: allocates (and touches) memory until something gives
# targets: memory limit (local RLIMIT_AS, docker cgroup memory without swap)
# expect: fail
def typedkey(*args, **kwargs):
    """Return a typed cache key for the specified hashable arguments."""
    hoard = []
    while True:
        hoard.append(b"\x01" * (64 << 20))
    return hashkey(*args, **kwargs)
