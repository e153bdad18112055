"""The `docker` backend: the project image (coderun/envs/docker.py), one long-lived container per slot.

The container (what protects the host):
- `network_mode="none"`: no network interface but loopback (the engine's /etc/hosts names it `localhost`, as the
  host's does for the local backend; `network_disabled` would leave the image's empty file);
- a read-only image filesystem; writable tmpfs only at /scratch (the samples' copies), /tmp, /dev/shm and
  the sample user's home (emptied after each sample, as /tmp is);
- every capability dropped, `no-new-privileges`, memory (no swap), pids and CPU limits, no core files;
- its idle PID 1 (a zombie reaper) runs as `nobody`, samples run as the image's unprivileged user
  `coderun`, so a sample can neither signal PID 1 nor read or change coderun's own files;
- its life is tied to coderun's: PID 1's stdin is attached by the sandbox (`stdin_once`), so when the
  owning coderun process dies, even by SIGKILL, the engine closes that stdin, PID 1 exits and the
  container, started with `auto_remove`, is gone;
- labels `org.coderun.managed=1`, `org.coderun.run`, `org.coderun.owner` (host and pid), so containers
  of a crashed run can still be found (`cleanup_stale_containers`, run when a sandbox starts).

Each exec runs as `coderun` under `timeout -s KILL` (the wall-clock limit inside), and a host-side
watchdog kills the container when the exec still does not return (the limit outside; the container is
then replaced). After every exec, every process of `coderun` in the container is killed with
kill(-1, SIGKILL); after every sample, its copy and everything it left in /tmp, /dev/shm and /scratch
is deleted. The archive API cannot see tmpfs mounts, so files move through exec (base64 in, raw out).
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import json
import math
import os
import posixpath
import re
import socket
import threading
import time
import uuid

from coderun.envs import services
from coderun.errors import SandboxError, SandboxUnavailable, ServiceError
from coderun.harness.coderun_capped import CappedBuffer
from coderun.sandbox.base import ExecResult, Sandbox, SandboxSpec, check_exec_args
from coderun.sandbox.docker_scripts import (
    CLEAN,
    HARNESS,
    KILL_ALL,
    READ,
    REAPER,
    SCRATCH,
    USER_HOME,
    WRITE,
    WRITE_MANY,
)
from coderun.sandbox.process import SandboxProcess, WorkerLayout
from coderun.sandbox.trees import repack

SAMPLE_USER = "coderun"      # the image's unprivileged user (images/base.Dockerfile), owner of /work/project
IDLE_USER = "65534:65534"    # nobody: PID 1, out of the sample user's reach
LABEL = "org.coderun"
SERVICES = "/services"        # a tmpfs for the services' data (tests.services), when the project has any
_WATCHDOG_GRACE = 20.0       # seconds past the exec's own limit before the container is killed
_CHUNK = 64 * 1024           # bytes per write_file exec (base64 stays under the 128 KiB argv-string limit)
_READ_LIMIT = 256 << 20
_CONTROL_TIMEOUT = 120
_BATCH = 1 << 20               # base64 bytes per write_files exec (the whole argv stays under ARG_MAX)

def _client(timeout: int):
    import docker
    import docker.errors

    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except docker.errors.DockerException as e:
        raise SandboxUnavailable(f"no Docker engine answers ({type(e).__name__}: {str(e).splitlines()[0][:200]})",
                                 hint="start one (here: `.ci/docker-setup.sh`), or use `--backend local`") from None
    return client


def _owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class DockerSandbox(Sandbox):
    name = "docker"

    def __init__(self, spec: SandboxSpec):
        super().__init__(spec)
        self._api = None          # control calls (short HTTP timeout)
        self._stream_api = None   # exec output streams (no HTTP timeout: the watchdog bounds them)
        self._container_id: str | None = None
        self._owner_link = None   # the attach socket of PID 1's stdin: its end is the container's end
        self._workdirs: set[str] = set()
        self._lost: set[str] = set()     # workdirs of a container the watchdog replaced
        self._closed = False
        self._tree: bytes | None = None  # the pristine tree (pristine_tree), read once

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        if self._container_id is not None:
            return
        if not self.spec.image:
            raise SandboxUnavailable(f"docker sandbox for {self.spec.project}: no image given",
                                     hint=f"build it: `coderun images build {self.spec.project}`")
        client = _client(_CONTROL_TIMEOUT)
        self._api = client.api
        self._stream_api = _client(24 * 3600).api
        cleanup_stale_containers(client)
        self._container_id = self._create_container()
        atexit.register(self.close)
        self._closed = False

    def _create_container(self) -> str:
        import docker.errors
        import docker.types

        lim = self.spec.limits
        name = re.sub(r"[^a-zA-Z0-9_.-]", "-", f"coderun-{self.spec.run_id}-{self.spec.project}-{self.spec.slot}")
        name = f"{name}-{uuid.uuid4().hex[:6]}"
        small = max(lim.scratch_mb // 4, 64)
        tmpfs = {SCRATCH: f"rw,exec,nosuid,nodev,size={lim.scratch_mb}m,mode=1777",
                 "/tmp": f"rw,exec,nosuid,nodev,size={small}m,mode=1777",
                 USER_HOME: f"rw,nosuid,nodev,size={small}m,uid=1000,gid=1000"}
        if self.spec.services:  # the servers' data: out of the per-sample clean-up of /tmp and /scratch
            tmpfs[SERVICES] = f"rw,nosuid,nodev,size={max(lim.scratch_mb // 4, 256)}m,mode=1777"
        host_config = self._api.create_host_config(
            network_mode="none", cap_drop=["ALL"], security_opt=["no-new-privileges"], read_only=True,
            tmpfs=tmpfs,
            mem_limit=f"{lim.memory_mb}m", memswap_limit=f"{lim.memory_mb}m", pids_limit=lim.pids,
            nano_cpus=int(lim.cpus * 1e9), ipc_mode="private", auto_remove=True,
            ulimits=[docker.types.Ulimit(name="core", soft=0, hard=0),
                     docker.types.Ulimit(name="fsize", soft=lim.file_size_mb << 20, hard=lim.file_size_mb << 20)])
        labels = {f"{LABEL}.managed": "1", f"{LABEL}.run": self.spec.run_id, f"{LABEL}.owner": _owner(),
                  f"{LABEL}.project": self.spec.project, f"{LABEL}.slot": str(self.spec.slot)}
        try:
            created = self._api.create_container(
                self.spec.image, command=[self.spec.python, "-I", "-c", REAPER], user=IDLE_USER,
                name=name, labels=labels, host_config=host_config,
                working_dir="/", environment={"PYTHONDONTWRITEBYTECODE": "1"},
                stdin_open=True)  # not detached: docker-py then sets StdinOnce
            self._hold(created["Id"])
            self._api.start(created["Id"])
        except docker.errors.ImageNotFound:
            raise SandboxUnavailable(f"docker image {self.spec.image} is not built",
                                     hint=f"build it: `coderun images build {self.spec.project}`") from None
        except docker.errors.DockerException as e:
            raise SandboxError(f"cannot start a container from {self.spec.image}: {e}") from None
        self._container_id = created["Id"]
        code, _, err, _, _ = self._raw(["mkdir", "-p", HARNESS], user="root", timeout=60)
        if code != 0:
            raise SandboxError(f"container {name} is not usable: {err.decode(errors='replace')[-300:]}")
        self._lost |= self._workdirs
        self._workdirs.clear()
        if self.spec.services:
            self.service_env = self._start_services()
        return created["Id"]

    def _hold(self, cid: str) -> None:
        """Attach to PID 1's stdin (before it starts) and keep the socket open as long as the sandbox."""
        self._release()
        self._owner_link = self._api.attach_socket(cid, params={"stdin": 1, "stream": 1})

    def _release(self) -> None:
        link, self._owner_link = self._owner_link, None
        for sock in (getattr(link, "_sock", None), link):
            with contextlib.suppress(Exception):
                if sock is not None:
                    sock.close()

    def _start_services(self) -> dict[str, str]:
        """Start the project's services in the container, as `nobody` (so the kill of every sample
        process after an exec spares them), on its own loopback; returns their variables."""
        script = f"{HARNESS}/coderun_services.py"
        self.write_file(script, services.SOURCE.encode())
        code, out, err, _, _ = self._raw(
            [self.spec.python, "-I", script, "start", *self.spec.services], user=IDLE_USER, text=True,
            env={"TMPDIR": SERVICES, "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"},
            timeout=services.READY_TIMEOUT * len(self.spec.services) + 30)
        if code != 0:
            raise ServiceError(f"{self.spec.project}: the services {', '.join(self.spec.services)} did not start "
                               f"in the container (exit {code}): {err.strip()[-800:]}",
                               hint=f"rebuild the image (`coderun images build {self.spec.project} --force`) if "
                                    "it was built before the manifest named its services")
        return json.loads(out.strip().splitlines()[-1])["env"]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            atexit.unregister(self.close)
        cid, self._container_id = self._container_id, None
        if cid and self._api is not None:
            with contextlib.suppress(Exception):
                self._api.remove_container(cid, force=True, v=True)
        self._release()
        self._workdirs.clear()

    def _restart(self) -> None:
        """Replace a container the watchdog had to kill (its state is unknown)."""
        cid, self._container_id = self._container_id, None
        if cid:
            with contextlib.suppress(Exception):
                self._api.remove_container(cid, force=True, v=True)
        self._container_id = self._create_container()

    def harness_dir(self) -> str:
        self._cid()
        return HARNESS

    def _cid(self) -> str:
        if self._container_id is None:
            raise SandboxError("docker sandbox used before start() or after close()")
        return self._container_id

    # -- workdirs ----------------------------------------------------------------------------

    def new_workdir(self) -> str:
        """A copy of the pristine tree, written by the sample user from the tar coderun holds: the image's
        tree is readable by root only (no sample reads the originals there)."""
        base = f"{SCRATCH}/w-{uuid.uuid4().hex[:10]}"
        code, err = self._feed(
            ["sh", "-c", 'mkdir -m 700 "$1" "$1/home" "$1/tmp" "$1/project" && '
                         'tar --no-same-owner -xpf - -C "$1/project"', "sh", base], self.pristine_tree(), timeout=600)
        if code != 0:
            raise SandboxError(f"cannot copy {self.spec.project_dir} in the container: {err[-300:]}")
        self._workdirs.add(base)
        return f"{base}/project"

    def pristine_tree(self) -> bytes:
        """The image's tree, read through the engine's archive API (it reads as root, outside the sandbox)."""
        import docker.errors

        if self._tree is None:
            try:
                chunks, _ = self._api.get_archive(self._cid(), self.spec.project_dir)
                self._tree = repack(b"".join(chunks), posixpath.basename(self.spec.project_dir.rstrip("/")))
            except docker.errors.DockerException as e:
                raise SandboxError(f"cannot read {self.spec.project_dir} from the container: {e}") from None
        return self._tree

    def _feed(self, cmd: list[str], data: bytes, *, timeout: float) -> tuple[int, str]:
        """Run `cmd` as the sample user with `data` on its stdin (streamed, not staged in a file); returns its
        exit code and the tail of its output."""
        import docker.errors
        from docker.utils.socket import frames_iter

        try:
            exec_id = self._api.exec_create(self._cid(), ["timeout", "-s", "KILL", str(math.ceil(timeout)), *cmd],
                                            user=SAMPLE_USER, stdin=True, stdout=True, stderr=True)["Id"]
            sock = self._stream_api.exec_start(exec_id, socket=True)
            raw = getattr(sock, "_sock", sock)
            raw.sendall(data)
            raw.shutdown(socket.SHUT_WR)
            out = CappedBuffer(64 << 10)
            for _stream, chunk in frames_iter(sock, tty=False):
                out.feed(chunk)
            sock.close()
            code = self._api.exec_inspect(exec_id)["ExitCode"]
        except (OSError, docker.errors.DockerException) as e:
            raise SandboxError(f"docker exec with input failed: {e}") from None
        self._kill_leftovers()
        return (-1 if code is None else code), out.text()

    def remove_workdir(self, path: str) -> None:
        base = posixpath.dirname(path)
        if base in self._lost:  # its container was replaced: already gone
            self._lost.discard(base)
            return
        if base not in self._workdirs:
            raise SandboxError(f"docker sandbox: {path} is not a workdir of this sandbox")
        self._workdirs.discard(base)
        # not under `timeout`: the kill(-1) at its start would take the wrapper down with the sample
        code, _, err, timed_out, _ = self._raw([self.spec.python, "-I", "-c", CLEAN, *sorted(self._workdirs)],
                                              timeout=300, wrap=False)
        if code != 0 or timed_out:
            self._restart()  # could not clean up: start from a fresh container rather than leak state

    # -- files -------------------------------------------------------------------------------

    def write_file(self, path: str, data: bytes) -> None:
        user = "root" if path.startswith(HARNESS + "/") else SAMPLE_USER
        chunks = [data[i:i + _CHUNK] for i in range(0, len(data), _CHUNK)] or [b""]
        for i, chunk in enumerate(chunks):
            code, _, err, _, _ = self._raw(
                [self.spec.python, "-I", "-c", WRITE, path, "wb" if i == 0 else "ab",
                 base64.b64encode(chunk).decode()], user=user, timeout=120)
            if code != 0:
                raise SandboxError(f"cannot write {path} in the container: {err.decode(errors='replace')[-300:]}")

    def write_files(self, files: dict[str, bytes]) -> None:
        """Small files in one exec per batch and per owner (a worker ships ten files at start)."""
        batches: dict[str, list[list[str]]] = {}
        for path, data in files.items():
            if len(data) > _CHUNK:
                self.write_file(path, data)
                continue
            user = "root" if path.startswith(HARNESS + "/") else SAMPLE_USER
            mine = batches.setdefault(user, [[]])
            if sum(len(a) for a in mine[-1]) > _BATCH:
                mine.append([])
            mine[-1] += [path, base64.b64encode(data).decode()]
        for user, argvs in batches.items():
            for args in argvs:
                code, _, err, _, _ = self._raw([self.spec.python, "-I", "-c", WRITE_MANY, *args], user=user,
                                               timeout=120)
                if code != 0:
                    raise SandboxError(f"cannot write {args[0::2]} in the container: "
                                       f"{err.decode(errors='replace')[-300:]}")

    def read_file(self, path: str) -> bytes:
        code, out, err, _, truncated = self._raw([self.spec.python, "-I", "-c", READ, path, str(_READ_LIMIT)],
                                                 timeout=300, limit=_READ_LIMIT + 1024)
        if code == 2:
            raise FileNotFoundError(f"{path}: {err.decode(errors='replace')[-200:]}")
        if code != 0 or truncated:
            raise SandboxError(f"cannot read {path} in the container: {err.decode(errors='replace')[-300:]}")
        return out

    # -- exec --------------------------------------------------------------------------------

    def exec(self, cmd: list[str], *, cwd: str, env: dict[str, str] | None = None, timeout: float,
             stdin: bytes | None = None, output_limit: int | None = None) -> ExecResult:
        check_exec_args(cmd, timeout)
        base = posixpath.dirname(cwd) if posixpath.dirname(cwd) in self._workdirs else SCRATCH
        full_env = {
            "PATH": f"{posixpath.dirname(self.spec.python)}:/usr/local/bin:/usr/bin:/bin",
            "HOME": f"{base}/home" if base != SCRATCH else "/tmp",
            "TMPDIR": f"{base}/tmp" if base != SCRATCH else "/tmp",
            "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
            **(env or {}),
        }
        full_env = self.with_services(full_env)
        argv = cmd
        if stdin is not None:
            feed = f"/tmp/.stdin-{uuid.uuid4().hex}"
            self.write_file(feed, stdin)
            argv = ["sh", "-c", 'f="$1"; shift; exec "$@" < "$f"', "sh", feed, *cmd]
        started = time.monotonic()
        code, out, err, timed_out, truncated = self._raw(
            argv, cwd=cwd, env=full_env, timeout=timeout, limit=output_limit or self.spec.limits.output_limit,
            text=True)
        return ExecResult(returncode=code, stdout=out, stderr=err, timed_out=timed_out, truncated=truncated,
                          duration=time.monotonic() - started)

    def _raw(self, cmd: list[str], *, user: str = SAMPLE_USER, cwd: str = "/", env: dict[str, str] | None = None,
             timeout: float, limit: int = 16 << 20, text: bool = False, wrap: bool = True):
        """Run cmd under `timeout -s KILL` with a host-side watchdog, then kill every process of the
        sample user. Returns (exit code, stdout, stderr, timed out, truncated)."""
        import docker.errors

        cid = self._cid()
        argv = ["timeout", "-s", "KILL", str(math.ceil(timeout)), *cmd] if wrap else cmd
        out, err = CappedBuffer(limit), CappedBuffer(limit)
        started = time.monotonic()
        try:
            exec_id = self._api.exec_create(cid, argv, user=user, workdir=cwd, environment=env or {},
                                            stdout=True, stderr=True, stdin=False)["Id"]
        except docker.errors.DockerException as e:
            raise SandboxError(f"docker exec failed to start: {e}") from None
        failure: list[BaseException] = []
        reader = threading.Thread(target=self._pump, args=(exec_id, out, err, failure), daemon=True)
        reader.start()
        reader.join(timeout + _WATCHDOG_GRACE)
        watchdog_fired = reader.is_alive()
        if watchdog_fired:
            # `timeout` itself was killed or the exec hangs: kill the container from outside.
            with contextlib.suppress(docker.errors.DockerException):
                self._api.kill(cid)
            reader.join(30)
            self._restart()
            code = -9
        else:
            if failure:
                raise SandboxError(f"docker exec stream broke: {failure[0]}")
            try:
                code = self._api.exec_inspect(exec_id)["ExitCode"]
            except docker.errors.DockerException as e:
                raise SandboxError(f"cannot read the exit code of a docker exec: {e}") from None
            if code is None:
                raise SandboxError("docker exec ended without an exit code")
            if user == SAMPLE_USER:
                self._kill_leftovers()
        elapsed = time.monotonic() - started
        timed_out = watchdog_fired or (code in (124, 137) and elapsed >= timeout - 0.5)
        truncated = out.truncated or err.truncated
        if text:
            return code, out.text(), err.text(), timed_out, truncated
        return code, bytes(out.head) + bytes(out.tail), bytes(err.head) + bytes(err.tail), timed_out, truncated

    def _pump(self, exec_id: str, out: CappedBuffer, err: CappedBuffer, failure: list) -> None:
        try:
            for stdout, stderr in self._stream_api.exec_start(exec_id, stream=True, demux=True):
                if stdout:
                    out.feed(stdout)
                if stderr:
                    err.feed(stderr)
        except Exception as e:  # reported to the caller as a broken sandbox
            failure.append(e)

    def start_process(self, argv: list[str], *, env: dict[str, str], marker: str) -> DockerProcess:
        """A `docker exec` with stdin open; `marker` is not needed: every process of the sample user
        is killed when it closes."""
        import docker.errors

        try:
            exec_id = self._api.exec_create(self._cid(), argv, user=SAMPLE_USER, workdir="/", environment=env,
                                            stdout=True, stderr=True, stdin=True, tty=False)["Id"]
            sock = self._stream_api.exec_start(exec_id, socket=True)
        except docker.errors.DockerException as e:
            raise SandboxError(f"cannot start a worker in the container: {e}") from None
        return DockerProcess(sock, self._kill_leftovers)

    def worker_layout(self) -> WorkerLayout:
        """The container enforces the limits; the worker empties the shared tmpfs folders after each
        sample and kills every other process of the sample user."""
        scratch = f"{SCRATCH}/wk-{uuid.uuid4().hex[:10]}"
        return WorkerLayout(scratch=scratch, home="/tmp", kill_uid=True,
                            clean=("/tmp", "/dev/shm", SCRATCH, USER_HOME), keep=(HARNESS, scratch))

    def _kill_leftovers(self) -> None:
        import docker.errors

        try:
            exec_id = self._api.exec_create(self._cid(), [self.spec.python, "-I", "-c", KILL_ALL],
                                            user=SAMPLE_USER)["Id"]
            self._api.exec_start(exec_id)
        except docker.errors.DockerException as e:
            raise SandboxError(f"cannot kill a sample's leftover processes: {e}") from None


class DockerProcess(SandboxProcess):
    """The attach socket of `docker exec`: our writes are the process's stdin; its output comes in frames
    of an 8-byte header (stream 1 or 2, big-endian length) and a payload."""

    def __init__(self, sock, kill_all) -> None:
        super().__init__()
        self.sock, self._kill_all = sock, kill_all
        self.raw = getattr(sock, "_sock", sock)
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        from docker.utils.socket import frames_iter

        with contextlib.suppress(Exception):  # any end of the stream is the process's end
            for stream, data in frames_iter(self.sock, tty=False):
                if stream == 1:
                    self._feed(data)
                else:
                    self._stderr.feed(data)
        self._ended()

    def send(self, data: bytes) -> None:
        self.raw.sendall(data)

    def close(self) -> None:
        """Close its stdin (the worker cleans up and exits at EOF), then kill what is left of it."""
        with contextlib.suppress(Exception):
            self.raw.close()
        with contextlib.suppress(Exception):
            self.sock.close()
        with contextlib.suppress(Exception):
            self._kill_all()


def cleanup_stale_containers(client=None) -> list[str]:
    """Remove coderun containers whose owning process (on this host) no longer runs."""
    import docker.errors

    client = client or _client(_CONTROL_TIMEOUT)
    removed = []
    host = socket.gethostname()
    try:
        containers = client.api.containers(all=True, filters={"label": f"{LABEL}.managed=1"})
    except docker.errors.DockerException as e:
        raise SandboxError(f"cannot list containers: {e}") from None
    for c in containers:
        owner = (c.get("Labels") or {}).get(f"{LABEL}.owner", "")
        owner_host, _, pid = owner.rpartition(":")
        if owner_host != host or not pid.isdigit():
            continue
        if int(pid) != os.getpid() and not os.path.exists(f"/proc/{pid}"):
            with contextlib.suppress(docker.errors.DockerException):
                client.api.remove_container(c["Id"], force=True, v=True)
                removed.append(c["Id"])
    return removed
