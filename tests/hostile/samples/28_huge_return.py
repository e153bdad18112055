# attack: returns a huge value (a key holding a 256 MiB string): assertion messages, reprs and
#   logs that include it must stay bounded
# targets: output caps, message caps in the reporter, the runner's memory
# expect: fail
def typedkey(*args, **kwargs):
    """Return a typed cache key for the specified hashable arguments."""
    return hashkey(*args, **kwargs) + ("x" * (256 << 20),)
