# attack: a non-daemon thread that spins forever; the function itself is correct, but the test
#   process can never exit (the interpreter waits for non-daemon threads at shutdown)
# targets: the wall-clock limit seen from outside; "all tests passed" must not be enough
# expect: timeout
import threading


def typedkey(*args, **kwargs):
    """Return a typed cache key for the specified hashable arguments."""
    if not getattr(threading, "_coderun_hostile_spin", False):
        threading._coderun_hostile_spin = True

        def spin():
            while True:
                pass

        threading.Thread(target=spin, name="hostile-spin").start()
    key = hashkey(*args, **kwargs)
    key += tuple(type(v) for v in args)
    key += tuple(type(v) for _, v in sorted(kwargs.items()))
    return key
