# attack: edits other modules of the project (the package's __init__ and the cache decorators)
# targets: the sample's copy only; the pristine tree and later samples must not see the edits
# expect: fail
import cachetools


def typedkey(*args, **kwargs):
    """Return a typed cache key for the specified hashable arguments."""
    import os

    folder = os.path.dirname(cachetools.__file__)
    for name in ("__init__.py", "decorators.py"):
        with open(os.path.join(folder, name), "a") as f:
            f.write("\nraise ImportError('edited by a hostile sample')\n")
    return hashkey(*args, **kwargs)
