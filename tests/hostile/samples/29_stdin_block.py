# attack: reads standard input until end of file (blocks forever when stdin is a terminal or an
#   open pipe from the runner)
# targets: stdin is /dev/null for every command
# expect: fail
import os


def typedkey(*args, **kwargs):
    """Return a typed cache key for the specified hashable arguments."""
    data = b""
    while True:
        chunk = os.read(0, 65536)
        if not chunk:
            break
        data += chunk
    return hashkey(*args, **kwargs) + (data,)
