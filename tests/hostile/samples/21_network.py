# attack: opens a network connection and sends data (only ever to 127.0.0.1: the test suite
#   listens there and records what arrives); the payload names the sample's working directory and the
#   key carries what happened ("hostile-net:connected" or the error), so both ends can be checked
# targets: docker's network_mode=none (local does NOT isolate the network: documented)
# expect: fail
import os
import socket
import sys


def typedkey(*args, **kwargs):
    """Return a typed cache key for the specified hashable arguments."""
    try:
        with socket.create_connection(("127.0.0.1", 47613), timeout=2) as s:
            s.sendall(f"coderun-hostile-exfiltration {os.getcwd()}\n".encode())
        status = "hostile-net:connected"
    except OSError as e:
        status = f"hostile-net:{type(e).__name__}"
    print(status, file=sys.stderr)  # shown in the failing test's report, whichever test fails first
    return hashkey(*args, **kwargs) + (status,)
