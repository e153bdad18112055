"""The `local` backend: the project's venv on this machine. A convenience for TRUSTED code.

What it does: each sample runs on a temporary copy of the pristine tree (real copies, never hardlinks,
so a sample cannot write through to the original); each command runs in its own session with
stdin=/dev/null, a scrubbed environment (no variables from coderun's process, so no path to the run
store), resource limits (address space, file size, CPU time, no core files; process count through
RLIMIT_NPROC when not root, and through a pids cgroup when this machine lets coderun create one), and
captured output capped to head + tail. When the command exits or times out, its whole process group
is killed with SIGKILL, and a sweep kills anything that escaped it with setsid: every process whose
initial environment carries this exec's marker, every process in its session and in its cgroup.

With namespaces (coderun.sandbox.isolation; the default where this machine can make them), every command
and worker runs inside bubblewrap in the sandbox's own network namespace: it sees the system, the interpreter
and the venv read-only (without installed copies of the project's modules), the harness folder read-only,
its own folders read-write, a private /tmp, and no network but loopback, where the project's services run.
The pristine tree, $CODERUN_HOME and the rest of the host are out of sight.

Without them (`isolation: none`, or a machine where they cannot be made: said with a warning when the
sandbox starts), the sample runs as the same user as coderun, with the network, and can read and write
anything that user can (a deliberately hostile process can also clear its marker and leave the cgroup when
it runs as root). Use `docker` for untrusted code.

Each sandbox has a guardian process (local_processes.Guardian) holding a pipe from coderun: when coderun
dies, the guardian kills the sandbox's processes and removes its folder.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import math
import os
import resource
import shutil
import stat
import subprocess
import tempfile
import threading
import time
import uuid
import warnings
from pathlib import Path

from coderun.choices import Isolation
from coderun.envs.installed import installed_copies
from coderun.envs.services import Running, launch
from coderun.errors import SandboxError, SandboxUnavailable
from coderun.sandbox import isolation
from coderun.sandbox.base import ExecResult, Sandbox, SandboxSpec, check_exec_args
from coderun.sandbox.isolation import Namespaces, View
from coderun.sandbox.local_processes import (
    Guardian,
    LocalProcess,
    PidsCgroup,
    collect,
    nproc_limit,
    rmtree,
    sweep,
    with_outer_timeout,
)
from coderun.sandbox.process import WorkerLayout
from coderun.sandbox.trees import left_out, tree_tar

MARKER = "CODERUN_SANDBOX_ID"
_PREFIX = "coderun-sbx-"
_READ_LIMIT = 256 << 20


class UntrustedCodeWarning(UserWarning):
    """The local backend runs generated code with this user's rights (see the module docstring)."""


class LocalSandbox(Sandbox):
    name = "local"

    def __init__(self, spec: SandboxSpec):
        super().__init__(spec)
        self.root: Path | None = None
        self._workdirs: set[Path] = set()
        self._lock = threading.Lock()
        self._services: Running | None = None
        self._guardian: Guardian | None = None
        self._ns: Namespaces | None = None      # None: no isolation (see the module docstring)
        self._hidden: tuple[str, ...] = ()      # installed copies of the project's modules in the venv
        self.isolation_note = ""                # why this sandbox runs without namespaces

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        if self.root is not None:
            return
        if not Path(self.spec.project_dir).is_dir():
            raise SandboxUnavailable(f"local sandbox: project tree {self.spec.project_dir} does not exist")
        if not os.access(self.spec.python, os.X_OK):
            raise SandboxUnavailable(f"local sandbox: no interpreter at {self.spec.python}",
                                     hint=f"build the environment: `coderun env build {self.spec.project}`")
        isolate = self._isolation()
        if not isolate:
            warnings.warn("the local backend runs generated code as this user, with the network and without "
                          f"isolation ({self.isolation_note}); use --backend docker for code you do not trust",
                          UntrustedCodeWarning, stacklevel=2)
        cleanup_stale_workdirs()
        self.root = Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{self.spec.run_id}-{self.spec.slot}-"))
        (self.root / "owner.pid").write_text(str(os.getpid()))
        (self.root / "harness").mkdir()
        (self.root / "wk").mkdir()
        self._guardian = Guardian(self.root)
        atexit.register(self.close)
        try:  # services: one instance per sandbox, no other project or worker sees its data
            if isolate:
                self._ns = Namespaces()
                self._ns.start(tuple(self.spec.services))
                self.service_env = dict(self._ns.env)
                self._hidden = self._hidden_paths()
            elif self.spec.services:
                self._services = launch(self.spec.services)
                self.service_env = dict(self._services.env)
        except BaseException:
            self.close()
            raise

    def _isolation(self) -> bool:
        """Whether this sandbox runs in namespaces: where they can be made, unless turned off."""
        mode = Isolation.parse(self.spec.isolation)
        if mode is Isolation.NONE:
            self.isolation_note = "turned off"
            return False
        why = isolation.unavailable()
        if why and mode is Isolation.NAMESPACES:
            raise SandboxUnavailable(f"local sandbox: namespaces cannot be made here: {why}",
                                     hint="install bubblewrap, or run with --isolation none")
        self.isolation_note = why or ""
        return why is None

    @property
    def isolated(self) -> bool:
        return self._ns is not None

    def _hidden_paths(self) -> tuple[str, ...]:
        return _hidden_paths(self.spec.python, self.spec.project_dir, self.spec.import_root)

    def _venv(self) -> str:
        return str(Path(self.spec.python).parent.parent)

    def _view(self, writable: tuple[str, ...], scratch: tuple[str, ...] = ()) -> View:
        return View(read_only=(*_interpreter_prefixes(self.spec.python), self._venv(), self.harness_dir()),
                    writable=writable, hidden=self._hidden, scratch=scratch, scratch_mb=self.spec.limits.scratch_mb)

    def _wrap(self, argv: list[str], cwd: str, writable: tuple[str, ...], scratch: tuple[str, ...] = ()) -> list[str]:
        if self._ns is None:
            return argv
        if not self._ns.alive():  # a broken sandbox, not the sample's fault
            raise SandboxError("local sandbox: its network namespace is gone (its holder process ended)")
        return self._ns.wrap(argv, self._view(writable, scratch), cwd)

    def close(self) -> None:
        root, self.root = self.root, None
        if root is None:
            return
        atexit.unregister(self.close)
        if self._services is not None:
            self._services.stop()
            self._services, self.service_env = None, {}
        if self._ns is not None:
            self._ns.close()
            self._ns, self.service_env = None, {}
        rmtree(root)
        self._workdirs.clear()
        if self._guardian is not None:
            self._guardian.stop()
            self._guardian = None

    def _root(self) -> Path:
        if self.root is None:
            raise SandboxError("local sandbox used before start() or after close()")
        return self.root

    def harness_dir(self) -> str:
        return str(self._root() / "harness")

    # -- workdirs ----------------------------------------------------------------------------

    def new_workdir(self) -> str:
        base = self._root() / f"w-{uuid.uuid4().hex[:10]}"
        try:
            base.mkdir()
            (base / "home").mkdir()
            (base / "tmp").mkdir()
            # Real copies: a hardlinked copy would let a sample write through to the pristine tree.
            # Without .git (history holds the originals) and bytecode (a compiled original).
            shutil.copytree(self.spec.project_dir, base / "project", symlinks=True, ignore=_left_out)
        except OSError as e:
            rmtree(base)
            raise SandboxError(f"local sandbox: cannot copy {self.spec.project_dir}: {e}") from None
        with self._lock:
            self._workdirs.add(base)
        return str(base / "project")

    def remove_workdir(self, path: str) -> None:
        base = Path(path).parent
        with self._lock:
            if base not in self._workdirs:
                raise SandboxError(f"local sandbox: {path} is not a workdir of this sandbox")
            self._workdirs.discard(base)
        rmtree(base)

    def pristine_tree(self) -> bytes:
        return tree_tar(Path(self.spec.project_dir))

    # -- files -------------------------------------------------------------------------------

    def read_file(self, path: str) -> bytes:
        # Regular files only, links not followed: a sample may have replaced a file it can write with a
        # link to /dev/zero or to a file it wants coderun to read.
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as e:
            if isinstance(e, FileNotFoundError):
                raise
            raise FileNotFoundError(f"{path}: not a readable regular file ({e.strerror})") from None
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise FileNotFoundError(f"{path}: not a regular file")
            return f.read(_READ_LIMIT)

    def write_file(self, path: str, data: bytes) -> None:
        target = Path(path)
        if not target.resolve().is_relative_to(self._root().resolve()):
            raise SandboxError(f"local sandbox: refusing to write {path} outside {self._root()}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    # -- exec --------------------------------------------------------------------------------

    def exec(self, cmd: list[str], *, cwd: str, env: dict[str, str] | None = None, timeout: float,
             stdin: bytes | None = None, output_limit: int | None = None) -> ExecResult:
        check_exec_args(cmd, timeout)
        token = uuid.uuid4().hex
        full_env = self._env(cwd, self.with_services(env or {}), token)
        limit = output_limit or self.spec.limits.output_limit
        cgroup = PidsCgroup.create(f"{_PREFIX}{token[:16]}", self.spec.limits.pids)
        argv = with_outer_timeout(self._wrap(cmd, cwd, self._writable(cwd)), timeout)
        self._guard(f"{MARKER}={token}")
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                argv, cwd=cwd, env=full_env, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, close_fds=True,
                preexec_fn=self._preexec(timeout, cgroup))
        except OSError as e:
            if cgroup:
                cgroup.remove()
            raise SandboxError(f"local sandbox: cannot start {cmd[0]}: {e}") from None
        try:
            needles = (f"{MARKER}={token}".encode(),)
            out, err, timed_out = collect(proc, stdin, limit, started + timeout,
                                          lambda: sweep(proc.pid, needles, cgroup))
        finally:
            sweep(proc.pid, (f"{MARKER}={token}".encode(),), cgroup)
            if cgroup:
                cgroup.remove()
        return ExecResult(returncode=proc.returncode, stdout=out.text(), stderr=err.text(),
                          timed_out=timed_out, truncated=out.truncated or err.truncated,
                          duration=time.monotonic() - started)

    def _guard(self, entry: str) -> None:
        if self._guardian is not None:
            self._guardian.watch(entry)

    # -- long-lived processes ----------------------------------------------------------------

    def start_process(self, argv: list[str], *, env: dict[str, str], marker: str) -> LocalProcess:
        root = self._root()
        self._guard(marker)
        # In namespaces the worker cannot make a cgroup per child: the whole worker gets one. Its scratch
        # (every sample's copy of the tree) is a tmpfs there, as in a container: on this machine's disk, writing
        # ocfl-py's copy (3570 files, 2851 folders) took 1.0-1.6 s against 0.08 s in memory.
        cgroup = PidsCgroup.create(f"{_PREFIX}w-{uuid.uuid4().hex[:16]}", self.spec.limits.pids) \
            if self.isolated else None
        try:
            return LocalProcess(self._wrap(argv, "/", (), scratch=(str(root / "wk"),)), env,
                                root / f"process-{uuid.uuid4().hex[:8]}.stderr", marker, cgroup)
        except OSError as e:
            if cgroup:
                cgroup.remove()
            raise SandboxError(f"local sandbox: cannot start {argv[0]}: {e}") from None

    def worker_layout(self) -> WorkerLayout:
        """The sandbox enforces no limit on a long-lived process: the worker applies the exec limits
        to each child itself (rlimits, and a pids cgroup per child where one can be made). In namespaces
        its /tmp, /dev/shm and user's home are its own: it empties them after each sample, as in a container."""
        root, lim = self._root(), self.spec.limits
        limits = {"memory_mb": lim.memory_mb, "file_size_mb": lim.file_size_mb, "nproc": nproc_limit(lim.pids)}
        if self.isolated:
            keep = (str(root), str(root / "harness"), str(root / "wk"))
            clean = ("/tmp", "/dev/shm", str(root), *filter(None, [isolation.user_home()]))
            return WorkerLayout(scratch=str(root / "wk"), home="/tmp", clean=clean,
                                keep=keep, kill_uid=True, limits=limits)
        return WorkerLayout(scratch=str(root / "wk"), home=str(root), limits=limits,
                            cgroup_root=PidsCgroup.probe_root(), pids=lim.pids)

    def _writable(self, cwd: str) -> tuple[str, ...]:
        """A command's writable folders: the workdir (copy, HOME, TMPDIR) that `cwd` is in."""
        base = Path(cwd).resolve()
        with self._lock:
            return tuple(str(w) for w in self._workdirs if base.is_relative_to(w.resolve()))

    def _env(self, cwd: str, extra: dict[str, str], token: str) -> dict[str, str]:
        base = Path(cwd).resolve()
        wroot = next((w for w in self._workdirs if base.is_relative_to(w.resolve())), None)
        home = (wroot or self._root()) / "home"
        tmp = (wroot or self._root()) / "tmp"
        home.mkdir(exist_ok=True)
        tmp.mkdir(exist_ok=True)
        env = {
            "PATH": os.pathsep.join([str(Path(self.spec.python).parent), "/usr/local/bin", "/usr/bin", "/bin"]),
            "HOME": str(home), "TMPDIR": str(tmp), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
        }
        env.update(extra)
        env[MARKER] = token
        return env

    def _preexec(self, timeout: float, cgroup: PidsCgroup | None):
        limits = self.spec.limits
        cpu = math.ceil(timeout) + 5
        nproc = nproc_limit(limits.pids)
        procs_file = str(cgroup.path / "cgroup.procs") if cgroup else None

        def apply() -> None:  # runs in the child between fork and exec: keep it to system calls
            if procs_file:
                fd = os.open(procs_file, os.O_WRONLY)
                os.write(fd, b"0")
                os.close(fd)
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            resource.setrlimit(resource.RLIMIT_AS, (limits.memory_mb << 20,) * 2)
            resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_size_mb << 20,) * 2)
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
            if nproc is not None:
                resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))

        return apply


@functools.lru_cache(maxsize=64)
def _hidden_paths(python: str, tree: str, import_root: str) -> tuple[str, ...]:
    """Copies of the project's code a sandbox must not see: an install of the project in the venv, and in
    the system (see isolation.hidden_packages). Found once per process (a naive run starts a sandbox per
    sample)."""
    venv = str(Path(python).parent.parent)
    return (*installed_copies(venv, tree, import_root),
            *isolation.hidden_packages(python, os.path.join(tree, import_root), _interpreter_prefixes(python)))


def _left_out(folder: str, names: list[str]) -> set[str]:
    return {n for n in names if left_out(n)}


def _interpreter_prefixes(python: str) -> tuple[str, ...]:
    """Where the venv's interpreter is installed (pyvenv.cfg's home, a pyenv version say), unless the system's
    folders hold it already."""
    cfg = Path(python).parent.parent / "pyvenv.cfg"
    home = None
    with contextlib.suppress(OSError):
        for line in cfg.read_text().splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "home":
                home = Path(value.strip())
    prefix = (home or Path(os.path.realpath(python)).parent).resolve().parent
    system = tuple(f"/{d}" for d in ("usr", "bin", "lib", "lib64", "sbin"))
    return () if str(prefix) in system or str(prefix).startswith(tuple(s + "/" for s in system)) else (str(prefix),)


def cleanup_stale_workdirs() -> list[str]:
    """Remove sandbox folders left in the temp dir by coderun processes that no longer run."""
    removed = []
    for entry in Path(tempfile.gettempdir()).glob(f"{_PREFIX}*"):
        try:
            owner = int((entry / "owner.pid").read_text())
        except (OSError, ValueError):
            continue
        if owner != os.getpid() and not Path(f"/proc/{owner}").exists():
            rmtree(entry)
            removed.append(str(entry))
    return removed
