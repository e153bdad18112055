# attack: catches BaseException to hide failures: here the per-test timeout (a BaseException raised
#   from SIGALRM), KeyboardInterrupt and SystemExit are all swallowed and the loop goes on
# targets: the per-test timeout's second line (faulthandler ends the process), the wall-clock limit
# expect: timeout
def typedkey(*args, **kwargs):
    """Return a typed cache key for the specified hashable arguments."""
    while True:
        try:
            while True:
                pass
        except BaseException:
            continue
