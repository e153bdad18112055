"""A stream collector that keeps at most `limit` bytes: the head, and a rolling tail.

Standalone (stdlib only, Python 3.7+): the host's sandboxes use it for command output, and the worker, in
the sandbox, for its children's output.
"""


class CappedBuffer:
    """Collects a stream, keeping at most `limit` bytes: the head, and a rolling tail."""

    def __init__(self, limit: int):
        self.limit = limit
        self.half = max(limit // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self.half:
                del self.tail[: len(self.tail) - self.half]

    @property
    def truncated(self) -> bool:
        return self.total > len(self.head) + len(self.tail)

    def text(self) -> str:
        if not self.truncated:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", "replace")
        cut = self.total - len(self.head) - len(self.tail)
        return (bytes(self.head).decode("utf-8", "replace")
                + f"\n... [{cut} bytes cut by coderun] ...\n"
                + bytes(self.tail).decode("utf-8", "replace"))
