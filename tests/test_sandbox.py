"""Behaviour tests every sandbox backend must pass (the same tests, parametrized over `local` and
`docker`; the docker ones are skipped with a reason when no engine answers)."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import pytest
from sandbox_fixtures import quiet, spec_for
from sandbox_fixtures import sandbox as sandbox  # noqa: F401  (the parametrized fixture)

from coderun.errors import SandboxError, UsageError
from coderun.sandbox import Limits, backend_names, create_sandbox, sandbox_class

pytestmark = pytest.mark.integration  # a venv, a sandbox or a project's tests in every test

# Lists the command lines of every live process whose command line contains argv[1] (the local
# sandbox sees the host's processes, the docker one its container's).
FIND = ("import os, sys\n"
        "hits = []\n"
        "for p in os.listdir('/proc'):\n"
        "    if p.isdigit() and p not in (str(os.getpid()), str(os.getppid())):\n"
        "        try:\n"
        "            stat = open('/proc/%s/stat' % p).read()\n"
        "            cmd = open('/proc/%s/cmdline' % p, 'rb').read().replace(b'\\0', b' ').decode()\n"
        "        except OSError:\n"
        "            continue\n"
        "        if sys.argv[1] in cmd and stat.rsplit(')', 1)[1].split()[0] != 'Z':\n"
        "            hits.append(cmd)\n"
        "print(len(hits))\n")


def run_py(sb, work, code, *args, timeout=30, **kw):
    return sb.exec([sb.python, "-c", code, *args], cwd=work, timeout=timeout, **kw)


@pytest.fixture
def work(sandbox):
    path = sandbox.new_workdir()
    yield path
    sandbox.remove_workdir(path)


def survivors(sandbox, work, needle: str) -> int:
    return int(run_py(sandbox, work, FIND, needle).stdout.strip())


def test_registry_knows_both_backends_and_fails_loudly_on_unknown_names():
    assert {"local", "docker"} <= set(backend_names())
    assert sandbox_class("local").name == "local"
    with pytest.raises(UsageError, match="unknown sandbox backend 'podman'"):
        sandbox_class("podman")


def test_exec_returns_output_and_exit_code(sandbox, work):
    r = run_py(sandbox, work, "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)")
    assert (r.returncode, r.stdout, r.stderr, r.timed_out, r.truncated) == (3, "out\n", "err\n", False, False)
    assert not r.ok


def test_cwd_is_the_copy_of_the_project(sandbox, work):
    r = run_py(sandbox, work, "import os; print(os.getcwd()); print(open('pkg/mod.py').read())")
    assert r.stdout.splitlines()[0] == work
    assert "def add" in r.stdout


def test_timeout_kills_the_whole_process_tree_including_an_escaped_grandchild(sandbox, work):
    """A grandchild that left the process group with setsid must not outlive the timeout."""
    tag = f"sleep {400 + uuid.uuid4().int % 500}"
    code = ("import subprocess, time, sys\n"
            f"subprocess.Popen(['setsid', 'sh', '-c', '{tag}; true'])\n"
            f"subprocess.Popen(['sh', '-c', '{tag}; true'])\n"
            "print('started', flush=True)\n"
            "time.sleep(300)\n")
    r = run_py(sandbox, work, code, timeout=3)
    assert r.timed_out and r.returncode != 0
    assert r.stdout == "started\n"
    assert survivors(sandbox, work, tag) == 0


def test_background_processes_are_killed_when_the_command_exits(sandbox, work):
    tag = f"sleep {400 + uuid.uuid4().int % 500}"
    r = sandbox.exec(["sh", "-c", f"(setsid sh -c '{tag}; true' >/dev/null 2>&1 &); echo bg"], cwd=work, timeout=30)
    assert r.ok and r.stdout == "bg\n"
    assert survivors(sandbox, work, tag) == 0


def test_output_is_capped_keeping_head_and_tail(sandbox, work):
    code = "import sys; sys.stdout.write('HEAD' + 'x' * 5_000_000 + 'TAIL')"
    r = run_py(sandbox, work, code, output_limit=10_000)
    assert r.returncode == 0 and r.truncated
    assert r.stdout.startswith("HEAD") and r.stdout.endswith("TAIL")
    assert len(r.stdout) < 11_000 and "bytes cut by coderun" in r.stdout


def test_stdin_is_empty_by_default_and_can_be_given(sandbox, work):
    assert run_py(sandbox, work, "import sys; print(repr(sys.stdin.read()))", timeout=20).stdout == "''\n"
    r = run_py(sandbox, work, "import sys; print(sys.stdin.read().upper())", stdin=b"hello")
    assert r.stdout == "HELLO\n"


def test_write_and_read_file_roundtrip(sandbox, work):
    data = os.urandom(200_000) + b"\0end"
    path = f"{work}/new/dir/blob.bin"
    sandbox.write_file(path, data)
    assert sandbox.read_file(path) == data
    assert run_py(sandbox, work, "import os; print(os.path.getsize('new/dir/blob.bin'))").stdout.strip() == str(len(data))
    with pytest.raises(FileNotFoundError):
        sandbox.read_file(f"{work}/missing.txt")


def test_write_files_writes_small_and_large_files_alike(sandbox, work):
    # 30 files of ~50 kB: more than one batch of the docker backend
    files = {f"{work}/many/f{i}.py": f"X = {i:02}\n".encode() * 6000 for i in range(30)}
    files[f"{work}/many/big.bin"] = os.urandom(150_000)  # over one exec's chunk: written on its own
    files[f"{work}/other/empty"] = b""
    sandbox.write_files(files)
    assert all(sandbox.read_file(path) == data for path, data in files.items())


def test_read_file_does_not_follow_links_a_sample_planted(sandbox, work):
    run_py(sandbox, work, "import os; os.symlink('/dev/zero', 'report.jsonl')")
    with pytest.raises(FileNotFoundError):
        sandbox.read_file(f"{work}/report.jsonl")


def test_nothing_written_by_one_sample_is_seen_by_the_next(sandbox):
    first = sandbox.new_workdir()
    code = ("import os, tempfile\n"
            "open('pkg/mod.py', 'a').write('LEAK = 1\\n')\n"
            "open('left_behind.txt', 'w').write('x')\n"
            "open(os.path.join(tempfile.gettempdir(), 'leak.txt'), 'w').write('x')\n"
            "open(os.path.expanduser('~/leak.txt'), 'w').write('x')\n"
            "print(tempfile.gettempdir())\n")
    tmpdir = run_py(sandbox, first, code).stdout.strip()
    sandbox.remove_workdir(first)
    second = sandbox.new_workdir()
    try:
        check = ("import os, tempfile\n"
                 "print(open('pkg/mod.py').read().count('LEAK'), os.path.exists('left_behind.txt'),\n"
                 "      os.path.exists(os.path.join(tempfile.gettempdir(), 'leak.txt')),\n"
                 f"      os.path.exists(os.path.expanduser('~/leak.txt')), os.path.exists(os.path.join({tmpdir!r}, 'leak.txt')))\n")
        assert run_py(sandbox, second, check).stdout.split() == ["0", "False", "False", "False", "False"]
    finally:
        sandbox.remove_workdir(second)


def test_pristine_tree_is_never_modified(sandbox, work, request):
    run_py(sandbox, work, "open('pkg/mod.py', 'w').write('broken')")
    fresh = sandbox.new_workdir()
    try:
        assert sandbox.read_file(f"{fresh}/pkg/mod.py") == b"def add(a, b):\n    return a + b\n"
    finally:
        sandbox.remove_workdir(fresh)
    if sandbox.name == "local":
        assert (request.getfixturevalue("tiny_project") / "pkg" / "mod.py").read_text().startswith("def add")


def test_environment_is_scrubbed(sandbox, work, monkeypatch):
    monkeypatch.setenv("CODERUN_HOST_SECRET", "s3cret")
    r = run_py(sandbox, work, "import os, json; print(json.dumps(dict(os.environ)))", env={"EXTRA": "1"})
    import json

    env = json.loads(r.stdout)
    assert "CODERUN_HOST_SECRET" not in env and "s3cret" not in r.stdout
    assert env["EXTRA"] == "1" and env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert env["HOME"].startswith(os.path.dirname(work)) and not env["HOME"].startswith(work + "/")
    assert "CODERUN_HOME" not in env


def test_memory_limit_stops_a_memory_bomb(sandbox, work):
    r = run_py(sandbox, work, "x = bytearray(3 * 1024 ** 3); print('allocated')", timeout=60)
    assert r.returncode != 0 and "allocated" not in r.stdout


def test_exec_of_a_missing_program_is_a_result_or_a_sandbox_error(sandbox, work):
    try:
        r = sandbox.exec(["/no/such/program"], cwd=work, timeout=10)
    except SandboxError:
        return
    assert r.returncode != 0


@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_fork_bomb_is_contained(backend, request):
    from coderun.sandbox.local_processes import PidsCgroup

    if backend == "local" and os.geteuid() == 0:
        probe = PidsCgroup.create(f"coderun-probe-{uuid.uuid4().hex[:8]}", 10)
        if probe is None:
            pytest.skip("local backend as root without a writable pids cgroup: no process limit (documented)")
        probe.remove()
    spec = spec_for(backend, request, limits=Limits(memory_mb=1024, pids=48, scratch_mb=256))
    with quiet(), create_sandbox(backend, spec) as sb:
        w = sb.new_workdir()
        code = ("import subprocess\nps = []\ntry:\n    for i in range(300):\n"
                "        ps.append(subprocess.Popen(['sleep', '60']))\nexcept OSError as e:\n"
                "    print('limited', len(ps))\n")
        r = run_py(sb, w, code, timeout=60)
        assert r.stdout.startswith("limited")
        assert int(r.stdout.split()[1]) < 48
        sb.remove_workdir(w)


def test_local_sandbox_warns_and_removes_everything_on_close(request):
    sb = create_sandbox("local", spec_for("local", request, isolation="none"))
    with pytest.warns(UserWarning, match="does not|without isolation"):
        sb.start()
    root = Path(sb.root)
    w = sb.new_workdir()
    sb.write_file(f"{w}/x.txt", b"x")
    sb.close()
    sb.close()
    assert not root.exists()
    with pytest.raises(SandboxError):
        sb.new_workdir()


def test_local_stale_folders_of_dead_runs_are_removed(tmp_path):
    import subprocess
    import tempfile

    from coderun.sandbox.local import cleanup_stale_workdirs

    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = Path(tempfile.mkdtemp(prefix="coderun-sbx-stale-"))
    (stale / "owner.pid").write_text(str(dead.pid))
    assert str(stale) in cleanup_stale_workdirs()
    assert not stale.exists()


def test_local_write_file_refuses_paths_outside_the_sandbox(request, tmp_path):
    with quiet(), create_sandbox("local", spec_for("local", request)) as sb, \
            pytest.raises(SandboxError, match="outside"):
        sb.write_file(str(tmp_path / "escape.txt"), b"x")


# -- docker only -------------------------------------------------------------------------------

docker_only = pytest.mark.docker


@pytest.fixture
def docker_sandbox(request):
    sb = create_sandbox("docker", spec_for("docker", request))
    sb.start()
    yield sb
    sb.close()


@docker_only
def test_docker_has_no_network_but_loopback(docker_sandbox):
    w = docker_sandbox.new_workdir()
    code = ("import os, socket\nprint(sorted(os.listdir('/sys/class/net')))\n"
            "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(1)\n"
            "c = socket.create_connection(s.getsockname(), timeout=5); print('loopback ok')\n")
    r = run_py(docker_sandbox, w, code)
    assert r.stdout.splitlines() == ["['lo']", "loopback ok"]


@docker_only
def test_docker_runs_samples_unprivileged_on_a_read_only_image(docker_sandbox):
    w = docker_sandbox.new_workdir()
    code = ("import os\nprint(os.getuid())\n"
            "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('CapEff')][0])\n"
            "for path in ('/etc/evil', '/work/project/evil', '/opt/venv/evil'):\n"
            "    try:\n        open(path, 'w')\n        print('wrote', path)\n"
            "    except OSError as e:\n        print('refused')\n"
            "try:\n    os.kill(1, 9)\n    print('killed pid 1')\nexcept OSError:\n    print('pid 1 safe')\n")
    lines = run_py(docker_sandbox, w, code).stdout.split("\n")
    assert lines[0] != "0"
    assert int(lines[1], 16) == 0
    assert lines[2:6] == ["refused", "refused", "refused", "pid 1 safe"]


@docker_only
def test_docker_close_removes_the_container_and_stale_ones_are_found(request, docker_engine):
    from coderun.sandbox.docker import LABEL, cleanup_stale_containers

    run_id = uuid.uuid4().hex[:12]
    sb = create_sandbox("docker", spec_for("docker", request, run_id=run_id))
    sb.start()
    label = {"label": f"{LABEL}.run={run_id}"}
    assert len(docker_engine.api.containers(all=True, filters=label)) == 1
    sb.close()
    assert docker_engine.api.containers(all=True, filters=label) == []
    # a container whose owner (this host, a dead pid) is gone is removed by the next run
    import socket
    import subprocess

    dead = subprocess.Popen(["true"])
    dead.wait()
    c = docker_engine.containers.create(request.getfixturevalue("test_image"), ["true"],
                                        labels={f"{LABEL}.managed": "1", f"{LABEL}.owner": f"{socket.gethostname()}:{dead.pid}"})
    assert c.id in cleanup_stale_containers(docker_engine)


def test_a_long_lived_process_outlives_the_thread_that_started_it(tmp_path):
    """Every task build lost a worker or two ("the worker ended: no message", then the naive executor): the
    thread of a build phase's pool that started it ended, and bubblewrap's --die-with-parent, which follows
    the forking thread, killed it. The worker must answer after that thread is gone."""
    import time
    import uuid
    from concurrent.futures import ThreadPoolExecutor

    from coderun.sandbox import SandboxSpec, create_sandbox
    from coderun.sandbox.isolation import tools

    if tools() is None:
        pytest.skip("bubblewrap and unshare are not installed: no namespaces, no --die-with-parent")
    (tmp_path / "proj").mkdir()
    sb = create_sandbox("local", SandboxSpec(project="p", project_dir=str(tmp_path / "proj"),
                                             python=sys.executable, isolation="namespaces"))
    sb.start()
    try:
        with ThreadPoolExecutor(1) as pool:  # its thread ends when the block does
            proc = pool.submit(sb.start_process, ["/bin/cat"], env={"PATH": "/bin:/usr/bin"},
                               marker=f"CODERUN_TEST_MARK={uuid.uuid4().hex}").result()
        time.sleep(1)
        proc.send(b"still here\n")
        assert proc.read_line(time.monotonic() + 30) == b"still here", proc.stderr_tail()
        proc.close()
    finally:
        sb.close()


@pytest.mark.parametrize(("code", "said"), [
    ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", "(killed by SIGKILL)"),
    ("raise SystemExit(3)", "(exit code 3)"),
])
def test_a_long_lived_process_that_ends_silently_says_how_it_ended(tmp_path, code, said):
    """A worker killed with no word on stderr was reported as "the worker ended: no message"."""
    import time

    from coderun.sandbox.local_processes import LocalProcess

    proc = LocalProcess([sys.executable, "-c", code], {}, tmp_path / "err", "CODERUN_TEST_MARK=1")
    try:
        assert proc.read_line(time.monotonic() + 30) is None
        assert proc.stderr_tail() == said
    finally:
        proc.close()
