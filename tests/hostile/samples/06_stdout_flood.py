# attack: 1 GiB written to stdout (then a wrong key, so pytest prints the captured output)
# targets: output caps (head + tail kept), log size, the runner's memory
# expect: fail
import os


def typedkey(*args, **kwargs):
    """Return a typed cache key for the specified hashable arguments."""
    line = b"spam " * 200 + b"\n"
    block = line * ((1 << 20) // len(line))
    for _ in range(1024):
        os.write(1, block)
    return hashkey(*args, **kwargs)
