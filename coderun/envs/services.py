"""Services a project's tests need (`tests.services`): real servers, on 127.0.0.1 only, each run with a free
port and a throwaway data directory, started before a test run and stopped (and their data removed) after it.

    with start_services(["postgresql", "redis"]) as running:
        env = running.env                 # PGHOST, PGPORT, …, REDIS_URL: what the tests are given

The local backend starts the host's programs (Debian's packages: postgresql, redis-server, etcd-server); the
docker backend installs the same packages in the image and runs this very file inside the container (`SOURCE`,
standard library only, any Python 3.7+): `python services.py start NAMES…` starts them and prints their
variables as JSON; `python services.py run NAMES… -- COMMAND…` runs a command with them and stops them after.
A sandbox that serves many samples keeps one instance per sandbox, so no two projects, and no two workers,
share a server or its data.

Variables the tests get (a manifest's `tests.env` may use them as `${NAME}`):
    postgresql  PGHOST PGPORT PGUSER PGDATABASE POSTGRESQL_URL   (user postgres, trust auth, database postgres)
    redis       REDIS_HOST REDIS_PORT REDIS_URL                   (no password, no persistence)
    etcd        ETCD_HOST ETCD_PORT ETCD_ENDPOINTS ETCDCTL_ENDPOINTS  (v3 API, one member)
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

try:
    from coderun.errors import ServiceError
except ImportError:  # run as a script inside a container (see the module docstring)
    class ServiceError(Exception):  # type: ignore[no-redef]
        def __init__(self, message: str, *, hint: str | None = None):
            super().__init__(message + (f"\n  hint: {hint}" if hint else ""))

HOST = "127.0.0.1"
READY_TIMEOUT = 60.0     # seconds a server may take to accept a real connection
STOP_TIMEOUT = 10.0      # seconds between the polite signal and SIGKILL
# The user a server runs as when coderun runs as root (PostgreSQL refuses to run as root).
_UNPRIVILEGED = ("postgres", "nobody")


@dataclass(frozen=True)
class Launch:
    """How one server is started: commands run once to prepare its data directory, then the server."""

    setup: tuple[tuple[str, ...], ...]
    server: tuple[str, ...]
    stop_signal: int = signal.SIGTERM


@dataclass(frozen=True)
class ServiceKind:
    """One kind of server: its Debian packages, its programs and how to run and probe it."""

    name: str
    apt: tuple[str, ...]                          # Debian packages holding the server
    programs: tuple[str, ...]                     # programs it needs, looked up by `find_programs`
    search: tuple[str, ...]                       # globs besides PATH where Debian puts them
    ports: int                                    # loopback ports it listens on (the first serves clients)
    launch: Callable[[dict[str, str], list[int], str], Launch]  # (programs, ports, data dir) -> Launch
    env: Callable[[int], dict[str, str]]          # client port -> variables for the tests

    def find_programs(self) -> dict[str, str]:
        """Each program's path on this machine; ServiceError naming the apt package when one is missing."""
        found = {}
        for prog in self.programs:
            path = shutil.which(prog) or next(
                (p for g in self.search for p in sorted(glob.glob(f"{g}/{prog}"), key=_version_key, reverse=True)
                 if os.access(p, os.X_OK)), None)
            if path is None:
                raise ServiceError(f"the {self.name} service needs the program {prog!r}, which is not installed",
                                   hint=f"install it: apt-get install {' '.join(self.apt)}")
            found[prog] = path
        return found


def _version_key(path: str) -> list[int]:
    """/usr/lib/postgresql/15/bin/postgres sorts after …/9.6/…: the newest installed version wins."""
    return [int(n) for n in re.findall(r"\d+", path)]


def _postgres_launch(progs: dict[str, str], ports: list[int], data: str) -> Launch:
    pgdata = f"{data}/pgdata"
    initdb = (progs["initdb"], "-D", pgdata, "-U", "postgres", "--auth=trust", "--encoding=UTF8",
              "--locale=C", "--no-sync")
    # No Unix socket (-k ''): only TCP on loopback; durability is of no use for throwaway data.
    server = (progs["postgres"], "-D", pgdata, "-h", HOST, "-p", str(ports[0]), "-k", "",
              "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
    return Launch(setup=(initdb,), server=server, stop_signal=signal.SIGINT)  # SIGINT: fast shutdown


def _redis_launch(progs: dict[str, str], ports: list[int], data: str) -> Launch:
    server = (progs["redis-server"], "--bind", HOST, "--port", str(ports[0]), "--save", "", "--appendonly", "no",
              "--dir", data, "--protected-mode", "no", "--daemonize", "no")
    return Launch(setup=(), server=server)


def _etcd_launch(progs: dict[str, str], ports: list[int], data: str) -> Launch:
    client, peer = (f"http://{HOST}:{p}" for p in ports)
    server = (progs["etcd"], "--name", "coderun", "--data-dir", f"{data}/etcd",
              "--listen-client-urls", client, "--advertise-client-urls", client,
              "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
              "--initial-cluster", f"coderun={peer}", "--initial-cluster-state", "new")
    return Launch(setup=(), server=server)


def _postgres_env(port: int) -> dict[str, str]:
    return {"PGHOST": HOST, "PGPORT": str(port), "PGUSER": "postgres", "PGDATABASE": "postgres",
            "POSTGRESQL_URL": f"postgresql://postgres@{HOST}:{port}/postgres"}


def _redis_env(port: int) -> dict[str, str]:
    return {"REDIS_HOST": HOST, "REDIS_PORT": str(port), "REDIS_URL": f"redis://{HOST}:{port}/0"}


def _etcd_env(port: int) -> dict[str, str]:
    url = f"http://{HOST}:{port}"
    return {"ETCD_HOST": HOST, "ETCD_PORT": str(port), "ETCD_ENDPOINTS": url, "ETCDCTL_ENDPOINTS": url}


KINDS: dict[str, ServiceKind] = {k.name: k for k in (
    ServiceKind("postgresql", apt=("postgresql",), programs=("initdb", "postgres"),
                search=("/usr/lib/postgresql/*/bin",), ports=1, launch=_postgres_launch, env=_postgres_env),
    ServiceKind("redis", apt=("redis-server",), programs=("redis-server",), search=(), ports=1,
                launch=_redis_launch, env=_redis_env),
    ServiceKind("etcd", apt=("etcd-server",), programs=("etcd",), search=(), ports=2,
                launch=_etcd_launch, env=_etcd_env),
)}


def kind(name: str) -> ServiceKind:
    try:
        return KINDS[name]
    except KeyError:
        raise ServiceError(f"unknown service {name!r}; one of: {', '.join(KINDS)}") from None


def apt_packages(names: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """The Debian packages an image needs for these services."""
    return tuple(dict.fromkeys(p for n in names for p in kind(n).apt))


# ---------------------------------------------------------------------------------------------
# Readiness: a real exchange with the server, in the protocol its clients speak. The function's source is
# also run inside containers (`PROBE_SCRIPT`), so it keeps to the standard library of any Python 3.


def probe(kind_name: str, host: str, port: int, timeout: float = 2.0) -> bool:
    """True when the server answers a real request: PostgreSQL accepts a startup message as user
    postgres (trust), Redis answers PING, etcd's /health says true."""
    import json
    import socket
    import struct
    import urllib.request

    try:
        if kind_name == "etcd":
            with urllib.request.urlopen(f"http://{host}:{port}/health", timeout=timeout) as r:
                return json.loads(r.read().decode()).get("health") == "true"
        with socket.create_connection((host, port), timeout=timeout) as s:
            if kind_name == "redis":
                s.sendall(b"PING\r\n")
                return s.recv(64).startswith(b"+PONG")
            body = struct.pack("!i", 196608) + b"user\0postgres\0database\0postgres\0\0"
            s.sendall(struct.pack("!i", len(body) + 4) + body)
            head = s.recv(9)  # 'R', length, auth code 0 = AuthenticationOk; 'E' while starting up
            return len(head) == 9 and head[:1] == b"R" and struct.unpack("!i", head[5:9])[0] == 0
    except (OSError, ValueError):
        return False


# ---------------------------------------------------------------------------------------------
# Running on this machine


@dataclass
class Running:
    """Servers started by `start_services`; `env` is what the tests get."""

    data: Path
    processes: list[tuple[str, subprocess.Popen, int]] = field(default_factory=list)  # (kind, process, signal)
    env: dict[str, str] = field(default_factory=dict)

    def stop(self) -> None:
        """Stop every server (its signal, then SIGKILL) and remove the data; safe to call twice."""
        for _name, proc, sig in reversed(self.processes):
            _stop(proc, sig)
        self.processes.clear()
        shutil.rmtree(self.data, ignore_errors=True)


def _stop(proc: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)
    try:
        proc.wait(STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@contextlib.contextmanager
def start_services(names: list[str] | tuple[str, ...]) -> Iterator[Running]:
    """Start the named services on this machine; stop them and delete their data on exit."""
    running = launch(names)
    try:
        yield running
    finally:
        running.stop()


def launch(names: list[str] | tuple[str, ...]) -> Running:
    """Start the named services on this machine (the caller calls `stop`); ServiceError if one cannot start."""
    kinds = [kind(n) for n in dict.fromkeys(names)]
    programs = {k.name: k.find_programs() for k in kinds}  # every missing package is reported before any start
    user = _server_user()
    running = Running(Path(tempfile.mkdtemp(prefix="coderun-services-", dir=_data_root(user))))
    try:
        if user is not None:
            os.chown(running.data, user.pw_uid, user.pw_gid)
        for k in kinds:
            _start_one(k, programs[k.name], running, user)
    except BaseException:
        running.stop()
        raise
    return running


def _server_user() -> pwd.struct_passwd | None:
    """None: run the servers as this user; as root, an unprivileged one (postgres, else nobody)."""
    if os.geteuid() != 0:
        return None
    for name in _UNPRIVILEGED:
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise ServiceError("coderun runs as root and this machine has neither a postgres nor a nobody user "
                       "to run services as")


def _data_root(user: pwd.struct_passwd | None) -> str | None:
    """Where the data directories go: the temp dir, unless the servers' user cannot reach it (a root-only
    /tmp); then the first shared temp dir it can."""
    if user is None:
        return None
    for root in (tempfile.gettempdir(), "/var/tmp", "/dev/shm"):
        parts = Path(root).resolve().parts
        if all(os.stat(Path(*parts[:i])).st_mode & 0o001 for i in range(1, len(parts) + 1)):
            return root
    raise ServiceError(f"no temp dir that the user {user.pw_name} may enter, for the services' data",
                       hint="set TMPDIR to a directory others may traverse (mode 1777, like /var/tmp)")


def _start_one(k: ServiceKind, programs: dict[str, str], running: Running, user: pwd.struct_passwd | None) -> None:
    data = running.data / k.name
    data.mkdir()
    as_user = {"preexec_fn": _drop_to(user)} if user else {}  # Popen's user= is 3.9+, this file runs on 3.7
    if user is not None:
        os.chown(data, user.pw_uid, user.pw_gid)
    log = data / "server.log"
    ports = free_ports(k.ports)
    how = k.launch(programs, ports, str(data))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
           "HOME": str(data), "TMPDIR": str(data)}
    with log.open("ab") as out:
        for cmd in how.setup:
            done = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                                  cwd=data, timeout=READY_TIMEOUT, **as_user)
            if done.returncode != 0:
                raise ServiceError(f"{k.name}: {Path(cmd[0]).name} failed (exit {done.returncode}):\n{_tail(log)}")
        proc = subprocess.Popen(how.server, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                env=env, cwd=data, start_new_session=True, **as_user)
    running.processes.append((k.name, proc, how.stop_signal))
    deadline = time.monotonic() + READY_TIMEOUT
    while not probe(k.name, HOST, ports[0]):
        if proc.poll() is not None:
            raise ServiceError(f"{k.name}: the server exited (code {proc.returncode}) before it answered:\n"
                               f"{_tail(log)}")
        if time.monotonic() > deadline:
            raise ServiceError(f"{k.name}: no answer on {HOST}:{ports[0]} after {READY_TIMEOUT:.0f}s:\n{_tail(log)}")
        time.sleep(0.05)
    running.env.update(k.env(ports[0]))


def _drop_to(user: pwd.struct_passwd) -> Callable[[], None]:
    def drop() -> None:  # in the child, before exec
        os.setgroups([])
        os.setgid(user.pw_gid)
        os.setuid(user.pw_uid)
    return drop


def free_ports(n: int) -> list[int]:
    """`n` distinct loopback ports free now (the kernel's choice; a server binds them right after)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind((HOST, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _tail(log: Path, lines: int = 12) -> str:
    try:
        return "\n".join("    " + ln for ln in log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


# ---------------------------------------------------------------------------------------------
# Variables


_REF = re.compile(r"\$\{([A-Z_][A-Z0-9_]*)\}")


def expand(env: Mapping[str, str], service_env: Mapping[str, str]) -> dict[str, str]:
    """`env` (a manifest's tests.env) with `${NAME}` replaced by the services' variables, which come first:
    e.g. DATABASE_URL: "postgresql://${PGUSER}@${PGHOST}:${PGPORT}/postgres". Other text is left alone."""
    out = dict(service_env)
    for key, value in env.items():
        out[key] = _REF.sub(lambda m: service_env.get(m.group(1), m.group(0)), value)
    return out


# ---------------------------------------------------------------------------------------------
# Inside a container


SOURCE = Path(__file__).read_text(encoding="utf-8")


def main(argv: list[str]) -> int:
    """`start NAMES…`: start, print {"env": …} as JSON and leave them running (the container's end stops
    them); `run NAMES… -- COMMAND…`: run COMMAND with them (its environment expanded), then stop them."""
    if argv[:1] == ["start"]:
        running = launch(argv[1:])
        print(json.dumps({"env": running.env, "data": str(running.data)}))
        return 0
    if argv[:1] == ["run"] and "--" in argv:
        cut = argv.index("--")
        with start_services(argv[1:cut]) as running:
            return subprocess.run(argv[cut + 1:], env=expand(os.environ, running.env)).returncode
    print("usage: services.py start NAMES... | run NAMES... -- COMMAND...", file=sys.stderr)
    return 2


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except ServiceError as e:
        print(f"coderun services: {e}", file=sys.stderr)
        sys.exit(3)
