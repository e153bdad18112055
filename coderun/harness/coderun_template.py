"""Templates: pytest configured once per task (see docs/evaluation.md, "Executors and speed").

A forked *template* sets up the child's state in a pristine copy, runs pytest.main and pauses in
pytest_load_initial_conftests, before any conftest or test module is imported (Pause); each sample's
child is then forked from the template and returns from that hook into pytest, in its own copy
(coderun_child.resume_child). The template answers the requests it is given exactly as the worker
would (through the worker, which relays its answer lines: Templates.delegate); a task whose
configuration imported project code, started a thread or has another outermost wrapper of that hook is
run without a template. Standalone (stdlib and pytest, Python 3.7): imported by the worker.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import select
import signal
import sys
import tempfile
import threading
import time
from typing import TYPE_CHECKING

import coderun_protocol as protocol
import pytest
from coderun_child import Resume, run_then_exit
from coderun_priming import prime, unprimed
from coderun_pytest_run import (
    REPORTER,
    call_pytest,
    child_env,
    enter_project,
    import_root,
    map_modules,
    project_packages,
    shutdown,
)

if TYPE_CHECKING:
    from coderun_worker import SampleServer


class Templates:
    """The worker's side: the template of the current task, and the tasks a template refused."""

    def __init__(self, worker: SampleServer):
        self.worker = worker
        self.current: Template | None = None
        self.refused: set[str] = set()   # task keys a template refused

    def delegate(self, req: dict) -> bytes | None:
        """The answer line of this task's template, started when needed; None: run the sample here.
        Priming (new test files) happens here first: it forks, and the sweep after it would end a
        template, so the template is stopped first and started afterwards."""
        key = _template_key(req)
        if not req.get("template", True):  # a one-off run (task verification): no template to set up
            self.stop()
            return None
        if self.current is not None and (self.current.key != key or unprimed(self.worker, req)):
            self.stop()
        req["prime_s"] = prime(self.worker, req)
        if self.current is None and key not in self.refused:
            self.current = self.start(req, key)
        if self.current is None:
            return None
        line = self.current.ask(req)
        if line is None:  # the template died: this sample, and the task's next ones, run here
            self.stop()
            self.refused.add(key)
        return line

    def start(self, req: dict, key: str) -> Template | None:
        w = self.worker
        w.folders.folder = None  # the template uses the sample folder from now on
        to_r, to_w = os.pipe()
        back_r, back_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(to_w)
            os.close(back_r)
            run_then_exit(lambda: become_template(w, req, to_r, back_w))
        os.close(to_r)
        os.close(back_w)
        template = Template(key, pid, to_w, back_r)
        ready = template.first_line(float(req["timeout"]))
        if protocol.is_ready(ready):
            return template
        template.stop()
        self.refused.add(key)
        return None

    def stop(self) -> None:
        if self.current is not None:
            self.current.stop()
            self.current = None


def become_template(w: SampleServer, req: dict, cmd_fd: int, answer_fd: int) -> int:
    """In the forked copy: configure pytest for this task in a pristine copy, as a child would, and
    pause when pytest is about to load the project's conftest files (see Pause). Returns only in a
    sample's child, with pytest's exit code; the template itself ends inside the pause."""
    w.proto_in, w.proto_out = os.fdopen(cmd_fd, "rb"), answer_fd
    w.spare, w.paused = {os.getppid()}, True
    w.folders.forget(req["relfile"])  # the task's file: its samples' children are forked from here
    req.pop("source", None)  # nor the first sample's code (this frame lives as long as the template)
    req.pop("files", None)
    gc.freeze()  # see coderun_child._isolate
    base, project = w.folders.pristine()
    output = ConfigOutput()
    os.chdir(project)
    env = child_env(w, req, base, project)
    env.pop("CODERUN_COLLECT_TIMEOUT", None)  # armed in each child as it resumes, never in the waiting template
    enter_project(w, req, base, project, env)
    pause = Pause(w, set(sys.modules), project_packages(import_root(w, project)), output)
    code = call_pytest(req["args"], [pause])
    if not pause.resumed:  # pytest ended before the pause: the task runs without a template
        output.collect()
        w.send(protocol.not_ready(f"pytest ended before loading conftest files (exit {code})"))
        return 0
    return shutdown(code)


def serve_template(w: SampleServer) -> None:
    """The template's loop: returns in nothing but a sample's child, by raising Resume."""
    w.send(protocol.ready())
    w.answer_all(delegate=False)
    os._exit(0)


class Template:
    """The worker's side of a template: its pid and the two pipes (requests in, answer lines out)."""

    def __init__(self, key: str, pid: int, to_fd: int, from_fd: int):
        self.key, self.pid, self.to_fd = key, pid, to_fd
        self.reader = os.fdopen(from_fd, "rb")

    def first_line(self, timeout: float) -> dict:
        """The template's word on whether it paused ({"ready": true}); {} when it did not say in time."""
        if not select.select([self.reader], [], [], timeout)[0]:
            return {}
        with contextlib.suppress(ValueError):
            return protocol.decode(self.reader.readline() or b"{}")
        return {}

    def ask(self, req: dict) -> bytes | None:
        """The template's answer line for `req`, as it wrote it; None when the template is gone."""
        view = memoryview(protocol.encode(req))
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


class ConfigOutput:
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


class Pause:
    """The template's plugin: outermost wrapper of pytest_load_initial_conftests, the hook in which pytest
    loads the project's conftest files (and capturing starts). Everything before it depends only on the
    arguments, the environment and the pristine tree, so it is done once per task. The template pauses
    here and forks a child per sample, which goes on with pytest from this point in its own copy."""

    def __init__(self, worker: SampleServer, before: set[str], packages: set[str], output: ConfigOutput):
        self.worker, self.before, self.packages, self.output = worker, before, packages, output
        self.resumed = False

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_load_initial_conftests(self, early_config, parser, args):
        why = self.refusal(early_config)
        self.output.collect()
        map_modules()  # the plugins configuring pytest imported
        if why:
            self.worker.send(protocol.not_ready(why))
            os._exit(0)
        sys.modules["coderun_integrity"].prepare()  # what to watch, found once, not in every session
        try:
            serve_template(self.worker)
        except Resume:
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
        if not hasattr(sys.modules.get(REPORTER), "_arm"):
            return f"{REPORTER} was not loaded"
        for impl in config.hook.pytest_load_initial_conftests.get_hookimpls():
            wraps = getattr(impl, "hookwrapper", False) or getattr(impl, "wrapper", False)
            if impl.plugin is not self and wraps and impl.tryfirst:
                return f"plugin {impl.plugin_name} wraps pytest_load_initial_conftests first, too"
        return None


def _template_key(req: dict) -> str:
    """Samples with the same key share a template: same arguments, environment and spliced file."""
    return json.dumps([req["args"], req.get("env") or {}, req["relfile"]], sort_keys=True)


