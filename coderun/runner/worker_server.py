"""coderun's per-project test worker: started once per (project, slot) inside the sandbox, it forks a
child per sample. Standalone on purpose (no coderun imports): it runs in the project's interpreter.

    python coderun_worker.py CONFIG_JSON      (protocol: JSON lines, requests on stdin, answers on stdout)

Started once, the worker imports pytest (the expensive part of a fresh `python -m pytest`), makes itself
non-dumpable (a child of the same user can then neither ptrace it nor open its /proc files), and answers
`hello` with the sha256 of every file of the pristine tree. For each request it:
- copies the pristine tree into a fresh private folder and writes the spliced file there (a real copy:
  see coderun/runner/workers.py for why not hardlinks);
- forks a child that starts a new session, closes the protocol channel, points fd 0 at /dev/null and
  fds 1, 2 and the reporter's channel at pipes the worker reads, applies resource limits, scrubs the
  environment, rebuilds `sys.path` as `python -m pytest` with PYTHONPATH would, and runs `pytest.main`
  on the requested node ids; then shuts down as an interpreter would (non-daemon threads joined, atexit
  handlers run) and leaves with pytest's exit code;
- kills the child's process group at the deadline, then every process the child left behind (its
  session, anything carrying this worker's or this sample's marker, and when `kill_uid` is set every
  other process of this user), hashes the copy after the run and deletes it and everything the child
  left in the shared temporary folders;
- answers with exit code, timeout, capped stdout / stderr, the reporter's raw lines and the hashes.
The verdict is decided by coderun on the host, from this evidence, by the same function as always.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import resource
import select
import shutil
import signal
import stat
import sys
import tempfile
import threading
import time

import pytest

_SKIP_DIRS = ("__pycache__", ".git", ".pytest_cache", ".mypy_cache")
_REPORT_LIMIT = 64 << 20


def _hashes(root: str) -> dict[str, str]:
    """sha256 of every file under root (same rules as coderun.runner.execute._HASH_SCRIPT)."""
    out = {}
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x not in _SKIP_DIRS]
        for f in files:
            p = os.path.join(d, f)
            if f.endswith((".pyc", ".pyo")):
                continue
            rel = os.path.relpath(p, root)
            try:
                if os.path.islink(p):
                    out[rel] = "link:" + os.readlink(p)
                else:
                    h = hashlib.sha256()
                    with open(p, "rb") as fh:
                        for chunk in iter(lambda fh=fh: fh.read(1 << 20), b""):
                            h.update(chunk)
                    out[rel] = h.hexdigest()
            except OSError as e:
                out[rel] = "unreadable:" + type(e).__name__
    return out


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
        self.send({"kind": "hello", "pid": os.getpid(), "uid": os.getuid(), "python": sys.version.split()[0],
                   "pytest": pytest.__version__, "pristine": _hashes(self.source)})
        for line in self.proto_in:
            req = json.loads(line)
            try:
                self.send(self.run(req))
            except Exception as e:  # the worker's own failure: coderun falls back to the naive path
                self.send({"kind": "error", "id": req.get("id"), "error": f"{type(e).__name__}: {e}"})

    def warm_up(self) -> None:
        """Collect an empty folder once, so the modules pytest imports lazily are loaded before the first
        fork. Never with coderun's reporter, which reads its channel when imported."""
        empty = tempfile.mkdtemp(prefix="warm-", dir=self.scratch)
        cwd, path, argv = os.getcwd(), list(sys.path), list(sys.argv)
        try:
            os.chdir(empty)
            with contextlib.suppress(BaseException):
                pytest.main(["-q", "--collect-only", "-p", "no:cacheprovider", "-o", "addopts=", empty])
        finally:
            os.chdir(cwd)
            sys.path[:], sys.argv = path, argv
            _rmtree(empty)

    # -- one sample --------------------------------------------------------------------------

    def run(self, req: dict) -> dict:
        base = tempfile.mkdtemp(prefix="c-", dir=self.scratch)
        project = os.path.join(base, "project")
        try:
            for d in ("home", "tmp"):
                os.mkdir(os.path.join(base, d))
            t0 = time.monotonic()
            shutil.copytree(self.source, project, symlinks=True, ignore=shutil.ignore_patterns(".git"))
            target = os.path.join(project, req["relfile"])
            with open(target, "wb") as f:
                f.write(req["source"].encode("utf-8"))
            req["cgroup"] = self.new_cgroup(req["token"])
            t1 = time.monotonic()
            answer = self.fork_and_wait(req, base, project)
            t2 = time.monotonic()
            answer["after"] = _hashes(project)
            answer["timing"] = {"copy": t1 - t0, "child": t2 - t1, "hash": time.monotonic() - t2}
            return answer
        finally:
            self.remove_cgroup(req.get("cgroup"))
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
        started = time.monotonic()
        pid = os.fork()
        if pid == 0:
            os.close(out_r)
            os.close(err_r)
            os.close(rep_r)
            _child(self, req, base, project, out_w, err_w, rep_w)  # never returns
        for fd in (out_w, err_w, rep_w):
            os.close(fd)
        limit = int(req.get("output_limit") or (1 << 20))
        bufs = {out_r: _Capped(limit), err_r: _Capped(limit), rep_r: _Capped(_REPORT_LIMIT)}
        status, timed_out = self.collect(pid, bufs, started + float(req["timeout"]), req)
        code = os.waitstatus_to_exitcode(status) if status is not None else -9
        return {"kind": "result", "id": req["id"], "returncode": code, "timed_out": timed_out,
                "duration": time.monotonic() - started, "stdout": bufs[out_r].text(),
                "stderr": bufs[err_r].text(), "truncated": bufs[out_r].truncated or bufs[err_r].truncated,
                "report": bufs[rep_r].text(), "report_truncated": bufs[rep_r].truncated}

    def collect(self, pid: int, bufs: dict, deadline: float, req: dict):
        """Read the child's pipes until EOF; kill it at the deadline, and its leftovers once it exited."""
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
        if status is None:
            _, status = os.waitpid(pid, 0)
        self.sweep(pid, req)
        return status, timed_out

    def sweep(self, pid: int, req: dict) -> None:
        """SIGKILL the child's group and every process it left (see the module docstring)."""
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
        needles = (self.marker.encode(), f"CODERUN_SAMPLE={req['token']}".encode())
        me = os.getpid()
        for _ in range(20):
            victims = [p for p in self.processes() if p != me and self.belongs(p, pid, needles)]
            victims += _cgroup_pids(req.get("cgroup"))
            if not victims:
                break
            for p in victims:
                with contextlib.suppress(OSError):
                    os.kill(p, signal.SIGKILL)
            time.sleep(0.02)

    @staticmethod
    def processes() -> list[int]:
        return [int(e) for e in os.listdir("/proc") if e.isdigit()]

    def belongs(self, p: int, sid: int, needles: tuple[bytes, ...]) -> bool:
        try:
            with open(f"/proc/{p}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            if fields[0] in (b"Z", b"X"):
                return False
            if int(fields[3]) == sid:
                return True
            if self.cfg.get("kill_uid") and os.stat(f"/proc/{p}").st_uid == os.getuid():
                return True
            with open(f"/proc/{p}/environ", "rb") as f:
                env = f.read().split(b"\0")
            return any(n in env for n in needles)
        except (OSError, IndexError, ValueError):
            return False

    def clean_shared(self) -> None:
        """Remove what a child left in shared temporary folders (docker: /tmp, /dev/shm, /scratch)."""
        keep = set(self.cfg.get("keep") or ()) | {self.scratch}
        for top in self.cfg.get("clean") or ():
            with contextlib.suppress(OSError):
                for name in os.listdir(top):
                    p = os.path.join(top, name)
                    if p not in keep:
                        _rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else _unlink(p)


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
    code = 1
    try:
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        os.closerange(3, rep_w)
        os.closerange(rep_w + 1, 65536)
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
        code = _run_pytest(w, req, base, project, rep_w)
    except BaseException:  # noqa: BLE001  (the child must never return into the worker's loop)
        with contextlib.suppress(Exception):
            import traceback

            traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


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


def _forget_project_modules(root: str) -> None:
    """The child must import the project from its copy. The worker's warm-up may have imported it already
    (a plugin such as pytest-django loads the project's settings module), from site-packages when the
    project is installed there; such modules would shadow the copy, so they are dropped."""
    names = set()
    for entry in os.listdir(root):
        if entry.endswith(".py"):
            names.add(entry[:-3])
        elif os.path.isfile(os.path.join(root, entry, "__init__.py")):
            names.add(entry)
    for module in [m for m in sys.modules if m.split(".", 1)[0] in names]:
        del sys.modules[module]


def _run_pytest(w: Worker, req: dict, base: str, project: str, rep_w: int) -> int:
    """`python -m pytest ARGS` with PYTHONPATH=harness:import_root, in this already-started interpreter."""
    harness = w.cfg["harness"]
    root = os.path.join(project, w.cfg["import_root"]) if w.cfg.get("import_root") else project
    env = dict(w.cfg.get("base_env") or {})
    env.update({"HOME": os.path.join(base, "home"), "TMPDIR": os.path.join(base, "tmp")})
    env.update(req.get("env") or {})
    env.update({"PYTHONPATH": f"{harness}:{root}", "CODERUN_REPORT": f"/dev/fd/{rep_w}",
                "CODERUN_REPORT_TOKEN": req["token"], "CODERUN_TEST_TIMEOUT": str(req["per_test_timeout"]),
                "CODERUN_SAMPLE": req["token"]})
    os.environ.clear()
    os.environ.update(env)
    tempfile.tempdir = None
    _forget_project_modules(root)
    sys.path[:] = [project, harness, root, *w.base_path]
    sys.argv = [os.path.join(os.path.dirname(pytest.__file__), "__main__.py"), *req["args"]]
    atexit._clear()
    try:
        code = int(pytest.main(list(req["args"])))
    except SystemExit as e:
        code = _exit_code(e.code)
    except KeyboardInterrupt:
        code = 130
    code = _shutdown(code)
    return code


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
