"""Services (tests.services) as real servers on 127.0.0.1: PostgreSQL, Redis and etcd from the host's Debian
packages (CI installs postgresql, redis-server and etcd-server), never mocks."""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import urllib.request

import pytest

from coderun.config import load_settings
from coderun.envs.local import build_local_env, load_baseline
from coderun.envs.services import KINDS, expand, launch, probe, start_services
from coderun.errors import ServiceError
from coderun.manifests.schema import load_manifest
from coderun.records import TaskStatus
from coderun.sandbox import SandboxSpec, create_sandbox
from coderun.tasks import build_tasks, load_tasks
from tests.helpers import write_tree

pytestmark = pytest.mark.integration  # a venv, a sandbox or a project's tests in every test


def _installed(name: str) -> bool:
    try:
        KINDS[name].find_programs()
    except ServiceError:
        return False
    return True


ALL = ["postgresql", "redis", "etcd"]
needs_all = pytest.mark.skipif(not all(map(_installed, ALL)),
                               reason="apt-get install postgresql redis-server etcd-server")

# Clients in the standard library only, speaking each server's own protocol (psql for PostgreSQL).
CLIENTS = '''import base64
import json
import os
import socket
import subprocess
import urllib.request


def redis_roundtrip(key, value):
    """Store value under key in the Redis of REDIS_HOST/REDIS_PORT and return what GET reads back."""
    with socket.create_connection((os.environ["REDIS_HOST"], int(os.environ["REDIS_PORT"]))) as s:
        s.sendall(f"SET {key} {value}\\r\\nGET {key}\\r\\n".encode())
        reply = b""
        while reply.count(b"\\r\\n") < 3:
            reply += s.recv(4096)
    return reply.split(b"\\r\\n")[2].decode()


def pg_scalar(sql):
    """Run one SQL statement with psql against the database named by DSN and return its one value."""
    out = subprocess.run(["psql", "-At", "-d", os.environ["DSN"], "-c", sql],
                         capture_output=True, text=True, check=True)
    value = out.stdout.strip()
    return value


def etcd_roundtrip(key, value):
    """Put key=value into etcd (its v3 JSON gateway at ETCD_ENDPOINTS) and return the value read back."""
    url = os.environ["ETCD_ENDPOINTS"]
    enc = lambda s: base64.b64encode(s.encode()).decode()
    _post(url + "/v3/kv/put", {"key": enc(key), "value": enc(value)})
    kvs = _post(url + "/v3/kv/range", {"key": enc(key)})["kvs"]
    return base64.b64decode(kvs[0]["value"]).decode()


def _post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())
'''

TESTS = '''from kv.clients import etcd_roundtrip, pg_scalar, redis_roundtrip


def test_redis():
    assert redis_roundtrip("colour", "blue") == "blue"
    assert redis_roundtrip("colour", "green") == "green"


def test_postgres():
    assert pg_scalar("select 6 * 7") == "42"
    pg_scalar("create table if not exists t (x int)")
    assert pg_scalar("select count(*) from pg_tables where tablename = 't'") == "1"


def test_etcd():
    assert etcd_roundtrip("/a", "one") == "one"
    assert etcd_roundtrip("/a", "two") == "two"
'''

MANIFEST = """name: kv
source: {path: kv}
python: '3.11'
tests:
  paths: [tests]
  services: [postgresql, redis, etcd]
  env: {DSN: "postgresql://${PGUSER}@${PGHOST}:${PGPORT}/postgres"}
tasks:
  discover: {enabled: false}
  targets:
  - function: kv/clients.py::redis_roundtrip
  - function: kv/clients.py::pg_scalar
  - function: kv/clients.py::etcd_roundtrip
"""


def _redis_get(env: dict[str, str], key: str) -> bytes:
    with socket.create_connection((env["REDIS_HOST"], int(env["REDIS_PORT"]))) as s:
        s.sendall(f"GET {key}\r\n".encode())
        return s.recv(256)


def _redis_set(env: dict[str, str], key: str, value: str) -> bytes:
    with socket.create_connection((env["REDIS_HOST"], int(env["REDIS_PORT"]))) as s:
        s.sendall(f"SET {key} {value}\r\n".encode())
        return s.recv(256)


@needs_all
def test_each_service_answers_its_own_client_and_is_gone_after():
    with start_services(ALL) as running:
        env = running.env
        data = running.data
        psql = subprocess.run(["psql", "-At", "-c", "select 40 + 2"], env={**os.environ, **env},
                              capture_output=True, text=True)
        assert psql.stdout.strip() == "42", psql.stderr
        assert _redis_set(env, "k", "v") == b"+OK\r\n"
        assert _redis_get(env, "k") == b"$1\r\nv\r\n"
        with urllib.request.urlopen(f"{env['ETCD_ENDPOINTS']}/v3/kv/put", timeout=10, data=json.dumps(
                {"key": base64.b64encode(b"x").decode(), "value": base64.b64encode(b"y").decode()}).encode()) as r:
            assert "header" in json.loads(r.read())
        assert env["PGHOST"] == env["REDIS_HOST"] == env["ETCD_HOST"] == "127.0.0.1"
        ports = [int(env[k]) for k in ("PGPORT", "REDIS_PORT", "ETCD_PORT")]
        assert data.is_dir()
    assert not data.exists()
    for name, port in zip(ALL, ports, strict=True):
        assert not probe(name, "127.0.0.1", port, timeout=0.5), f"{name} still answers on {port}"


_REDIS_CMD = ("import os, socket, sys\n"
              "with socket.create_connection((os.environ['REDIS_HOST'], int(os.environ['REDIS_PORT']))) as s:\n"
              "    s.sendall(sys.argv[1].encode() + b'\\r\\n')\n"
              "    print(s.recv(256))\n")


def _redis_in(sb, work: str, command: str) -> str:
    """A Redis command sent from inside the sandbox (its services listen on its own loopback)."""
    return sb.exec(["python3", "-c", _REDIS_CMD, command], cwd=work, timeout=30).stdout.strip()


@needs_all
def test_sandboxes_get_separate_instances(tmp_path):
    """Two sandboxes (two workers, or two projects) never share a server or its data."""
    (tmp_path / "tree").mkdir()
    spec = SandboxSpec(project="p", project_dir=str(tmp_path / "tree"), python=shutil.which("python3"),
                       services=("redis",))
    a, b = create_sandbox("local", spec), create_sandbox("local", spec)
    with a, b:
        wa, wb = a.new_workdir(), b.new_workdir()
        assert _redis_in(a, wa, "SET secret mine") == "b'+OK\\r\\n'"
        assert _redis_in(a, wa, "GET secret") == "b'$4\\r\\nmine\\r\\n'"
        assert _redis_in(b, wb, "GET secret") == "b'$-1\\r\\n'"  # nil: b's server has never seen it
        # a test run sees the variables, and its tests.env may refer to them
        res = a.exec(["python3", "-c", "import os; print(os.environ['URL'])"], cwd=wa, timeout=30,
                     env={"URL": "redis://${REDIS_HOST}:${REDIS_PORT}/1"})
        assert res.stdout.strip() == f"redis://127.0.0.1:{a.service_env['REDIS_PORT']}/1"
        port = int(a.service_env["REDIS_PORT"])
        if a.isolated:  # in the sandbox's network namespace: nothing outside it reaches the server
            assert not probe("redis", "127.0.0.1", port, timeout=0.5)
    assert not probe("redis", "127.0.0.1", port, timeout=0.5)


def test_missing_program_names_the_apt_package(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on PATH; redis-server has no other place to look
    with pytest.raises(ServiceError) as e:
        launch(["redis"])
    assert "redis-server" in e.value.message and "apt-get install redis-server" in (e.value.hint or "")


def test_expand_replaces_only_service_references():
    svc = {"PGHOST": "127.0.0.1", "PGPORT": "5999"}
    out = expand({"DSN": "postgresql://${PGHOST}:${PGPORT}/db", "RAW": "$HOME ${NOT_A_SERVICE} $$"}, svc)
    assert out == {**svc, "DSN": "postgresql://127.0.0.1:5999/db", "RAW": "$HOME ${NOT_A_SERVICE} $$"}


@needs_all
@pytest.mark.slow
def test_project_whose_tests_need_services_builds_and_verifies(tmp_path, monkeypatch):
    """Baseline, coverage run and verification runs each see running servers; stubbed bodies fail."""
    write_tree(tmp_path / "kv", {"kv/__init__.py": "", "kv/clients.py": CLIENTS, "tests/test_kv.py": TESTS})
    (tmp_path / "kv.yaml").write_text(MANIFEST)
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    settings = load_settings()
    manifest = load_manifest(tmp_path / "kv.yaml")
    env = build_local_env(manifest, settings)
    assert load_baseline(env).counts()["passed"] == 3
    build_tasks(manifest, settings, jobs=2)
    tasks = {t.name: t for t in load_tasks(settings, status="all")}
    assert {n: t.status for n, t in tasks.items()} == {
        "redis_roundtrip": TaskStatus.VERIFIED, "pg_scalar": TaskStatus.VERIFIED,
        "etcd_roundtrip": TaskStatus.VERIFIED}
    assert tasks["pg_scalar"].tests == ["tests/test_kv.py::test_postgres"]


REDIS_CLIENT = '''import os
import socket


def redis_roundtrip(key, value):
    """Store value under key in the Redis named by REDIS_URL (redis://HOST:PORT/DB) and return GET's answer."""
    host, port = os.environ["URL"].split("//")[1].split("/")[0].split(":")
    with socket.create_connection((host, int(port))) as s:
        s.sendall(f"SET {key} {value}\\r\\nGET {key}\\r\\n".encode())
        reply = b""
        while reply.count(b"\\r\\n") < 3:
            reply += s.recv(4096)
    return reply.split(b"\\r\\n")[2].decode()
'''


@pytest.mark.docker
@pytest.mark.slow
def test_docker_image_installs_and_starts_the_service(tmp_path, monkeypatch, docker_engine):
    """The image gets redis-server from Debian; the baseline (in the image build) and the sandbox's
    container start it on their own loopback, and tests.env's ${REDIS_...} references are expanded."""
    import uuid

    from typer.testing import CliRunner

    from coderun.cli.main import app

    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    write_tree(tmp_path / "kvd", {"kvd/__init__.py": "", "kvd/clients.py": REDIS_CLIENT,
                                  "tests/test_kvd.py": "from kvd.clients import redis_roundtrip\n\n\n"
                                  "def test_redis():\n    assert redis_roundtrip('k', 'v1') == 'v1'\n"
                                  "    assert redis_roundtrip('k', 'v2') == 'v2'\n"})
    name = f"kvd-{uuid.uuid4().hex[:8]}"
    python = "3.11"
    (tmp_path / f"{name}.yaml").write_text(
        f"name: {name}\nsource: {{path: kvd}}\npython: '{python}'\ntests:\n  paths: [tests]\n  services: [redis]\n"
        "  env: {URL: 'redis://${REDIS_HOST}:${REDIS_PORT}/0'}\n"
        "tasks:\n  discover: {enabled: false}\n  targets: [{function: kvd/clients.py::redis_roundtrip}]\n")
    runner = CliRunner()
    try:
        res = runner.invoke(app, ["tasks", "build", str(tmp_path / f"{name}.yaml"), "--backend", "docker"])
        assert res.exit_code == 0, res.output
        tasks = load_tasks(load_settings(), status="all")
        assert [(t.name, t.status) for t in tasks] == [("redis_roundtrip", TaskStatus.VERIFIED)]
        res = runner.invoke(app, ["eval", "--backend", "docker", "--ground-truth", "--run-dir", str(tmp_path / "gt"),
                                  "--projects", str(tmp_path), "--project", name])
        assert res.exit_code == 0, res.output
        report = json.loads((tmp_path / "gt" / "report.json").read_text())
        assert report["overall"]["pass@k"]["1"] == 1.0
    finally:
        for image in docker_engine.images.list(name=f"coderun/{name}"):
            for tag in image.tags:
                docker_engine.images.remove(tag, force=True)
