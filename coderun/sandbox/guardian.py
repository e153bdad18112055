"""Ends a local sandbox with its owner. Standalone (stdlib only): coderun starts it, in a session of its
own, as

    python -I -S guardian.py ROOT

with a pipe on stdin. Each line coderun writes names an environment entry ("NAME=VALUE") that marks the
sandbox's processes. At EOF (coderun died, even by SIGKILL: the kernel closes its end) the guardian
SIGKILLs every process whose initial environment holds such an entry, or a HOME or TMPDIR at or under
ROOT, and every process in the session of one of those, until none is left; then it removes the coderun
cgroups they were in, and ROOT. When coderun closes the sandbox itself, it kills the guardian instead.
"""

import contextlib
import os
import shutil
import signal
import stat
import sys
import time

_CGROUP_FS = "/sys/fs/cgroup"


def main() -> None:
    root = sys.argv[1].encode()
    marks = {b"HOME=" + root, b"TMPDIR=" + root}
    for line in sys.stdin.buffer:
        if line.strip():
            marks.add(line.strip())
    cgroups = kill_all(marks)
    remove_cgroups(cgroups)
    rmtree(sys.argv[1])


def kill_all(marks: set) -> set:
    """Kill the marked processes and their sessions; the coderun cgroups they were in."""
    sids, cgroups = set(), set()
    for _ in range(200):
        found = scan(marks, sids)
        if not found:
            break
        for pid in found:
            cgroups |= coderun_cgroups(pid)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
    return cgroups


def scan(marks: set, sids: set) -> list:
    """Live processes that belong to the sandbox; adds their sessions to `sids`."""
    found = []
    spare = {0, 1, os.getsid(0)}
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            if fields[0] in (b"Z", b"X"):
                continue
            sid = int(fields[3])  # fields after the name: state ppid pgrp session ...
            if sid not in sids:
                with open(f"/proc/{name}/environ", "rb") as f:
                    if not marked(f.read().split(b"\0"), marks):
                        continue
                if sid not in spare:
                    sids.add(sid)
            found.append(int(name))
        except (OSError, IndexError, ValueError):
            continue
    return found


def marked(entries: list, marks: set) -> bool:
    return any(e == m or e.startswith(m + b"/") for e in entries for m in marks)


def coderun_cgroups(pid: int) -> set:
    """(controllers, path) of the cgroups coderun made that `pid` is in."""
    out = set()
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                if os.path.basename(path).startswith("coderun-"):
                    out.add((controllers, path))
    except (OSError, ValueError):
        pass
    return out


def remove_cgroups(cgroups: set) -> None:
    for controllers, path in cgroups:
        tops = [os.path.join(_CGROUP_FS, c) for c in controllers.split(",") if c]
        tops += [os.path.join(_CGROUP_FS, "unified"), _CGROUP_FS]
        for top in tops:
            target = top + path
            for _ in range(50):
                try:
                    os.rmdir(target)
                except FileNotFoundError:
                    break
                except OSError:  # its last processes are still on their way out
                    time.sleep(0.02)
                else:
                    break


def rmtree(path: str) -> None:
    """Remove a tree a sample may have made unreadable (chmod 000 directories)."""
    def fix(func, p, _exc):
        try:
            os.chmod(os.path.dirname(p), stat.S_IRWXU)
            os.chmod(p, stat.S_IRWXU)
        except OSError:
            pass
        try:
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p, ignore_errors=True)
            else:
                os.unlink(p)
        except FileNotFoundError:
            pass

    if os.path.lexists(path):
        shutil.rmtree(path, onerror=fix)


if __name__ == "__main__":
    main()
