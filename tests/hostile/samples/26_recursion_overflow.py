# attack: unbounded recursion with the recursion limit lifted: the interpreter's C stack overflows
#   and the test process dies with a segmentation fault
# targets: a crashed test process; tests without results
# expect: fail
import sys


def typedkey(*args, **kwargs):
    """Return a typed cache key for the specified hashable arguments."""
    sys.setrecursionlimit(10 ** 8)

    def deeper(n):
        return deeper(n + 1) + 1

    return deeper(0)
