"""coderun's per-project test worker: started once per (project, slot) inside the sandbox, it forks a
child per sample. Standalone on purpose (no coderun imports): it runs in the project's interpreter.

    python coderun_worker.py CONFIG_JSON      (protocol: JSON lines, requests on stdin, answers on stdout)

Started once, the worker imports pytest (the expensive part of a fresh `python -m pytest`), makes itself
non-dumpable (a child of the same user can then neither ptrace it nor open its /proc files), and answers
`hello` with the sha256 of every file of the pristine tree. For each request it:
- primes, once per test file: a child collects the request's test files in a copy of the *pristine* tree
  with bytecode writing on, and the worker keeps the `.pyc` files it wrote (pytest's rewritten test
  modules, conftests, the project modules they import) in its own memory. Only unmodified project code
  runs there, so what is kept cannot come from a sample; a child cannot reach the worker's memory.
  The worker then imports, itself, the installed modules (third-party and standard library) that this
  collection imported, so a child finds them loaded. Left out: the project's own packages, and modules
  pytest marks for assertion rewriting (a plugin imported early would not be rewritten). A batch whose
  import pulled in a project module or started a thread is dropped from sys.modules again;
- keeps a private folder holding the pristine tree with the kept `.pyc` files (a real copy: see
  coderun/runner/workers.py for why not hardlinks), takes out the spliced file's own and writes the spliced
  file there. The folder has the same path for every sample of this worker, so the code objects in the
  kept files name the files a fresh compile would. It is written from memory for the first sample and put
  back after each (see _Folder);
- forks a child that starts a new session, closes the protocol channel, points fd 0 at /dev/null and
  fds 1, 2 and the reporter's channel at pipes the worker reads, applies resource limits, scrubs the
  environment, rebuilds `sys.path` as `python -m pytest` with PYTHONPATH would, and runs `pytest.main`
  on the requested node ids; then shuts down as an interpreter would (non-daemon threads joined, atexit
  handlers run) and leaves with pytest's exit code;
- configures pytest once per task (see README, "Executors and speed"): a forked *template* sets up the child's
  state in a pristine copy, runs pytest.main and pauses in pytest_load_initial_conftests, before any conftest
  or test module is imported; each sample's child is then forked from the template and returns from that
  hook into pytest, in its own copy. The template answers the requests it is given exactly as the worker
  would (through the worker, which relays its answer lines); a task whose configuration imported project
  code, started a thread or has another outermost wrapper of that hook is run without a template;
- keeps, per file text, where the statements of the files in its children's tracebacks start, so that pytest
  does not parse and walk those files again for every failure (see _Statements);
- takes the child's exit code from a pipe once the kernel marks the child as exiting, and reaps it after
  answering (see _Exit);
- kills the child's process group at the deadline, then every process the child left behind (its
  session, anything carrying this worker's or this sample's marker, and when `kill_uid` is set every
  other process of this user), hashes the copy after the run, puts it back (or deletes it) and deletes
  everything the child left in the shared temporary folders;
- answers with exit code, timeout, capped stdout / stderr, the reporter's raw lines and the hashes.
The verdict is decided by coderun on the host, from this evidence, by the same function as always.
"""

from __future__ import annotations

import ast
import atexit
import bisect
import contextlib
import gc
import hashlib
import importlib
import inspect
import json
import linecache
import os
import re
import resource
import select
import shutil
import signal
import stat
import sys
import tempfile
import threading
import time
import tokenize
import warnings
from collections.abc import Callable

import pytest

_SKIP_DIRS = ("__pycache__", ".git", ".pytest_cache", ".mypy_cache")
_REPORTER = "coderun_reporter"  # coderun.runner.execute.REPORTER_MODULE
_REPORT_LIMIT = 64 << 20
_PF_EXITING = 0x4  # include/linux/sched.h: the task is exiting


def _hashes(root: str, known: dict[str, tuple[bytes, str]] | None = None) -> dict[str, str]:
    """sha256 of every file under root, by the rules of coderun.runner.execute._HASH_SCRIPT (an os.walk:
    symlinks to folders are neither listed nor followed). A file whose bytes equal its `known` content
    gets the known hash without hashing; comparing is cheaper, and so is scandir's cached file type."""
    out: dict[str, str] = {}
    known = known or {}
    todo = [("", root)]
    while todo:
        prefix, folder = todo.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            rel = prefix + entry.name
            try:
                if entry.is_dir():
                    if entry.name not in _SKIP_DIRS and not entry.is_symlink():
                        todo.append((rel + os.sep, entry.path))
                elif entry.name.endswith((".pyc", ".pyo")):
                    continue
                elif entry.is_symlink():
                    out[rel] = "link:" + os.readlink(entry.path)
                else:
                    out[rel] = _file_hash(entry.path, known.get(rel))
            except OSError as e:
                out[rel] = "unreadable:" + type(e).__name__
    return out


def _file_hash(path: str, known: tuple[bytes, str] | None) -> str:
    h = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY)
    try:
        if known is not None:
            head = os.read(fd, len(known[0]) + 1)
            if head == known[0]:
                return known[1]
            h.update(head)
        for chunk in iter(lambda: os.read(fd, 1 << 20), b""):
            h.update(chunk)
    finally:
        os.close(fd)
    return h.hexdigest()


def _status_code(status: int) -> int:
    """os.waitstatus_to_exitcode, which the worker cannot use: it runs in the project's Python, 3.7 and 3.8 too."""
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


class _Capped:
    """Head and rolling tail of a stream, at most `limit` bytes kept."""

    def __init__(self, limit: int):
        self.half, self.head, self.tail, self.total = max(limit // 2, 1), bytearray(), bytearray(), 0

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
        head, tail = bytes(self.head).decode("utf-8", "replace"), bytes(self.tail).decode("utf-8", "replace")
        if not self.truncated:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", "replace")
        return f"{head}\n... [{self.total - len(self.head) - len(self.tail)} bytes cut by coderun] ...\n{tail}"


def _set_dumpable(flag: int) -> None:
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, flag, 0, 0, 0)  # PR_SET_DUMPABLE


def _rmtree(path: str) -> None:
    def fix(func, p, _exc):
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(p), stat.S_IRWXU)
            os.chmod(p, stat.S_IRWXU)
        with contextlib.suppress(OSError):
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p, ignore_errors=True)
            else:
                os.unlink(p)

    if os.path.lexists(path):
        shutil.rmtree(path, onerror=fix)


class Worker:
    def __init__(self, cfg: dict):
        self.cfg = cfg
        self.source = cfg["source"]
        self.scratch = cfg["scratch"]
        self.marker = cfg["marker"]               # NAME=VALUE in this worker's own environment
        self.base_path = [p for p in sys.path[1:]]  # sys.path without this script's folder
        self.bytecode: dict[str, bytes] = {}      # relative .pyc path -> content, from priming runs
        self.primed: set[str] = set()             # test files whose collection was primed
        self.leftovers: list[tuple[str, dict]] = []  # a finished sample's folder and request, to clean
        self.snapshot: _Snapshot | None = None    # the pristine tree in memory (None: too big)
        self.known: dict[str, tuple[bytes, str]] = {}  # relative path -> pristine bytes and sha256
        self.template: _Template | None = None    # (worker) the paused copy of the current task
        self.untemplated: set[str] = set()        # (worker) task keys a template refused
        self.paused = False                       # (template) True: a child goes back into pytest
        self.spare: set[int] = set()              # (template) never swept: the worker
        self.statements: _Statements | None = _Statements()  # pytest's statement ranges, per file text
        self.outputs: list[tuple[str, str]] = []  # a finished sample's stdout and folder, to learn frames from
        self.folder: _Folder | None = None        # the sample folder, when pristine and kept for the next
        self.installed = tuple(os.path.join(p, "") for p in self.base_path if os.path.isabs(p))
        os.makedirs(self.scratch, mode=0o700, exist_ok=True)
        self.proto_in = os.fdopen(os.dup(0), "rb")
        self.proto_out = os.dup(1)
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.close(null)

    def send(self, msg: dict) -> None:
        data = (json.dumps(msg) + "\n").encode("utf-8", "replace")
        view = memoryview(data)
        while view:
            view = view[os.write(self.proto_out, view):]

    def serve(self) -> None:
        _set_dumpable(0)
        self.warm_up()
        if not self.statements.install():
            self.statements = None
        self.snapshot = _Snapshot.take(self.source)
        pristine = _hashes(self.source)
        if self.snapshot is not None:
            self.known = {rel: (data, pristine[rel]) for rel, data, *_ in self.snapshot.files if rel in pristine}
        self.send({"kind": "hello", "pid": os.getpid(), "uid": os.getuid(), "python": sys.version.split()[0],
                   "pytest": pytest.__version__, "pristine": pristine})
        try:
            self.answer_all(delegate=True)
        finally:
            self.stop_template()

    def answer_all(self, delegate: bool) -> None:
        """Answer every request on the protocol channel (the template's, too: its channel is the worker)."""
        for line in self.proto_in:
            req = json.loads(line)
            try:
                answer = self.delegate(req) if delegate else None
                if answer is None:
                    self.send(self.run(req))
                else:
                    self.send_raw(answer)
            except _Resume:  # a sample's child of the template: its folder is not to be cleaned
                self.leftovers.clear()
                raise
            except Exception as e:  # the worker's own failure: coderun falls back to the naive path
                self.send({"kind": "error", "id": req.get("id"), "error": f"{type(e).__name__}: {e}"})
            finally:  # after the answer: coderun grades while the folder is put back
                while self.leftovers:
                    self.finish(*self.leftovers.pop())
                while self.outputs:
                    self.learn(*self.outputs.pop())

    def send_raw(self, line: bytes) -> None:
        view = memoryview(line)
        while view:
            view = view[os.write(self.proto_out, view):]

    # -- templates: pytest configured once per task ---------------------------------------------

    def delegate(self, req: dict) -> bytes | None:
        """The answer line of this task's template, started when needed; None: run the sample here.
        Priming (new test files) happens here first: it forks, and the sweep after it would end a
        template, so the template is stopped first and started afterwards."""
        key = _template_key(req)
        if not req.get("template", True):  # a one-off run (task verification): no template to set up
            self.stop_template()
            return None
        if self.template is not None and (self.template.key != key or self.unprimed(req)):
            self.stop_template()
        req["prime_s"] = self.prime(req)
        if self.template is None and key not in self.untemplated:
            self.template = self.start_template(req, key)
        if self.template is None:
            return None
        line = self.template.ask(req)
        if line is None:  # the template died: this sample, and the task's next ones, run here
            self.stop_template()
            self.untemplated.add(key)
        return line

    def unprimed(self, req: dict) -> bool:
        return any(n.split("::", 1)[0] not in self.primed for n in req["nodeids"])

    def start_template(self, req: dict, key: str) -> _Template | None:
        self.folder = None  # the template uses the sample folder from now on
        to_r, to_w = os.pipe()
        back_r, back_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(to_w)
            os.close(back_r)
            _run_then_exit(lambda: self.become_template(req, to_r, back_w))
        os.close(to_r)
        os.close(back_w)
        template = _Template(key, pid, to_w, back_r)
        ready = template.first_line(float(req["timeout"]))
        if ready.get("ready"):
            return template
        template.stop()
        self.untemplated.add(key)
        return None

    def stop_template(self) -> None:
        if self.template is not None:
            self.template.stop()
            self.template = None

    def become_template(self, req: dict, cmd_fd: int, answer_fd: int) -> int:
        """In the forked copy: configure pytest for this task in a pristine copy, as a child would, and
        pause when pytest is about to load the project's conftest files (see _Pause). Returns only in a
        sample's child, with pytest's exit code; the template itself ends inside the pause."""
        self.proto_in, self.proto_out = os.fdopen(cmd_fd, "rb"), answer_fd
        self.spare, self.paused = {os.getppid()}, True
        gc.freeze()  # see _isolate
        base, project = self.pristine_folder()
        output = _ConfigOutput()
        os.chdir(project)
        _enter_project(self, req, base, project, _child_env(self, req, base, project))
        pause = _Pause(self, set(sys.modules), _project_packages(_import_root(self, project)), output)
        code = _call_pytest(req["args"], [pause])
        if not pause.resumed:  # pytest ended before the pause: the task runs without a template
            output.collect()
            self.send({"ready": False, "why": f"pytest ended before loading conftest files (exit {code})"})
            return 0
        return _shutdown(code)

    def serve_template(self) -> None:
        """The template's loop: returns in nothing but a sample's child, by raising _Resume."""
        self.send({"ready": True})
        self.answer_all(delegate=False)
        os._exit(0)

    def warm_up(self) -> None:
        """Run two failing tests once, so that what pytest loads and compiles lazily to collect, run and
        report a failure (modules, the tokenizer's regular expressions) is there before the first fork.
        Never with coderun's reporter, which reads its channel when imported."""
        folder = tempfile.mkdtemp(prefix="warm-", dir=self.scratch)
        cwd, path, argv = os.getcwd(), list(sys.path), list(sys.argv)
        try:
            with open(os.path.join(folder, f"{_WARM_MODULE}.py"), "w") as f:
                f.write(_WARM_TEST)
            os.chdir(folder)
            with contextlib.suppress(BaseException):
                pytest.main(["-q", "-p", "no:cacheprovider", "-o", "addopts=", folder])
        finally:
            os.chdir(cwd)
            sys.path[:], sys.argv = path, argv
            sys.modules.pop(_WARM_MODULE, None)
            _rmtree(folder)
        _map_modules()

    # -- one sample --------------------------------------------------------------------------

    def run(self, req: dict) -> dict:
        timing = {"prime": req.pop("prime_s", 0.0) + self.prime(req)}
        t0 = time.monotonic()
        base, project = self.sample_folder()
        try:
            self.write_sample(project, req["relfile"], req["source"])
            req["cgroup"] = self.new_cgroup(req["token"])
            t1 = time.monotonic()
            answer = self.fork_and_wait(req, base, project)
            t2 = time.monotonic()
            answer["after"] = req["after"] = _hashes(project, self.known)
            answer["timing"] = {**timing, "copy": t1 - t0, "child": t2 - t1, "hash": time.monotonic() - t2}
            answer["template"] = self.paused
            self.outputs.append((answer["stdout"], project))
            return answer
        finally:
            self.leftovers.append((base, req))

    def prime(self, req: dict) -> float:
        """Collect this request's new test files in a pristine copy with bytecode writing on; keep the
        .pyc files written and import what the collection imported from outside the project. A failed
        priming only means that those files get compiled, and those modules imported, by every sample."""
        files = [f for f in dict.fromkeys(n.split("::", 1)[0] for n in req["nodeids"]) if f not in self.primed]
        if not files:
            return 0.0
        t0 = time.monotonic()
        self.primed.update(files)
        base, project = self.pristine_folder()
        job = {**req, "token": "prime-" + req["token"], "cgroup": None, "prime": True,
               "args": [*req["args"], "--collect-only"]}
        try:
            job["cgroup"] = self.new_cgroup(job["token"])
            answer = self.fork_and_wait(job, base, project)
            if answer["returncode"] == 0 and not answer["timed_out"]:
                self.bytecode.update(_pycs(project))
                for f in files if self.statements else ():
                    self.statements.remember(os.path.join(self.source, f))
                found = [json.loads(x) for x in answer["report"].splitlines() if x.startswith('{"prime"')]
                if found:
                    self.preimport(found[-1]["prime"], found[-1]["rewrite"], req, base, project)
                    _map_module_files(found[-1].get("files"))
        finally:
            self.finish(base, job)
        return time.monotonic() - t0

    def preimport(self, names: list[str], rewrite: list[str], req: dict, base: str, project: str) -> None:
        """Import `names` here, as the child would: same environment, folder and sys.path."""
        root = _import_root(self, project)
        skip = _project_packages(root) | {n.split(".", 1)[0] for n in rewrite} | {"conftest", "__main__"}
        todo = [n for n in names if n not in sys.modules and n.split(".", 1)[0] not in skip]
        if not todo:
            return
        before, threads = set(sys.modules), threading.active_count()
        saved = (dict(os.environ), os.getcwd(), list(sys.path))
        try:
            os.environ.clear()
            os.environ.update(_child_env(self, req, base, project))
            os.chdir(project)
            sys.path[:] = [project, self.cfg["harness"], root, *self.base_path]
            with warnings.catch_warnings():  # pytest undoes an import's filters after collection, too
                for name in todo:
                    with contextlib.suppress(BaseException):
                        importlib.import_module(name)
        finally:
            os.environ.clear()
            os.environ.update(saved[0])
            os.chdir(saved[1])
            sys.path[:] = saved[2]
            _forget_folder(base)
        added = set(sys.modules) - before
        if threading.active_count() != threads or any(m.split(".", 1)[0] in skip for m in added):
            for m in added:
                sys.modules.pop(m, None)
        _map_modules()

    def learn(self, stdout: str, project: str) -> None:
        """Keep the statement starts of the files in a sample's tracebacks, for the next samples (the
        template's children, or the worker's and the templates it starts later)."""
        if self.statements is not None:
            self.statements.learn(stdout, project, self.source, self.installed)

    def pristine_folder(self) -> tuple[str, str]:
        """The sample's folder, emptied, with the pristine tree and all the kept bytecode in it."""
        self.folder = None
        base, project = self.fresh_folder()
        self.copy_pristine(project)
        return base, project

    def sample_folder(self) -> tuple[str, str]:
        """The pristine folder: as the last sample's finish() put it back (see _Folder), else a new copy."""
        if self.folder is not None:
            return self.folder.base, os.path.join(self.folder.base, "project")
        base, project = self.pristine_folder()
        if self.snapshot is not None:
            files = {os.path.join("project", rel): data for rel, data, *_ in self.snapshot.files}
            files.update((os.path.join("project", rel), data) for rel, data in self.bytecode.items())
            links = {os.path.join("project", rel): target for rel, target in self.snapshot.links}
            self.folder = _Folder(base, files, links)
        return base, project

    def fresh_folder(self) -> tuple[str, str]:
        """The sample's folder: always the same path, emptied (see the module docstring)."""
        base = os.path.join(self.scratch, "s")
        _rmtree(base)
        os.mkdir(base, 0o700)
        for d in ("home", "tmp"):
            os.mkdir(os.path.join(base, d))
        return base, os.path.join(base, "project")

    def copy_pristine(self, project: str) -> None:
        """The pristine tree, plus the kept bytecode."""
        if self.snapshot is not None:
            self.snapshot.write(project)
        else:
            shutil.copytree(self.source, project, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        for rel, data in self.bytecode.items():
            path = os.path.join(project, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)

    def write_sample(self, project: str, relfile: str, source: str) -> None:
        """Put the spliced file in a pristine copy, and take out its kept bytecode (of the original)."""
        for rel in self.bytecode:
            if _pyc_source(rel) == relfile:
                _unlink(os.path.join(project, rel))
        with open(os.path.join(project, relfile), "wb") as f:
            f.write(source.encode("utf-8"))

    def finish(self, base: str, req: dict) -> None:
        """Clean up after a sample (its processes are gone, or for the child itself, on their way out)."""
        if req.get("reap"):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(req["reap"], 0)
        self.remove_cgroup(req.get("cgroup"))
        if self.folder is None or "after" not in req or not self.folder.restore(req["after"], self.known):
            self.folder = None
            _rmtree(base)
        self.clean_shared()

    def new_cgroup(self, token: str) -> str | None:
        """A pids cgroup for the child (local backend as root): a process limit and a complete kill list."""
        root = self.cfg.get("cgroup_root")
        if not root:
            return None
        path = os.path.join(root, f"coderun-w-{token[:16]}")
        os.mkdir(path)
        with open(os.path.join(path, "pids.max"), "w") as f:
            f.write(str(self.cfg.get("pids") or 256))
        return path

    def remove_cgroup(self, path: str | None) -> None:
        for _ in range(100) if path else ():
            for p in _cgroup_pids(path):
                with contextlib.suppress(OSError):
                    os.kill(p, signal.SIGKILL)
            try:
                os.rmdir(path)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.02)

    def fork_and_wait(self, req: dict, base: str, project: str) -> dict:
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        rep_r, rep_w = os.pipe()
        end_r, end_w = os.pipe()
        started = time.monotonic()
        pid = os.fork()
        if pid == 0:
            for fd in (out_r, err_r, rep_r, end_r):
                os.close(fd)
            _Exit.fd = end_w
            if self.paused:
                _resume_child(self, req, base, project, out_w, err_w, rep_w)  # raises _Resume
            _child(self, req, base, project, out_w, err_w, rep_w)  # never returns
        for fd in (out_w, err_w, rep_w, end_w):
            os.close(fd)
        limit = int(req.get("output_limit") or (1 << 20))
        bufs = {out_r: _Capped(limit), err_r: _Capped(limit), rep_r: _Capped(_REPORT_LIMIT), end_r: _Capped(16)}
        code, timed_out = self.collect(pid, bufs, started + float(req["timeout"]), req, end_r)
        return {"kind": "result", "id": req["id"], "returncode": code, "timed_out": timed_out,
                "duration": time.monotonic() - started, "stdout": bufs[out_r].text(),
                "stderr": bufs[err_r].text(), "truncated": bufs[out_r].truncated or bufs[err_r].truncated,
                "report": bufs[rep_r].text(), "report_truncated": bufs[rep_r].truncated}

    def collect(self, pid: int, bufs: dict, deadline: float, req: dict, end_r: int) -> tuple[int, bool]:
        """Read the child's pipes until EOF; kill it at the deadline, and its leftovers once it exited.
        Returns the child's exit code (-9 when killed) and whether it ran out of time."""
        status, timed_out, swept = None, False, False
        open_fds = set(bufs)
        while open_fds:
            if status is None:
                done, st = os.waitpid(pid, os.WNOHANG)
                if done:
                    status = st
            now = time.monotonic()
            if not swept and (status is not None or now >= deadline):
                timed_out = status is None
                self.sweep(pid, req)
                swept = True
            wait = 0.1 if swept else max(0.0, min(deadline - now, 0.05))
            ready, _, _ = select.select(list(open_fds), [], [], wait)
            for fd in ready:
                chunk = os.read(fd, 65536)
                if chunk:
                    bufs[fd].feed(chunk)
                else:
                    open_fds.discard(fd)
                    os.close(fd)
        code = _exit_note(pid, bufs[end_r].text()) if status is None else None
        if code is not None:  # reaped in finish(), after the answer
            req["reap"] = pid
        elif status is None:
            _, status = os.waitpid(pid, 0)
        self.sweep(pid, req)
        if code is None:
            code = _status_code(status) if status is not None else -9
        return code, timed_out

    def sweep(self, pid: int, req: dict) -> None:
        """SIGKILL the child's group and every process it left (see the module docstring), then wait
        (up to 3 s) until they are reaped too: a zombie still counts against the sandbox's process
        limit, and the next sample could not start a thread."""
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
        needles = (self.marker.encode(), f"CODERUN_SAMPLE={req['token']}".encode())
        skip = {os.getpid(), req.get("reap"), *self.spare}
        for _ in range(150):
            found = [(p, self.belongs(p, pid, needles)) for p in self.processes() if p not in skip]
            victims = [p for p, state in found if state == "alive"] + _cgroup_pids(req.get("cgroup"))
            if not victims and "zombie" not in {state for _, state in found}:
                break
            for p in victims:
                with contextlib.suppress(OSError):
                    os.kill(p, signal.SIGKILL)
            time.sleep(0.02)

    @staticmethod
    def processes() -> list[int]:
        return [int(e) for e in os.listdir("/proc") if e.isdigit()]

    def belongs(self, p: int, sid: int, needles: tuple[bytes, ...]) -> str | None:
        """"alive" or "zombie" for a process the sample left, else None."""
        try:
            with open(f"/proc/{p}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            state = "zombie" if fields[0] in (b"Z", b"X") else "alive"
            if int(fields[3]) == sid:
                return state
            if self.cfg.get("kill_uid") and os.stat(f"/proc/{p}").st_uid == os.getuid():
                return state
            if state == "zombie":  # its environment can no longer be read
                return None
            with open(f"/proc/{p}/environ", "rb") as f:
                env = f.read().split(b"\0")
            return state if any(n in env for n in needles) else None
        except (OSError, IndexError, ValueError):
            return None

    def clean_shared(self) -> None:
        """Remove what a child left in shared temporary folders (docker: /tmp, /dev/shm, /scratch)."""
        keep = set(self.cfg.get("keep") or ()) | {self.scratch}
        for top in self.cfg.get("clean") or ():
            with contextlib.suppress(OSError):
                for name in os.listdir(top):
                    p = os.path.join(top, name)
                    if p not in keep:
                        _rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else _unlink(p)


class _Snapshot:
    """The pristine tree (without .git) held in the worker's memory: writing a copy from it is about
    twice as fast as shutil.copytree, which reads every file and copies its metadata one call at a time.
    The copy is the same: contents, modes, access and modification times, symlinks."""

    LIMIT = 256 << 20

    def __init__(self) -> None:
        self.dirs: list[tuple[str, int, int, int]] = []          # rel, mode, atime_ns, mtime_ns
        self.files: list[tuple[str, bytes, int, int, int]] = []  # rel, data, mode, atime_ns, mtime_ns
        self.links: list[tuple[str, str]] = []
        self.umask = os.umask(0)
        os.umask(self.umask)

    @classmethod
    def take(cls, root: str) -> _Snapshot | None:
        """None when the tree is over LIMIT bytes or holds something else than files, folders, links."""
        snap, size = cls(), 0
        st = os.stat(root)
        snap.dirs.append(("", st.st_mode, st.st_atime_ns, st.st_mtime_ns))
        for d, dirs, files in os.walk(root):
            dirs[:] = [x for x in dirs if x != ".git"]
            for name in [*dirs, *files]:
                if name == ".git":
                    continue
                path = os.path.join(d, name)
                rel = os.path.relpath(path, root)
                st = os.lstat(path)
                if stat.S_ISLNK(st.st_mode):
                    snap.links.append((rel, os.readlink(path)))
                elif stat.S_ISDIR(st.st_mode):
                    snap.dirs.append((rel, st.st_mode, st.st_atime_ns, st.st_mtime_ns))
                elif stat.S_ISREG(st.st_mode):
                    size += st.st_size
                    if size > cls.LIMIT:
                        return None
                    with open(path, "rb") as f:
                        snap.files.append((rel, f.read(), st.st_mode, st.st_atime_ns, st.st_mtime_ns))
                else:
                    return None
        return snap

    def write(self, dest: str) -> None:
        for rel, *_ in self.dirs:
            os.mkdir(os.path.join(dest, rel), 0o700)
        for rel, data, mode, atime, mtime in self.files:
            _write_file(os.path.join(dest, rel), data, mode, atime, mtime, self.umask)
        for rel, target in self.links:
            os.symlink(target, os.path.join(dest, rel))
        for rel, mode, atime, mtime in reversed(self.dirs):  # last: writing inside changes a folder's times
            path = os.path.join(dest, rel)
            os.chmod(path, stat.S_IMODE(mode))
            os.utime(path, ns=(atime, mtime))


def _write_file(path: str, data: bytes, mode: int, atime_ns: int, mtime_ns: int, umask: int) -> None:
    """Create `path` (it must not exist) with these bytes, permission bits and times."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, stat.S_IMODE(mode))
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if stat.S_IMODE(mode) & umask:
            os.fchmod(fd, stat.S_IMODE(mode))
        os.utime(fd, ns=(atime_ns, mtime_ns))
    finally:
        os.close(fd)


class _Folder:
    """The record that lets the next sample use the sample folder as the last one left it, instead of a
    new copy: made after a fresh copy, it holds the lstat of every entry under the folder. After a
    sample, an entry is intact when its type, mode, owner, size, modification and change times, inode
    and link count are as recorded and, for a file, its bytes are the pristine ones (the after-run hashes
    say so for the project's files; the others are compared). restore() removes what the record does not
    hold and writes back everything else from memory; it answers False (the folder is then removed and
    the next sample gets a new copy) when it cannot."""

    def __init__(self, base: str, files: dict[str, bytes], links: dict[str, str]):
        self.base, self.files, self.links = base, files, links   # paths relative to base
        self.stats: dict[str, os.stat_result] = dict(self.scan(lambda rel: True))

    def scan(self, descend: Callable[[str], bool]):
        """(relative path, lstat) of the folder and everything under it, descending into the folders
        `descend` accepts."""
        yield "", os.lstat(self.base)
        todo = [""]
        while todo:
            folder = todo.pop()
            with os.scandir(os.path.join(self.base, folder)) as entries:
                found = [(os.path.join(folder, e.name), e.stat(follow_symlinks=False)) for e in entries]
            for rel, st in found:
                yield rel, st
                if stat.S_ISDIR(st.st_mode) and descend(rel):
                    todo.append(rel)

    @staticmethod
    def key(st: os.stat_result) -> tuple:
        return (st.st_mode, st.st_uid, st.st_gid, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino,
                st.st_nlink)

    def restore(self, after: dict[str, str], known: dict[str, tuple[bytes, str]]) -> bool:
        try:
            extra, bad = self.damage(after, known)
            for rel in extra:
                self.remove(rel)
            for rel in sorted(bad, key=lambda r: r.count(os.sep)):  # folders before what they hold
                self.put_back(rel)
            self.settle()
            return True
        except Exception:  # noqa: BLE001  (anything unexpected: a new copy)
            return False

    def damage(self, after: dict[str, str], known: dict[str, tuple[bytes, str]]) -> tuple[list[str], list[str]]:
        """(entries the record does not hold, recorded entries to write back)."""
        if not stat.S_ISDIR(os.lstat(self.base).st_mode):  # never read through a link put in its place
            raise OSError("the sample folder is not a folder any more")
        extra, bad, seen = [], [], set()
        recorded = self.stats
        for rel, st in self.scan(lambda rel: rel in recorded and stat.S_ISDIR(recorded[rel].st_mode)):
            seen.add(rel)
            if rel not in recorded:
                extra.append(rel)
            elif self.key(st) != self.key(recorded[rel]) or not self.intact(rel, st, after, known):
                bad.append(rel)
        return extra, bad + [rel for rel in recorded if rel not in seen]

    def intact(self, rel: str, st: os.stat_result, after: dict, known: dict) -> bool:
        if not stat.S_ISREG(st.st_mode):
            return True
        inside = rel[len("project" + os.sep):] if rel.startswith("project" + os.sep) else None
        if inside is not None and inside in after and inside in known:
            return after[inside] == known[inside][1]
        data = self.files[rel]
        with open(os.path.join(self.base, rel), "rb") as f:
            return f.read(len(data) + 1) == data

    def remove(self, rel: str) -> None:
        path = os.path.join(self.base, rel)
        if os.path.isdir(path) and not os.path.islink(path):
            _rmtree(path)
        elif os.path.lexists(path):
            os.unlink(path)

    def put_back(self, rel: str) -> None:
        want, path = self.stats[rel], os.path.join(self.base, rel)
        if stat.S_ISDIR(want.st_mode):
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                st = None
            if st is None or not stat.S_ISDIR(st.st_mode):
                if st is not None:
                    os.unlink(path)
                os.mkdir(path, 0o700)
            elif (st.st_uid, st.st_gid) != (want.st_uid, want.st_gid):
                raise OSError(f"{rel}: owner changed")
            os.chmod(path, stat.S_IMODE(want.st_mode))
            return  # times: settle()
        self.remove(rel)
        if stat.S_ISLNK(want.st_mode):
            os.symlink(self.links[rel], path)
        else:  # umask -1: the mode is always set, whatever the umask
            _write_file(path, self.files[rel], want.st_mode, want.st_atime_ns, want.st_mtime_ns, -1)
        self.stats[rel] = os.lstat(path)

    def settle(self) -> None:
        """Folder modes and times as recorded (deepest first: writing in a folder changes its times),
        and the record of every folder updated (their change times moved)."""
        folders = sorted((r for r, st in self.stats.items() if stat.S_ISDIR(st.st_mode)),
                         key=lambda r: -r.count(os.sep) if r else 1)
        for rel in folders:
            want, path = self.stats[rel], os.path.join(self.base, rel)
            st = os.lstat(path)
            if (st.st_mode, st.st_mtime_ns) != (want.st_mode, want.st_mtime_ns):
                os.chmod(path, stat.S_IMODE(want.st_mode))
                os.utime(path, ns=(want.st_atime_ns, want.st_mtime_ns))
        for rel in folders:
            self.stats[rel] = os.lstat(os.path.join(self.base, rel))


class _Statements:
    """Where the statements of a file start, kept per file text, for pytest's short tracebacks.

    To print a frame, pytest parses the frame's whole file and walks every node of it to find the
    statement around the line (_pytest._code.source: getstatementrange_ast, get_statement_startend2),
    for every frame of every failure: a median 10 ms of a failing sample. The answer depends only on the
    file's text. The worker keeps, per text, the sorted statement starts of the task's test files and of
    the files its children's tracebacks showed, and hands pytest a stand-in for the parsed tree, which
    the replacement of get_statement_startend2 looks up. A text it does not know is parsed as pytest
    would. The replacement is installed only when pytest's own function agrees with it on every line of
    a probe module; otherwise pytest runs unchanged.
    """

    MAX_FILES = 1000
    MAX_BYTES = 2 << 20
    FRAME = re.compile(r"^([^\s:][^:\n]*\.py):\d+: ", re.MULTILINE)

    def __init__(self) -> None:
        self.stand_ins: dict[bytes, ast.AST] = {}                # digest of a file text -> stand-in tree
        self.starts: dict[int, tuple[ast.AST, list[int]]] = {}   # id(tree) -> (tree, statement starts)
        self.tried: set[str] = set()                             # paths read (or refused) already
        self.before_first: tuple[int, int | None] | None = None   # pytest >= 9.1's answer above the first start

    def install(self) -> bool:
        try:
            import _pytest._code.code as code
            import _pytest._code.source as source

            original = source.getstatementrange_ast
            if code.getstatementrange_ast is not original or not self.agrees(source.get_statement_startend2):
                return False
        except Exception:  # noqa: BLE001  (another pytest: it runs unchanged)
            return False

        def getstatementrange_ast(lineno, src, assertion=False, astnode=None):
            if astnode is None:
                astnode = self.tree(str(src))
            return original(lineno, src, assertion, astnode)

        source.getstatementrange_ast = code.getstatementrange_ast = getstatementrange_ast
        source.get_statement_startend2 = self.startend
        return True

    def agrees(self, original: Callable) -> bool:
        tree = ast.parse(_PROBE, "source", "exec")
        # Above the first statement, pytest before 9.1 wraps round to the last start; later ones say (0, None).
        self.before_first = (0, None) if original(-1, tree) == (0, None) else None
        for lineno in range(-1, _PROBE.count("\n") + 2):
            if original(lineno, tree) != self.startend(lineno, tree):
                return False
        return True

    def tree(self, text: str) -> ast.AST:
        """The stand-in for `text`'s tree; parses as pytest does (SyntaxError included) when unknown."""
        key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        node = self.stand_ins.get(key)
        if node is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                parsed = ast.parse(text, "source", "exec")
            node = ast.Module(body=[], type_ignores=[])
            self.starts[id(node)] = (node, _statement_starts(parsed))
            self.stand_ins[key] = node
        return node

    def startend(self, lineno: int, node: ast.AST) -> tuple[int, int | None]:
        """get_statement_startend2: the statement start at or before `lineno`, and the next one."""
        kept = self.starts.get(id(node))
        if kept is None or kept[0] is not node:  # a tree pytest parsed itself
            kept = self.starts[id(node)] = (node, _statement_starts(node))
        values = kept[1]
        i = bisect.bisect_right(values, lineno)
        if i == 0 and self.before_first is not None:
            return self.before_first
        return values[i - 1], (values[i] if i < len(values) else None)

    def remember(self, path: str) -> None:
        """Keep `path`'s statement starts, under the text pytest makes of it (lines, right-stripped)."""
        if path in self.tried or len(self.tried) >= self.MAX_FILES:
            return
        self.tried.add(path)
        with contextlib.suppress(Exception):
            st = os.stat(path)
            if stat.S_ISREG(st.st_mode) and st.st_size <= self.MAX_BYTES:
                with tokenize.open(path) as f:
                    self.tree("\n".join(line.rstrip() for line in f.readlines()))

    def learn(self, output: str, project: str, pristine: str, installed: tuple[str, ...]) -> None:
        """Remember the files of the frames a traceback in `output` showed: the project's (read from the
        pristine tree, never from a sample's copy) and installed modules'."""
        for path in dict.fromkeys(m.group(1) for m in self.FRAME.finditer(output, 0, 1 << 20)):
            full = os.path.normpath(os.path.join(project, path))
            if full.startswith(project + os.sep):
                self.remember(os.path.join(pristine, os.path.relpath(full, project)))
            elif full.startswith(installed):
                self.remember(full)


def _statement_starts(tree: ast.AST) -> list[int]:
    """The sorted lines (0-based) where pytest considers a statement to start (get_statement_startend2):
    every statement and except clause, a definition's decorators, and the line before a finally/else."""
    values: list[int] = []
    todo = [tree]
    while todo:  # statements nest in statement lists only: expressions need no visit
        x = todo.pop()
        for _name, field in ast.iter_fields(x):
            if isinstance(field, list) and field and isinstance(field[0], _BLOCKS):
                todo.extend(field)
        if isinstance(x, (ast.stmt, ast.ExceptHandler)):
            if isinstance(x, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                values.extend(d.lineno - 1 for d in x.decorator_list)
            values.append(x.lineno - 1)
            for name in ("finalbody", "orelse"):
                val = getattr(x, name, None)
                if val:
                    values.append(val[0].lineno - 2)
    values.sort()
    return values


_BLOCKS = (ast.stmt, ast.ExceptHandler, *((ast.match_case,) if hasattr(ast, "match_case") else ()))


_WARM_MODULE = "test_coderun_warm_up"
_WARM_TEST = """\
def nested(value):
    return {"key": value}[
        "missing"]


def test_compare():
    assert [1, "two", {"three": 3}] == [1, "two", {"three": 4}]


def test_raises():
    nested('''a
    b''' + \"\"\"c\"\"\" + 'd\\
e' + "f\\
g")
"""


# Every kind of statement, clause and decorator layout get_statement_startend2 treats apart.
_PROBE = """\
import os


@decorator
@other(1,
       2)
class A(B):
    x = 1

    @property
    def f(self):
        try:
            pass
        except ValueError as e:
            raise
        except Exception:
            pass
        else:
            return 1
        finally:
            del x
        for i in y:
            continue
        else:
            pass
        while z:
            break
        else:
            pass
        if a:
            pass
        elif b:
            pass
        else:
            pass
        with c as d, e:
            assert x, (
                "message")

    async def g(self):
        async with x:
            await y
        async for i in z:
            yield i
        else:
            pass
        return [i for i in range(3)
                if i]


def h(*a, **k):
    global q
    lambda: 1
    x = {
        1: 2,
    }
    return x
"""


class _Resume(BaseException):
    """Raised in a sample's child of a template, up to the pause, where pytest goes on for that sample."""


class _Template:
    """The worker's side of a template: its pid and the two pipes (requests in, answer lines out)."""

    def __init__(self, key: str, pid: int, to_fd: int, from_fd: int):
        self.key, self.pid, self.to_fd = key, pid, to_fd
        self.reader = os.fdopen(from_fd, "rb")

    def first_line(self, timeout: float) -> dict:
        """The template's word on whether it paused ({"ready": true}); {} when it did not say in time."""
        if not select.select([self.reader], [], [], timeout)[0]:
            return {}
        with contextlib.suppress(ValueError):
            return json.loads(self.reader.readline() or b"{}")
        return {}

    def ask(self, req: dict) -> bytes | None:
        """The template's answer line for `req`, as it wrote it; None when the template is gone."""
        view = memoryview((json.dumps(req) + "\n").encode("utf-8", "replace"))
        try:
            while view:
                view = view[os.write(self.to_fd, view):]
            line = self.reader.readline()
        except OSError:
            return None
        return line if line.endswith(b"\n") else None

    def stop(self) -> None:
        """Close its request pipe (it cleans up and exits at EOF), killing it if it does not in 10 s."""
        for close in (lambda: os.close(self.to_fd), self.reader.close):
            with contextlib.suppress(OSError):
                close()
        for _ in range(1000):
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(self.pid, os.WNOHANG)[0]:
                    return
                time.sleep(0.01)
                continue
            return
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)


class _ConfigOutput:
    """What pytest's configuration prints in a template (fds 1 and 2), printed again by each child."""

    FDS = (1, 2)

    def __init__(self) -> None:
        # the files outlive this method: they are read and closed in collect()
        self.files = [tempfile.TemporaryFile() for _ in self.FDS]  # noqa: SIM115
        self.saved = [os.dup(fd) for fd in self.FDS]
        for i, fd in enumerate(self.FDS):
            os.dup2(self.files[i].fileno(), fd)
        self.data: list[bytes] | None = None

    def collect(self) -> None:
        """Read what was printed and point fds 1 and 2 back where they were (once)."""
        if self.data is not None:
            return
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        self.data = []
        for i, fd in enumerate(self.FDS):
            self.files[i].seek(0)
            self.data.append(self.files[i].read())
            self.files[i].close()
            os.dup2(self.saved[i], fd)
            os.close(self.saved[i])

    def replay(self) -> None:
        for i, data in enumerate(self.data or ()):
            view = memoryview(data)
            while view:
                view = view[os.write(self.FDS[i], view):]


class _Pause:
    """The template's plugin: outermost wrapper of pytest_load_initial_conftests, the hook in which pytest
    loads the project's conftest files (and capturing starts). Everything before it depends only on the
    arguments, the environment and the pristine tree, so it is done once per task. The template pauses
    here and forks a child per sample, which goes on with pytest from this point in its own copy."""

    def __init__(self, worker: Worker, before: set[str], packages: set[str], output: _ConfigOutput):
        self.worker, self.before, self.packages, self.output = worker, before, packages, output
        self.resumed = False

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_load_initial_conftests(self, early_config, parser, args):
        why = self.refusal(early_config)
        self.output.collect()
        _map_modules()  # the plugins configuring pytest imported
        if why:
            self.worker.send({"ready": False, "why": why})
            os._exit(0)
        try:
            self.worker.serve_template()
        except _Resume:
            self.resumed = True
            self.output.replay()
        yield

    def refusal(self, config) -> str | None:
        """Why this configuration cannot be shared by the task's samples; None when it can."""
        if threading.active_count() > 1:
            return "a thread was started while pytest was configured"
        base = os.path.join(self.worker.scratch, "s") + os.sep
        project = [m for m in set(sys.modules) - self.before if m.split(".", 1)[0] in self.packages
                   or str(getattr(sys.modules[m], "__file__", None) or "").startswith(base)]
        if project:
            return f"configuring pytest imported modules of the project: {sorted(project)[:5]}"
        if not hasattr(sys.modules.get(_REPORTER), "_arm"):
            return f"{_REPORTER} was not loaded"
        for impl in config.hook.pytest_load_initial_conftests.get_hookimpls():
            wraps = getattr(impl, "hookwrapper", False) or getattr(impl, "wrapper", False)
            if impl.plugin is not self and wraps and impl.tryfirst:
                return f"plugin {impl.plugin_name} wraps pytest_load_initial_conftests first, too"
        return None


def _template_key(req: dict) -> str:
    """Samples with the same key share a template: same arguments, environment and spliced file."""
    return json.dumps([req["args"], req.get("env") or {}, req["relfile"]], sort_keys=True)


def _pycs(root: str) -> dict[str, bytes]:
    out = {}
    for d, _dirs, files in os.walk(root):
        if os.path.basename(d) == "__pycache__":
            for f in files:
                if f.endswith(".pyc"):
                    with open(os.path.join(d, f), "rb") as fh:
                        out[os.path.relpath(os.path.join(d, f), root)] = fh.read()
    return out


def _pyc_source(rel: str) -> str:
    """pkg/__pycache__/mod.cpython-39[-pytest-8.4.2].pyc -> pkg/mod.py"""
    folder = os.path.dirname(os.path.dirname(rel))
    return os.path.join(folder, os.path.basename(rel).split(".", 1)[0] + ".py")


def _cgroup_pids(path: str | None) -> list[int]:
    if not path:
        return []
    try:
        with open(os.path.join(path, "cgroup.procs")) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def _unlink(p: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(p)


def _child(w: Worker, req: dict, base: str, project: str, out_w: int, err_w: int, rep_w: int) -> None:
    def body() -> int:
        _isolate(w, req, project, out_w, err_w, rep_w)
        return _run_pytest(w, req, base, project, rep_w)

    _run_then_exit(body)


def _run_then_exit(body: Callable[[], int]) -> None:
    """A forked process: run `body` and leave with its code, never returning into the worker's loop."""
    code = 1
    try:
        code = body()
    except BaseException:  # noqa: BLE001  (printed, as the interpreter would)
        with contextlib.suppress(Exception):
            import traceback

            traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        _Exit.leave(code)


def _resume_child(w: Worker, req: dict, base: str, project: str, out_w: int, err_w: int, rep_w: int) -> None:
    """A template's child: isolated like any other, given this sample's environment and report channel,
    then sent back into the paused pytest."""
    try:
        _isolate(w, req, project, out_w, err_w, rep_w)
        os.environ.update(_sample_env(req, rep_w))
        tempfile.tempdir = None
        _forget_folder(os.path.dirname(project))
        sys.modules[_REPORTER]._arm()
    except BaseException:  # noqa: BLE001
        with contextlib.suppress(Exception):
            import traceback

            traceback.print_exc()
        os._exit(1)
    raise _Resume


def _isolate(w: Worker, req: dict, project: str, out_w: int, err_w: int, rep_w: int) -> None:
    """A new session with the sample's pipes, limits and folder; nothing else of the worker's open."""
    # The worker's objects move out of the collector's reach: pytest runs gc.collect() several times
    # per session, and walking the worker's whole heap (and copying its pages) is most of that. A
    # template froze the worker's objects before configuring pytest: what pytest made stays visible to
    # gc.get_objects(), as in a child that configured pytest itself.
    if not w.paused:
        gc.freeze()
    os.setsid()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out_w, 1)
    os.dup2(err_w, 2)
    _close_fds_except(rep_w, _Exit.fd)
    if req.get("cgroup"):
        with open(os.path.join(req["cgroup"], "cgroup.procs"), "w") as f:
            f.write("0")
    _set_dumpable(1)  # its own /proc/self/fd must stay openable (the report channel is /dev/fd/N)
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as f:
        f.write("1000")  # a memory bomb takes the child down first, not the worker beside it
    _limits(w.cfg, float(req["timeout"]))
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGALRM, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.chdir(project)


def _close_fds_except(*keep: int | None, low: int = 3) -> None:
    """Close every fd from `low` up but those in `keep`. The open ones are listed: closing all 65536
    possible numbers one by one (os.closerange before Python 3.10) costs 15 ms per sample."""
    try:
        fds = [int(fd) for fd in os.listdir("/proc/self/fd")]
    except OSError:
        fds = range(low, 65536)
    for fd in fds:
        if fd >= low and fd not in keep:
            with contextlib.suppress(OSError):
                os.close(fd)


class _Exit:
    """A child's way out. Tearing down a forked copy of the worker's memory takes the kernel about 7 ms,
    and the child's pipes only close at the end of it. So the child writes its exit code on a pipe of
    its own and closes every fd before it exits: the worker has the whole answer at once, and waits for
    the exit itself only after answering (see _exit_note for why that code can be taken)."""

    fd: int | None = None   # the write end of the child's exit pipe (set in the child)

    @classmethod
    def leave(cls, code: int) -> None:
        if cls.fd is not None:
            with contextlib.suppress(OSError):
                os.write(cls.fd, str(code & 0xFF).encode())
            _close_fds_except(low=0)
        os._exit(code)


def _exit_note(pid: int, said: str) -> int | None:
    """The exit code the child wrote, when it is certain to be on its way out: the kernel has marked
    every thread of it as exiting (PF_EXITING), so no code of the sample runs any more. A sample could
    write a code there itself, but no other than one it could exit with; one that then goes on running
    is not exiting, and is waited for (and killed at the deadline) as before. None: wait for it."""
    if not said.isdigit():
        return None
    for _ in range(3):  # the exit itself follows the last close by microseconds
        if _exiting(pid):
            return int(said) & 0xFF
        time.sleep(0.0005)
    return None


def _exiting(pid: int) -> bool:
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
        for tid in tasks:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            if fields[0] not in (b"Z", b"X") and not int(fields[6]) & _PF_EXITING:
                return False
    except (OSError, IndexError, ValueError):
        return False
    return bool(tasks)


def _limits(cfg: dict, timeout: float) -> None:
    lim = cfg.get("limits") or {}
    cpu = int(timeout) + 6
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    if lim.get("memory_mb"):
        resource.setrlimit(resource.RLIMIT_AS, (lim["memory_mb"] << 20,) * 2)
    if lim.get("file_size_mb"):
        resource.setrlimit(resource.RLIMIT_FSIZE, (lim["file_size_mb"] << 20,) * 2)
    if lim.get("nproc"):
        resource.setrlimit(resource.RLIMIT_NPROC, (lim["nproc"], lim["nproc"]))


def _project_packages(root: str) -> set[str]:
    names = set()
    for entry in os.listdir(root):
        if entry.endswith(".py"):
            names.add(entry[:-3])
        elif os.path.isfile(os.path.join(root, entry, "__init__.py")):
            names.add(entry)
    return names


def _forget_folder(base: str) -> None:
    """Drop what the import system and linecache remember of files under `base`: every sample's folder
    has the same path, and a directory listing cached for an earlier one must not be used."""
    for key in [k for k in sys.path_importer_cache if isinstance(k, str) and k.startswith(base)]:
        del sys.path_importer_cache[key]
    for key in [k for k in linecache.cache if not os.path.isabs(k) or k.startswith(base)]:
        del linecache.cache[key]


def _forget_project_modules(root: str) -> None:
    """The child must import the project from its copy. The worker's warm-up may have imported it already
    (a plugin such as pytest-django loads the project's settings module), from site-packages when the
    project is installed there; such modules would shadow the copy, so they are dropped."""
    names = _project_packages(root)
    for module in [m for m in sys.modules if m.split(".", 1)[0] in names]:
        del sys.modules[module]


def _import_root(w: Worker, project: str) -> str:
    return os.path.join(project, w.cfg["import_root"]) if w.cfg.get("import_root") else project


def _child_env(w: Worker, req: dict, base: str, project: str) -> dict[str, str]:
    env = dict(w.cfg.get("base_env") or {})
    env.update({"HOME": os.path.join(base, "home"), "TMPDIR": os.path.join(base, "tmp")})
    env.update(req.get("env") or {})
    env["PYTHONPATH"] = f"{w.cfg['harness']}:{_import_root(w, project)}"
    return env


def _sample_env(req: dict, rep_w: int) -> dict[str, str]:
    return {"CODERUN_REPORT": f"/dev/fd/{rep_w}", "CODERUN_REPORT_TOKEN": req["token"],
            "CODERUN_TEST_TIMEOUT": str(req["per_test_timeout"]), "CODERUN_SAMPLE": req["token"]}


def _enter_project(w: Worker, req: dict, base: str, project: str, env: dict[str, str]) -> None:
    """The interpreter state of `python -m pytest ARGS` with PYTHONPATH=harness:import_root."""
    os.environ.clear()
    os.environ.update(env)
    tempfile.tempdir = None
    root = _import_root(w, project)
    _forget_project_modules(root)
    _forget_folder(base)
    sys.path[:] = [project, w.cfg["harness"], root, *w.base_path]
    sys.argv = [os.path.join(os.path.dirname(pytest.__file__), "__main__.py"), *req["args"]]
    atexit._clear()


def _call_pytest(args: list[str], plugins: list | None) -> int:
    try:
        return int(pytest.main(list(args), plugins=plugins))
    except SystemExit as e:
        return _exit_code(e.code)
    except KeyboardInterrupt:
        return 130


def _run_pytest(w: Worker, req: dict, base: str, project: str, rep_w: int) -> int:
    """`python -m pytest ARGS` in this already-started interpreter."""
    env = {**_child_env(w, req, base, project), **_sample_env(req, rep_w)}
    if req.get("prime"):  # the one run that writes bytecode, on the pristine tree
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        sys.dont_write_bytecode = False
    _enter_project(w, req, base, project, env)
    before, probe = set(sys.modules), _Probe()
    code = _shutdown(_call_pytest(req["args"], [probe] if req.get("prime") else None))
    if req.get("prime"):
        _report_imports(rep_w, before, probe, base, w.cfg["harness"])
    return code


class _Probe:
    """Priming only: keeps pytest's config, to read which modules it marked for assertion rewriting."""

    config = None

    def pytest_configure(self, config) -> None:
        self.config = config


def _report_imports(fd: int, before: set[str], probe: _Probe, base: str, harness: str) -> None:
    """Priming only: the installed modules the collection imported, in import order (and see
    _module_files)."""
    names, inside = [], tuple(os.path.realpath(d) + os.sep for d in (base, harness))
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if name in before or (path is None and name not in sys.builtin_module_names):
            continue
        if path is None or not os.path.realpath(path).startswith(inside):
            names.append(name)
    hook = getattr(getattr(probe.config, "pluginmanager", None), "rewrite_hook", None)
    line = json.dumps({"prime": names, "rewrite": sorted(getattr(hook, "_must_rewrite", ())),
                       "files": _module_files(base)}) + "\n"
    with contextlib.suppress(OSError):
        os.write(fd, line.encode())


def _module_files(base: str) -> list[dict[str, str]]:
    """Priming only: what inspect.getmodule maps (module -> file, file -> module) for the modules under
    the sample's folder, computed as a failure's repr computes it in every child (same folder path)."""
    caches = _inspect_caches()
    if caches is None:
        return [{}, {}]
    _map_modules()
    inside = tuple({os.path.join(base, ""), os.path.join(os.path.realpath(base), "")})
    return [{m: f for m, f in caches[0].items() if isinstance(f, str) and f.startswith(inside)},
            {f: m for f, m in caches[1].items() if isinstance(f, str) and f.startswith(inside)}]


def _inspect_caches() -> tuple[dict, dict] | None:
    """inspect's module -> file and file -> module maps (None in a Python that has no such maps)."""
    caches = (getattr(inspect, "_filesbymodname", None), getattr(inspect, "modulesbyfile", None))
    return caches if all(isinstance(c, dict) for c in caches) else None


def _map_modules() -> None:
    """inspect.getmodule maps every loaded module to its file (a realpath per path component) when asked
    about a file it does not know, as pytest's failure repr does: done before forking, a child maps only
    what it loads itself. The file asked about is one no module has (a known one returns at once)."""
    with contextlib.suppress(Exception):
        inspect.getmodule(_map_modules.__code__, "<coderun: no such file>")


def _map_module_files(files: object) -> None:
    """Take a priming's _module_files into inspect's caches: a child's failure repr then maps (a realpath
    per path component) only the modules the priming did not import."""
    caches = _inspect_caches()
    if caches is not None and isinstance(files, list) and len(files) == 2 and all(isinstance(c, dict) for c in files):
        caches[0].update(files[0])
        caches[1].update(files[1])


def _exit_code(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    with contextlib.suppress(Exception):
        print(value, file=sys.stderr)
    return 1


def _shutdown(code: int) -> int:
    """What the interpreter does at exit: wait for non-daemon threads, then run atexit handlers."""
    try:
        threading._shutdown()  # type: ignore[attr-defined]
        atexit._run_exitfuncs()
    except SystemExit as e:
        code = _exit_code(e.code)
    except BaseException:  # noqa: BLE001  (printed, like the interpreter does; the code is unchanged)
        with contextlib.suppress(Exception):
            import traceback

            traceback.print_exc()
    return code


if __name__ == "__main__":
    Worker(json.loads(sys.argv[1])).serve()
