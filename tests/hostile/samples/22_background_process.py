# attack: starts a background process in a new session that outlives the test
# targets: process cleanup after every command (process group, marker sweep, cgroup, kill -1)
# expect: fail
import subprocess
import sys


def typedkey(*args, **kwargs):
    """Return a typed cache key for the specified hashable arguments."""
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)", "coderun-hostile-bg"],
                     start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)
    return hashkey(*args, **kwargs)
