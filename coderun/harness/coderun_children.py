"""The worker's side of a child (coderun_child): fork it with its pipes, read them until they close, kill
it at the deadline, then kill every process it left and clean what it left in shared folders. The pids
cgroup a child runs in when the local backend runs as root is made and removed here too.
Standalone (stdlib only, Python 3.7): imported by the worker.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import time
from typing import TYPE_CHECKING

import coderun_protocol as protocol
from coderun_capped import CappedBuffer
from coderun_child import Exit, resume_child, run_child
from coderun_folders import rmtree, unlink

if TYPE_CHECKING:
    from coderun_worker import SampleServer

_REPORT_LIMIT = 64 << 20
_PF_EXITING = 0x4  # include/linux/sched.h: the task is exiting


def fork_and_wait(w: SampleServer, req: dict, base: str, project: str) -> dict:
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    rep_r, rep_w = os.pipe()
    end_r, end_w = os.pipe()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        for fd in (out_r, err_r, rep_r, end_r):
            os.close(fd)
        Exit.fd = end_w
        if w.paused:
            resume_child(w, req, base, project, out_w, err_w, rep_w)  # raises Resume
        run_child(w, req, base, project, out_w, err_w, rep_w)  # never returns
    for fd in (out_w, err_w, rep_w, end_w):
        os.close(fd)
    limit = int(req.get("output_limit") or (1 << 20))
    bufs = {out_r: CappedBuffer(limit), err_r: CappedBuffer(limit), rep_r: CappedBuffer(_REPORT_LIMIT),
            end_r: CappedBuffer(16)}
    code, timed_out = collect(w, pid, bufs, started + float(req["timeout"]), req, end_r)
    return protocol.result(req["id"], returncode=code, timed_out=timed_out, duration=time.monotonic() - started,
                           stdout=bufs[out_r].text(), stderr=bufs[err_r].text(),
                           truncated=bufs[out_r].truncated or bufs[err_r].truncated,
                           report=bufs[rep_r].text(), report_truncated=bufs[rep_r].truncated)


def collect(w: SampleServer, pid: int, bufs: dict, deadline: float, req: dict, end_r: int) -> tuple[int, bool]:
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
            sweep(w, pid, req)
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
    code = exit_note(pid, bufs[end_r].text()) if status is None else None
    if code is not None:  # reaped in SampleServer.finish(), after the answer
        req["reap"] = pid
    elif status is None:
        _, status = os.waitpid(pid, 0)
    sweep(w, pid, req)
    if code is None:
        code = status_code(status) if status is not None else -9
    return code, timed_out


def sweep(w: SampleServer, pid: int, req: dict) -> None:
    """SIGKILL the child's group and every process it left (see coderun_worker's docstring), then wait
    (up to 3 s) until they are reaped too: a zombie still counts against the sandbox's process
    limit, and the next sample could not start a thread."""
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    needles = (w.marker.encode(), f"CODERUN_SAMPLE={req['token']}".encode())
    # never the worker's parent, nor PID 1: in a sandbox's PID namespace that is the sandbox's own init
    skip = {os.getpid(), os.getppid(), 1, req.get("reap"), *w.spare}
    for _ in range(150):
        found = [(p, belongs(w, p, pid, needles)) for p in processes() if p not in skip]
        victims = [p for p, state in found if state == "alive"] + _cgroup_pids(req.get("cgroup"))
        if not victims and "zombie" not in {state for _, state in found}:
            break
        for p in victims:
            with contextlib.suppress(OSError):
                os.kill(p, signal.SIGKILL)
        time.sleep(0.02)


def processes() -> list[int]:
    return [int(e) for e in os.listdir("/proc") if e.isdigit()]


def belongs(w: SampleServer, p: int, sid: int, needles: tuple[bytes, ...]) -> str | None:
    """"alive" or "zombie" for a process the sample left, else None."""
    try:
        with open(f"/proc/{p}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        state = "zombie" if fields[0] in (b"Z", b"X") else "alive"
        if int(fields[3]) == sid:
            return state
        if w.cfg.get("kill_uid") and os.stat(f"/proc/{p}").st_uid == os.getuid():
            return state
        if state == "zombie":  # its environment can no longer be read
            return None
        with open(f"/proc/{p}/environ", "rb") as f:
            env = f.read().split(b"\0")
        return state if any(n in env for n in needles) else None
    except (OSError, IndexError, ValueError):
        return None


def clean_shared(w: SampleServer) -> None:
    """Remove what a child left in shared temporary folders (docker: /tmp, /dev/shm, /scratch). The
    sandbox's own mounts in them stay, with the folders that lead to them: bubblewrap binds the venv and
    the harness where they are on the host, often under /tmp. Removing such a tree failed file by file
    (read-only) and took over 100 ms after every sample; what a child left beside the mounts still goes."""
    keep = set(w.cfg.get("keep") or ()) | {w.scratch}
    mounts = _mount_points()
    for top in w.cfg.get("clean") or ():
        _empty(top, keep, mounts)


def _empty(folder: str, keep: set[str], mounts: set[str]) -> None:
    with contextlib.suppress(OSError):
        for name in os.listdir(folder):
            p = os.path.join(folder, name)
            if p in keep or p in mounts:
                continue
            if any(m.startswith(p + "/") for m in mounts):
                _empty(p, keep, mounts)
            elif os.path.isdir(p) and not os.path.islink(p):
                rmtree(p)
            else:
                unlink(p)


def _mount_points() -> set[str]:
    """The mount points this process sees (/proc/self/mountinfo's fifth field, octal escapes decoded)."""
    try:
        with open("/proc/self/mountinfo", "rb") as f:
            lines = f.read().splitlines()
    except OSError:
        return set()
    points = set()
    for line in lines:
        fields = line.split()
        if len(fields) > 4:
            points.add(re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]), fields[4])
                       .decode("utf-8", "surrogateescape"))
    return points


def new_cgroup(w: SampleServer, token: str) -> str | None:
    """A pids cgroup for the child (local backend as root): a process limit and a complete kill list."""
    root = w.cfg.get("cgroup_root")
    if not root:
        return None
    path = os.path.join(root, f"coderun-w-{token[:16]}")
    os.mkdir(path)
    with open(os.path.join(path, "pids.max"), "w") as f:
        f.write(str(w.cfg.get("pids") or 256))
    return path


def remove_cgroup(path: str | None) -> None:
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


def _cgroup_pids(path: str | None) -> list[int]:
    if not path:
        return []
    try:
        with open(os.path.join(path, "cgroup.procs")) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def exit_note(pid: int, said: str) -> int | None:
    """The exit code the child wrote, when it is certain to be on its way out: the kernel has marked
    every thread of it as exiting (PF_EXITING), so no code of the sample runs any more. A sample could
    write a code there itself, but no other than one it could exit with; one that then goes on running
    is not exiting, and is waited for (and killed at the deadline) as before. None: wait for it."""
    if not said.isdigit():
        return None
    for pause in (0.0005, 0.001, 0.002, 0.004, 0.008):  # the exit follows the last close by microseconds,
        if _exiting(pid):                                  # unless the machine is busy (~15 ms at most)
            return int(said) & 0xFF
        time.sleep(pause)
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


def status_code(status: int) -> int:
    """os.waitstatus_to_exitcode, which the worker cannot use: it runs in the project's Python, 3.7 and 3.8 too."""
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


