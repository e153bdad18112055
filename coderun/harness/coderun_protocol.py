"""The messages that cross the worker's pipes, defined once for both sides: JSON objects, one a line.

    host -> worker        the pristine tree (tree_header, then its bytes), then run requests  (run_request)
    worker -> host        hello, then a result or an error per request   (hello, result, error)
    worker -> template    the same run requests, relayed; the template's result lines go back unchanged
    template -> worker    first line: ready, or not ready and why         (ready, not_ready)
    child -> worker       on the reporter channel of a priming run: what the collection imported
                          (priming_report, read with priming_reports)

Standalone (stdlib only, Python 3.7): shipped into the sandbox with the worker and imported there as the
sibling module `coderun_protocol`; the host imports it as `coderun.harness.coderun_protocol`.
"""

from __future__ import annotations

import json
import os
import sys
from typing import NamedTuple

HELLO = "hello"
RUN = "run"
RESULT = "result"
ERROR = "error"


def encode(msg: dict) -> bytes:
    """One message as the line written on a pipe."""
    return (json.dumps(msg) + "\n").encode("utf-8", "replace")


def decode(line: bytes | str) -> dict:
    """One line read from a pipe (ValueError when it is not JSON)."""
    return json.loads(line)


# -- host -> worker -----------------------------------------------------------------------------------

TREE = "tree"


def tree_header(size: int) -> dict:
    """The first message: the pristine tree follows as `size` raw bytes (an uncompressed tar), the only way
    the worker gets it: no copy of it is anywhere a sample's process can read."""
    return {"kind": TREE, "size": size}


def read_tree(stream) -> bytes:
    """The worker's side: the tree message and its bytes, from the binary stream of its stdin."""
    header = decode(stream.readline() or b"{}")
    if header.get("kind") != TREE:
        raise ValueError(f"expected the project tree first, got {str(header)[:200]}")
    data = stream.read(int(header["size"]))
    if len(data) != int(header["size"]):
        raise ValueError(f"the project tree ended after {len(data)} of {header['size']} bytes")
    return data


def run_request(token: str, relfile: str, source: str, nodeids: list[str], timeout: float,
                per_test_timeout: float, env: dict[str, str], args: list[str], output_limit: int,
                template: bool, files: dict[str, str] | None = None, prime: list[str] | None = None) -> dict:
    """Run `nodeids` with `relfile` replaced by `source` (and `files`, path -> text, written beside it);
    `token` names the request and its records. `template`: configure pytest once for the requests alike
    (False for a one-off run). `prime`: the test files of the requests to come, primed with this one's
    (one collection for all of them instead of one per new file)."""
    return {"kind": RUN, "id": token, "token": token, "relfile": relfile, "source": source,
            "nodeids": list(nodeids), "timeout": timeout, "per_test_timeout": per_test_timeout,
            "env": env, "args": args, "output_limit": output_limit, "template": template,
            "files": dict(files or {}), "prime_files": list(prime or [])}


# -- worker -> host -----------------------------------------------------------------------------------

class Hello(NamedTuple):
    pid: int                    # the worker's pid, named in each sample's log
    pristine: dict[str, str]    # the pristine tree's file hashes (coderun_hashes)


def hello(pytest_version: str, pristine: dict[str, str]) -> dict:
    return {"kind": HELLO, "pid": os.getpid(), "uid": os.getuid(), "python": sys.version.split()[0],
            "pytest": pytest_version, "pristine": pristine}


def parse_hello(msg: dict) -> Hello | None:
    """The worker's hello; None when `msg` is something else."""
    if msg.get("kind") != HELLO:
        return None
    return Hello(pid=int(msg["pid"]), pristine=msg["pristine"])


class Result(NamedTuple):
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool
    truncated: bool             # stdout or stderr cut at the request's output_limit
    duration: float
    report: str                 # the reporter's raw lines
    report_truncated: bool
    after: dict[str, str]       # file hashes of the sample's copy after the run
    timing: dict[str, float]    # seconds per step in the worker
    template: bool              # pytest was configured once for the task


def result(req_id: str, returncode: int, timed_out: bool, duration: float, stdout: str, stderr: str,
           truncated: bool, report: str, report_truncated: bool) -> dict:
    """A child's run, as the worker saw it; `finish_result` adds what the worker learned after it."""
    return {"kind": RESULT, "id": req_id, "returncode": returncode, "timed_out": timed_out,
            "duration": duration, "stdout": stdout, "stderr": stderr, "truncated": truncated,
            "report": report, "report_truncated": report_truncated}


def finish_result(answer: dict, after: dict[str, str], timing: dict[str, float], template: bool) -> None:
    answer.update(after=after, timing=timing, template=template)


def parse_result(msg: dict, req_id: str) -> Result | None:
    """The worker's result for request `req_id`; None when `msg` is anything else."""
    if msg.get("kind") != RESULT or msg.get("id") != req_id:
        return None
    return Result(returncode=int(msg["returncode"]), stdout=msg["stdout"], stderr=msg["stderr"],
                  timed_out=bool(msg["timed_out"]), truncated=bool(msg["truncated"]),
                  duration=float(msg["duration"]), report=msg["report"],
                  report_truncated=bool(msg.get("report_truncated")), after=msg["after"],
                  timing=msg.get("timing") or {}, template=bool(msg.get("template")))


def error(req_id: object, why: str) -> dict:
    """The worker's own failure on a request (coderun then runs the sample on the naive path)."""
    return {"kind": ERROR, "id": req_id, "error": why}


# -- template -> worker -------------------------------------------------------------------------------

def ready() -> dict:
    return {"ready": True}


def not_ready(why: str) -> dict:
    return {"ready": False, "why": why}


def is_ready(msg: dict) -> bool:
    return bool(msg.get("ready"))


# -- child -> worker, priming runs only ---------------------------------------------------------------

def priming_report(imported: list[str], rewrite: list[str], files: list[dict[str, str]]) -> bytes:
    return (json.dumps({"prime": imported, "rewrite": rewrite, "files": files}) + "\n").encode()


def priming_reports(report: str) -> list[dict]:
    """The priming reports among a run's reporter lines (the reporter's own records are left out)."""
    return [json.loads(x) for x in report.splitlines() if x.startswith('{"prime"')]
