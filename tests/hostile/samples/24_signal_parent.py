# attack: sends SIGTERM, then SIGKILL, to its parent process
# targets: the runner must not be the parent (a `timeout` wrapper is); the run goes on
# expect: fail
import os
import signal


def typedkey(*args, **kwargs):
    """Return a typed cache key for the specified hashable arguments."""
    parent = os.getppid()
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(parent, sig)
        except OSError:
            pass
    return hashkey(*args, **kwargs)
