"""Isolation of the `local` backend: every command of a local sandbox in namespaces of its own.

    Namespaces.start(services)            with services: a network namespace for the sandbox, the services in it
    Namespaces.wrap(argv, view, cwd)      argv inside bubblewrap, seeing only `view`, no network but loopback
    Namespaces.close()                    the namespace and the services in it end

The tools are maintained and packaged everywhere a Linux user runs code: bubblewrap (Debian's `bubblewrap`,
the sandbox of Flatpak) builds each command's view of the filesystem from nothing, binding in only what it is
given, in new mount, PID, IPC and UTS namespaces, with every capability dropped and no new privileges; it
needs no daemon and, where unprivileged user namespaces are allowed, no root. Run by root, it also makes a
user namespace in which the command is uid SANDBOX_UID, as docker's `coderun` user is: a project's tools that
act differently for root (GNU tar restores an archive's owners, and cannot without capabilities: rdiffweb's
tests) act as for any user; files it writes are still root's on the host. Each command gets a network
namespace of its own with loopback only (bubblewrap's --unshare-net); for a project whose tests need services,
util-linux's `unshare` makes one network namespace for the sandbox and `nsenter` puts each command and the
services in it, so they listen on the sandbox's own loopback, reachable by its commands and nothing else.

What a command sees (`View`): the system's programs and libraries (`/usr` and its links, `/etc` without what
only root may read), the interpreter's installation and the venv read-only (the venv without the copies of the
project's own modules an install of the project put there), coderun's harness folder read-only, its own folders
read-write (the sample's copy, HOME and TMPDIR), a private `/tmp`, `/dev/shm` and `/proc`, and no network but
loopback. Nothing else of the host: not $CODERUN_HOME (trees, git mirrors, sdists, other environments), not
other sandboxes, not the user's files.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import glob
import hashlib
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coderun.config import keep, read_kept
from coderun.envs import services
from coderun.errors import SandboxUnavailable, ServiceError

TOOLS = ("bwrap", "unshare", "nsenter")
SANDBOX_UID = 1000
_SYSTEM = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
# The network namespace's first process: loopback up (SIOCGIFFLAGS, SIOCSIFFLAGS with IFF_UP), then it
# holds the namespace until coderun closes its stdin (or dies).
_HOLDER = ("import fcntl, socket, struct, sys\n"
           "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
           "flags = struct.unpack('16sh', fcntl.ioctl(s, 0x8913, struct.pack('16sh', b'lo', 0)))[1]\n"
           "fcntl.ioctl(s, 0x8914, struct.pack('16sh', b'lo', flags | 1))\n"
           "sys.stdout.write('ready\\n'); sys.stdout.flush()\n"
           "sys.stdin.read()\n")


@dataclass(frozen=True)
class View:
    """What one command sees of the host besides the system (see the module docstring)."""

    read_only: tuple[str, ...] = ()
    writable: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()          # paths under those: an empty folder or file in their place
    scratch: tuple[str, ...] = ()         # a tmpfs of its own at each (a worker's sample copies), of scratch_mb
    scratch_mb: int = 0


@functools.cache
def tools() -> dict[str, str] | None:
    found = {t: shutil.which(t) for t in TOOLS}
    return None if not all(found.values()) else {t: str(p) for t, p in found.items()}


@functools.cache
def unavailable() -> str | None:
    """Why namespaces cannot be made on this machine (None: they can), found by making them once."""
    found = tools()
    if found is None:
        missing = [t for t in TOOLS if not shutil.which(t)]
        return f"{', '.join(missing)} not found (install Debian's bubblewrap and util-linux)"
    try:
        with Namespaces(shared=True) as ns:  # both ways a command is run: the shared namespace's too
            done = subprocess.run(ns.wrap(["true"], View(), "/"), capture_output=True, text=True, timeout=60,
                                  stdin=subprocess.DEVNULL)
    except (SandboxUnavailable, OSError, subprocess.TimeoutExpired) as e:
        return str(e)
    if done.returncode != 0:
        return f"bubblewrap cannot make a sandbox here: {done.stderr.strip()[-300:]}"
    return None


def version() -> str:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        return subprocess.run(["bwrap", "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
    return "bubblewrap"


@functools.cache
def _system_args() -> tuple[str, ...]:
    """The system's programs and libraries (merged /usr links kept as links), /etc without what only root
    may read, a fresh /proc, /dev, /tmp and /dev/shm."""
    args: list[str] = []
    for name in _SYSTEM:
        path = Path("/", name)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    args += ["--ro-bind", "/etc", "/etc"]
    for entry in sorted(os.scandir("/etc"), key=lambda e: e.name):
        with contextlib.suppress(OSError):
            if entry.is_symlink() or entry.stat().st_mode & 0o004:
                continue
            args += ["--tmpfs", entry.path] if entry.is_dir() else ["--ro-bind", os.devnull, entry.path]
    args += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/tmp",
             "--perms", "1777", "--tmpfs", "/dev/shm"]
    return tuple(args)


def hidden_packages(python: str, root: str, prefixes: tuple[str, ...]) -> list[str]:
    """What a sandbox of a project (its import root `root`, its venv's `python`) must not see of the system:
    the folders of installed packages the venv does not use (the system's dist-packages, the interpreter's
    own site-packages), and copies of the project's packages anywhere else in the system folders it sees
    (a library vendored by another program: Google's SDK ships cachetools)."""
    out: list[str] = []
    cfg = Path(python).parent.parent / "pyvenv.cfg"
    with contextlib.suppress(OSError):
        if "include-system-site-packages = true" not in cfg.read_text():
            for base in ("/usr/lib", "/usr/local/lib", *(f"{p}/lib" for p in prefixes)):
                out += sorted(glob.glob(f"{base}/python3*/site-packages") + glob.glob(f"{base}/python3*/dist-packages"))
    out += _system_copies(root, ("/usr", *prefixes))
    return list(dict.fromkeys(p for p in out if os.path.isdir(p) or os.path.isfile(p)))


def _system_copies(root: str, tops: tuple[str, ...]) -> list[str]:
    """Folders and modules under the system folders a sandbox sees (`tops`) named like the project's
    top-level packages and modules and holding one of its modules by name (any version of it); never
    inside an interpreter's standard library, nor for the project's test packages and setup scripts."""
    indexes = _system_index(tops)
    out = []
    with contextlib.suppress(OSError):
        for name in sorted(os.listdir(root)):
            mine = os.path.join(root, name)
            named = [p for index in indexes for p in index.get(name, ())]
            if name.startswith("test") or name in _NOT_CODE:
                continue
            if name.endswith(".py") and os.path.isfile(mine):
                out += named
            elif os.path.isfile(os.path.join(mine, "__init__.py")):
                modules = [f for f in os.listdir(mine) if f.endswith(".py") and f not in _NOT_CODE]
                out += [c for c in named if os.path.isdir(c) and any(os.path.isfile(os.path.join(c, m)) for m in modules)]
    return [p for p in out if not _STDLIB.search(p)]


_NOT_CODE = frozenset({"__init__.py", "__main__.py", "setup.py", "conftest.py"})
_STDLIB = re.compile(r"/lib/python3[.\d]*/(?!site-packages/|dist-packages/)")


_STDLIB_TOP = re.compile(r"/lib/python3[.\d]*$")
_index_lock = threading.Lock()


def _system_index(tops: tuple[str, ...]) -> list[dict[str, list[str]]]:
    """Every folder and .py file under each of `tops`, by name: one walk per top and coderun process (workers
    starting together, and `prefetch_index`, wait for the one under way). An interpreter's standard library
    is not walked: `_STDLIB` drops whatever is found there."""
    with _index_lock:
        return [_walk_index(top) for top in tops]


def prefetch_index() -> None:
    """Walk /usr, which every local sandbox sees, in the background: a run that will start sandboxes in
    namespaces calls this first, and the first sandbox waits for less of the walk (0.5 s here)."""
    threading.Thread(target=_system_index, args=(("/usr",),), name="coderun-system-index", daemon=True).start()


@functools.cache
def _walk_index(top: str) -> dict[str, list[str]]:
    """The index of `top`, kept in the home for later processes with the modification time of every folder
    walked: adding, removing or renaming an entry changes its folder's, so a kept index is used only while
    they all match (checking them took a tenth of the walk of /usr here: 0.05 s against 0.36 s)."""
    name = f"system-index/{hashlib.sha256(top.encode()).hexdigest()[:16]}.json"
    kept = read_kept(name)
    if _still_valid(kept, top):
        return kept["index"]
    started = time.time_ns()
    index: dict[str, list[str]] = {}
    folders: list[tuple[str, int]] = []
    for folder, dirs, files in os.walk(top):
        with contextlib.suppress(OSError):
            folders.append((folder, os.stat(folder).st_mtime_ns))
        if _STDLIB_TOP.search(folder):
            dirs[:] = [d for d in dirs if d in ("site-packages", "dist-packages")]
            continue
        for entry in dirs + [f for f in files if f.endswith(".py")]:
            index.setdefault(entry, []).append(os.path.join(folder, entry))
    # A folder changed during the walk (or within the clock's coarseness of it) may hold what the walk
    # did not see under a time that will still match: such a walk is not kept.
    if folders and all(mtime < started - _RACY_NS for _, mtime in folders):
        keep(name, {"top": top, "folders": folders, "index": index})
    return index


_RACY_NS = 2_000_000_000


def _still_valid(kept: Any, top: str) -> bool:
    try:
        return kept["top"] == top and all(os.stat(folder).st_mtime_ns == mtime for folder, mtime in kept["folders"])
    except (OSError, KeyError, TypeError, ValueError):
        return False


@functools.cache
def _user_args() -> tuple[str, ...]:
    """For root: a user namespace where the command is SANDBOX_UID (named in /etc/passwd and /etc/group,
    through copies that add it where the host's lack it: `getpass`, git and ssh look the user up)."""
    if os.geteuid() != 0:
        return ()
    args = ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
    entries = {"passwd": f"coderun:x:{SANDBOX_UID}:{SANDBOX_UID}:coderun sandbox:/tmp:/bin/sh\n",
               "group": f"coderun:x:{SANDBOX_UID}:\n"}
    for name, entry in entries.items():
        try:
            text = Path("/etc", name).read_text()
        except OSError:
            text = ""
        if any(line.split(":")[2:3] == [str(SANDBOX_UID)] for line in text.splitlines()):
            continue
        copy = Path(_scratch(), name)
        copy.write_text(text + ("" if not text or text.endswith("\n") else "\n") + entry)
        args += ["--ro-bind", str(copy), f"/etc/{name}"]
    return tuple(args)


@functools.cache
def _scratch() -> str:
    """A folder of this process for the files every sandbox binds in (removed when it exits)."""
    path = tempfile.mkdtemp(prefix="coderun-isolation-")
    atexit.register(shutil.rmtree, path, True)
    return path


@functools.cache
def user_home() -> str:
    """The home the user database names for the command's user, which tools read instead of $HOME (ansible's
    ~/.ansible/tmp): a tmpfs of its own in the sandbox, which a worker empties after each sample. "" when that
    is / or /tmp (root's sandbox user where the host has no user SANDBOX_UID: the copy names /tmp)."""
    try:
        home = os.path.normpath(pwd.getpwuid(SANDBOX_UID if os.geteuid() == 0 else os.getuid()).pw_dir)
    except KeyError:
        return ""
    return "" if home in ("/", "/tmp") or not os.path.isabs(home) else home


def view_args(view: View) -> list[str]:
    """bubblewrap's arguments for `view`. The home tmpfs comes before the binds (the venv or $CODERUN_HOME
    may be under it); the root, bubblewrap's own tmpfs, is made read-only last: a worker's root outlives its
    samples, so what one wrote there (a /home/USER of its own making) the next one would have seen."""
    args = [*_system_args(), *_user_args()]
    if user_home():
        args += ["--tmpfs", user_home()]
    for path in view.read_only:
        args += ["--ro-bind", path, path]
    for path in view.writable:
        args += ["--bind", path, path]
    for path in view.scratch:
        args += [*_size(view.scratch_mb), "--tmpfs", path]
    for path in view.hidden:
        args += ["--tmpfs", path] if os.path.isdir(path) else ["--ro-bind", os.devnull, path]
    return [*args, "--remount-ro", "/"]


@functools.cache
def _sizes_tmpfs() -> bool:
    """bubblewrap 0.8 added --size; an older one makes tmpfs of the kernel's default size (half the memory)."""
    numbers = re.findall(r"\d+", version())
    return len(numbers) >= 2 and (int(numbers[0]), int(numbers[1])) >= (0, 8)


def _size(mb: int) -> list[str]:
    return ["--size", str(mb * 1024 * 1024)] if mb and _sizes_tmpfs() else []


@dataclass
class Namespaces:
    """How a sandbox's commands are put in namespaces: each in a network namespace of its own, or (`shared`:
    a project with services) all in the sandbox's, held by a process, with the services started in it."""

    shared: bool = False
    holder: subprocess.Popen | None = None
    pid: int = 0                                   # the holder's pid, as the host sees it
    service_data: str | None = None
    env: dict[str, str] = field(default_factory=dict)

    def __enter__(self) -> Namespaces:
        self.start(())
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _user(self) -> list[str]:
        """Without root, a user namespace owns the network namespace (the user keeps their uid in it)."""
        return [] if os.geteuid() == 0 else ["--user", "--map-current-user", "--keep-caps"]

    def start(self, names: tuple[str, ...]) -> None:
        found = tools()
        if found is None:
            raise SandboxUnavailable(f"namespaces: {', '.join(t for t in TOOLS if not shutil.which(t))} not found")
        self.shared = self.shared or bool(names)
        if not self.shared:
            return
        self.holder = subprocess.Popen(
            [found["unshare"], *self._user(), "--net", "--pid", "--fork", "--kill-child", "--",
             sys.executable, "-I", "-S", "-c", _HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, start_new_session=True, close_fds=True)
        line = self.holder.stdout.readline()
        if line.strip() != b"ready":
            why = self.holder.stderr.read().decode(errors="replace").strip()[-300:] if self.holder.poll() is not None \
                else "no answer"
            self.close()
            raise SandboxUnavailable(f"namespaces: unshare cannot make a network namespace here: {why}")
        self.pid = _child_of(self.holder.pid)
        if names:
            self._services(names)

    def alive(self) -> bool:
        return not self.shared or (self.holder is not None and self.holder.poll() is None)

    def join(self, pid_namespace: bool = False) -> list[str]:
        """The nsenter prefix that runs a command in the sandbox's network namespace."""
        user = [] if os.geteuid() == 0 else ["--user", "--preserve-credentials"]
        return [tools()["nsenter"], "--target", str(self.pid), "--net", *(["--pid"] if pid_namespace else []),
                *user, "--"]

    def wrap(self, argv: list[str], view: View, cwd: str) -> list[str]:
        bwrap = ["bwrap", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
                 *([] if self.shared else ["--unshare-net"]), "--die-with-parent", "--cap-drop", "ALL",
                 *view_args(view), "--chdir", cwd, "--"]
        return [*self.join(), *bwrap, *argv] if self.shared else [*bwrap, *argv]

    def _services(self, names: tuple[str, ...]) -> None:
        """The project's services, started by coderun's services module in the namespace (its PID namespace
        too: they end with the holder)."""
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
            f.write(services.SOURCE)
        try:
            done = subprocess.run([*self.join(pid_namespace=True), sys.executable, "-I", f.name, "start", *names],
                                  capture_output=True, text=True, stdin=subprocess.DEVNULL,
                                  timeout=services.READY_TIMEOUT * len(names) + 30)
        finally:
            os.unlink(f.name)
        if done.returncode != 0:
            self.close()
            raise ServiceError(f"the services {', '.join(names)} did not start in the sandbox's network "
                               f"namespace (exit {done.returncode}): {done.stderr.strip()[-800:]}")
        started = json.loads(done.stdout.strip().splitlines()[-1])
        self.env, self.service_data = dict(started["env"]), started.get("data")

    def close(self) -> None:
        holder, self.holder = self.holder, None
        if holder is not None:
            for stream in (holder.stdin, holder.stdout, holder.stderr):
                with contextlib.suppress(OSError):
                    stream.close()
            try:
                holder.wait(10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(OSError):
                    os.killpg(holder.pid, 9)
                holder.wait()
        if self.service_data:
            shutil.rmtree(self.service_data, ignore_errors=True)
            self.service_data = None


def _child_of(pid: int) -> int:
    """The holder's process (unshare's only child), as the host sees it."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        children = []
    if not children:
        raise SandboxUnavailable("namespaces: the network namespace's holder is gone")
    return int(children[0])
