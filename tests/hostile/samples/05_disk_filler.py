# attack: fills the disk: ignores SIGXFSZ and starts a new file whenever one hits the size limit.
#   Self-limiting at 3 GiB so that the local backend (which has no disk quota) cannot fill the host.
# targets: file-size limit (RLIMIT_FSIZE / docker ulimit), docker's tmpfs size, scratch cleanup
# expect: fail
import os
import signal
import tempfile


def typedkey(*args, **kwargs):
    """Return a typed cache key for the specified hashable arguments."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    chunk = b"\0" * (8 << 20)
    written, n = 0, 0
    while written < (3 << 30):
        n += 1
        try:
            with open(os.path.join(tempfile.gettempdir(), f"hostile-fill-{n}"), "wb") as f:
                while written < (3 << 30):
                    f.write(chunk)
                    written += len(chunk)
        except OSError:
            if n > 64:
                break
    return hashkey(*args, **kwargs)
