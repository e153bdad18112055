"""A worker's child: the process forked for one sample (or one priming run). It starts a session of its
own, takes the sample's pipes, limits and folder, and runs `python -m pytest` there (coderun_pytest_run),
or, forked from a template, goes back into the template's paused pytest (coderun_template). It never
returns into the worker's loop: it leaves through Exit. Standalone (stdlib and pytest, Python 3.7).
"""

from __future__ import annotations

import contextlib
import gc
import os
import resource
import signal
import sys
import tempfile
from collections.abc import Callable
from typing import TYPE_CHECKING

from coderun_pytest_run import (
    REPORTER,
    Probe,
    call_pytest,
    child_env,
    enter_project,
    forget_folder,
    report_imports,
    sample_env,
    shutdown,
)

if TYPE_CHECKING:
    from coderun_worker import SampleServer


class Resume(BaseException):
    """Raised in a sample's child of a template, up to the pause, where pytest goes on for that sample."""


def set_dumpable(flag: int) -> None:
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, flag, 0, 0, 0)  # PR_SET_DUMPABLE


def run_child(w: SampleServer, req: dict, base: str, project: str, out_w: int, err_w: int, rep_w: int) -> None:
    def body() -> int:
        _isolate(w, req, project, out_w, err_w, rep_w)
        return _run_pytest(w, req, base, project, rep_w)

    run_then_exit(body)


def run_then_exit(body: Callable[[], int]) -> None:
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
        Exit.leave(code)


def resume_child(w: SampleServer, req: dict, base: str, project: str, out_w: int, err_w: int, rep_w: int) -> None:
    """A template's child: isolated like any other, given this sample's environment and report channel,
    then sent back into the paused pytest."""
    try:
        _isolate(w, req, project, out_w, err_w, rep_w)
        os.environ.update(sample_env(req, rep_w))
        tempfile.tempdir = None
        forget_folder(os.path.dirname(project))
        sys.modules[REPORTER]._arm()
    except BaseException:  # noqa: BLE001
        with contextlib.suppress(Exception):
            import traceback

            traceback.print_exc()
        os._exit(1)
    raise Resume


def _isolate(w: SampleServer, req: dict, project: str, out_w: int, err_w: int, rep_w: int) -> None:
    """A new session with the sample's pipes, limits and folder; nothing else of the worker's open, and
    nothing of the original the sample replaces in memory."""
    w.folders.forget(req["relfile"])
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
    close_fds_except(rep_w, Exit.fd)
    if req.get("cgroup"):
        with open(os.path.join(req["cgroup"], "cgroup.procs"), "w") as f:
            f.write("0")
    set_dumpable(1)  # its own /proc/self/fd must stay openable (the report channel is /dev/fd/N)
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as f:
        f.write("1000")  # a memory bomb takes the child down first, not the worker beside it
    _limits(w.cfg, float(req["timeout"]))
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGALRM, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.chdir(project)


def close_fds_except(*keep: int | None, low: int = 3) -> None:
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


class Exit:
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
            close_fds_except(low=0)
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


def _run_pytest(w: SampleServer, req: dict, base: str, project: str, rep_w: int) -> int:
    """`python -m pytest ARGS` in this already-started interpreter."""
    env = {**child_env(w, req, base, project), **sample_env(req, rep_w)}
    if req.get("prime"):  # the one run that writes bytecode, on the pristine tree
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        sys.dont_write_bytecode = False
    enter_project(w, req, base, project, env)
    before, probe = set(sys.modules), Probe()
    code = shutdown(call_pytest(req["args"], [probe] if req.get("prime") else None))
    if req.get("prime"):
        report_imports(rep_w, before, probe, base, w.cfg["harness"])
    return code

