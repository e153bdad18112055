# attack: changes the working directory and sys.path for the whole process
# targets: the sandbox's cwd and paths are per command; the next sample starts clean
# expect: fail
import os
import sys


def typedkey(*args, **kwargs):
    """Return a typed cache key for the specified hashable arguments."""
    os.chdir("/")
    sys.path[:] = ["/tmp"] + sys.path[::-1]
    return hashkey(*args, **kwargs)
