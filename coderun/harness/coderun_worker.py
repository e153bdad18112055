"""coderun's per-project test worker: started once per (project, slot) inside the sandbox, it forks a
child per sample. Standalone on purpose (no coderun imports): it runs in the project's interpreter, with
its sibling files of coderun/harness (all shipped into the sandbox's harness folder together).

    python coderun_worker.py CONFIG_JSON      (protocol: JSON lines, requests on stdin, answers on stdout;
                                               the messages are defined in coderun_protocol)

One process plays three roles, each in its own file:
- the worker (this file, SampleServer): started once, it imports pytest (the expensive part of a fresh
  `python -m pytest`), makes itself non-dumpable (a child of the same user can then neither ptrace it nor
  open its /proc files), reads the pristine tree from its stdin (a tar the host sends: no copy of the tree
  is anywhere its children can read), primes (coderun_priming) and answers `hello` with the sha256 of every
  file of the pristine tree (coderun_hashes). For each request it primes the request's new test files, puts the
  spliced file in its private sample folder (coderun_folders: the pristine tree with the kept `.pyc`
  files, a real copy, at the same path for every sample of this worker, so the code objects in the kept
  files name the files a fresh compile would; written from memory for the first sample and put back
  after each), forks a child and watches it (coderun_children), and answers with exit code, timeout,
  capped stdout / stderr, the reporter's raw lines and the hashes;
- the child (coderun_child): first drops every copy of the pristine file the sample replaces (its bytes and
  bytecode: coderun_folders.SampleFolders.forget), starts a new session, closes the protocol channel, points fd 0 at /dev/null
  and fds 1, 2 and the reporter's channel at pipes the worker reads, applies resource limits, scrubs the
  environment, rebuilds `sys.path` as `python -m pytest` with PYTHONPATH would (coderun_pytest_run), and
  runs `pytest.main` on the requested node ids; then shuts down as an interpreter would (non-daemon
  threads joined, atexit handlers run) and leaves with pytest's exit code;
- the template (coderun_template): pytest configured once per task, paused before any conftest is
  imported; each sample's child is forked from it and goes on with pytest in its own copy.
The worker also keeps, per file text, where the statements of the files in its children's tracebacks
start, so that pytest does not parse and walk those files again for every failure (coderun_statements);
takes the child's exit code from a pipe once the kernel marks the child as exiting, and reaps it after
answering (coderun_child.Exit); kills the child's process group at the deadline, then every process the
child left behind (its session, anything carrying this worker's or this sample's marker, and when
`kill_uid` is set every other process of this user), hashes the copy after the run, puts it back (or
deletes it) and deletes everything the child left in the shared temporary folders.
The verdict is decided by coderun on the host, from this evidence, by the same function as always.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time

import coderun_protocol as protocol
import pytest
from coderun_child import Resume, set_dumpable
from coderun_children import clean_shared, fork_and_wait, new_cgroup, remove_cgroup
from coderun_folders import SampleFolders
from coderun_hashes import hashes
from coderun_priming import prime, warm_up
from coderun_statements import Statements
from coderun_template import Templates


class SampleServer:
    """The worker process: answers the host's requests on its protocol channel, one sample at a time.
    A template is a forked copy of it (paused), answering the requests the worker relays."""

    def __init__(self, cfg: dict):
        self.cfg = cfg
        self.scratch = cfg["scratch"]
        self.marker = cfg["marker"]               # NAME=VALUE in this worker's own environment
        self.base_path = [p for p in sys.path[1:]]  # sys.path without this script's folder
        self.primed: set[str] = set()             # test files whose collection was primed
        self.leftovers: list[tuple[str, dict]] = []  # a finished sample's folder and request, to clean
        self.folders = SampleFolders(self.scratch)
        self.templates = Templates(self)          # (worker) the paused copy of the current task
        self.paused = False                       # (template) True: a child goes back into pytest
        self.spare: set[int] = set()              # (template) never swept: the worker
        self.statements: Statements | None = Statements()  # pytest's statement ranges, per file text
        self.outputs: list[tuple[str, str]] = []  # a finished sample's stdout and folder, to learn frames from
        self.installed = tuple(os.path.join(p, "") for p in self.base_path if os.path.isabs(p))
        os.makedirs(self.scratch, mode=0o700, exist_ok=True)
        self.proto_in = os.fdopen(os.dup(0), "rb")
        self.proto_out = os.dup(1)
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.close(null)

    def send(self, msg: dict) -> None:
        self.send_raw(protocol.encode(msg))

    def send_raw(self, line: bytes) -> None:
        view = memoryview(line)
        while view:
            view = view[os.write(self.proto_out, view):]

    def serve(self) -> None:
        set_dumpable(0)
        tree = protocol.read_tree(self.proto_in)
        warm_up(self)
        if not self.statements.install():
            self.statements = None
        pristine = self.folders.load(tree)
        del tree
        self.send(protocol.hello(pytest.__version__, pristine))
        try:
            self.answer_all(delegate=True)
        finally:
            self.templates.stop()

    def answer_all(self, delegate: bool) -> None:
        """Answer every request on the protocol channel (the template's, too: its channel is the worker)."""
        for line in self.proto_in:
            req = protocol.decode(line)
            del line  # a template is forked below this frame: it keeps no copy of the first sample's code
            try:
                answer = self.templates.delegate(req) if delegate else None
                if answer is None:
                    self.send(self.run(req))
                else:
                    self.send_raw(answer)
            except Resume:  # a sample's child of the template: its folder is not to be cleaned
                self.leftovers.clear()
                raise
            except Exception as e:  # the worker's own failure: coderun falls back to the naive path
                self.send(protocol.error(req.get("id"), f"{type(e).__name__}: {e}"))
            finally:  # after the answer: coderun grades while the folder is put back
                while self.leftovers:
                    self.finish(*self.leftovers.pop())
                while self.outputs:
                    self.learn(*self.outputs.pop())

    def run(self, req: dict) -> dict:
        """One sample: its copy, its child, the copy's hashes after the run."""
        timing = {"prime": req.pop("prime_s", 0.0) + prime(self, req)}
        t0 = time.monotonic()
        base, project = self.folders.sample()
        try:
            self.folders.write_sample(project, req["relfile"], req["source"])
            for rel, text in (req.get("files") or {}).items():  # generated tests (coderun rank)
                self.folders.write_sample(project, rel, text)
            req["cgroup"] = new_cgroup(self, req["token"])
            t1 = time.monotonic()
            answer = fork_and_wait(self, req, base, project)
            t2 = time.monotonic()
            after = req["after"] = hashes(project, self.folders.known)
            protocol.finish_result(answer, after, {**timing, "copy": t1 - t0, "child": t2 - t1,
                                                   "hash": time.monotonic() - t2}, self.paused)
            self.outputs.append((answer["stdout"], project))
            return answer
        finally:
            self.leftovers.append((base, req))

    def finish(self, base: str, req: dict) -> None:
        """Clean up after a sample (its processes are gone, or for the child itself, on their way out)."""
        if req.get("reap"):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(req["reap"], 0)
        remove_cgroup(req.get("cgroup"))
        self.folders.tidy(base, req.get("after"))
        clean_shared(self)

    def learn(self, stdout: str, project: str) -> None:
        """Keep the statement starts of the files in a sample's tracebacks, for the next samples (the
        template's children, or the worker's and the templates it starts later)."""
        if self.statements is not None:
            self.statements.learn(stdout, project, self.folders.snapshot.text, self.installed)


if __name__ == "__main__":
    SampleServer(protocol.decode(sys.argv[1])).serve()
