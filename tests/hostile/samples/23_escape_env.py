# attack: a daemon that double-forks, leaves its session and execs with an EMPTY environment (so it
#   no longer carries the sandbox's marker variable), then sleeps for an hour
# targets: process cleanup that does not rely on the environment (pids cgroup, kill -1)
# expect: fail
import os
import sys


def typedkey(*args, **kwargs):
    """Return a typed cache key for the specified hashable arguments."""
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execve(sys.executable, [sys.executable, "-c", "import time; time.sleep(3600)",
                                       "coderun-hostile-escape"], {})
        os._exit(0)
    return hashkey(*args, **kwargs)
