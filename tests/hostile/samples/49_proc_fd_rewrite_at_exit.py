# attack: at interpreter shutdown (atexit), finds the report file among /proc/self/fd (its name carries
#   the token), truncates it and writes a complete record stream in which every test began and passed,
#   then ends the process with status 0
# targets: the records' channel read after the process ends; grading on exit status
# expect: fail
# forgery: yes
import atexit as _atexit
import json as _json
import os as _os
import re as _re


def _rewrite():
    for fd in _os.listdir("/proc/self/fd"):
        try:
            path = _os.readlink(f"/proc/self/fd/{fd}")
            if not _re.search(r"report-(\w+)\.jsonl$", path):
                continue
            with open(f"/proc/self/fd/{fd}") as f:
                records = [_json.loads(line) for line in f if line.startswith("{")]
        except (OSError, ValueError):
            continue
        forged = []
        for rec in records:
            if rec.get("kind") == "test":
                rec.update(outcome="passed", message="")
            if rec.get("kind") == "finish":
                rec.update(exitstatus=0)
            if rec.get("kind") != "tamper":
                forged.append(rec)
        _os.ftruncate(int(fd), 0)
        _os.write(int(fd), "".join(_json.dumps(r) + "\n" for r in forged).encode())
    _os._exit(0)


_HOOK = _atexit.register(_rewrite)


def typedkey(*args, **kwargs):
    """Return a typed cache key for the specified hashable arguments."""
    return hashkey(*args, **kwargs)
