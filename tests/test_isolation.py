"""What a sample's process sees (issue 34). On both backends and with both executors: no network interface or
route but loopback (read from the interface list and the routing tables; no traffic is sent). On the local
backend in namespaces: its copy and its own folders writable, the venv read-only, a /tmp of its own, and none of
the pristine tree, $CODERUN_HOME, the user's home or another sandbox's folders. Where namespaces cannot be made
(here: bubblewrap not on PATH), a sandbox says so and runs as before."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest
from sandbox_fixtures import BACKENDS, NODEIDS, quiet, spec_for

from coderun.records import VerdictKind
from coderun.runner.evidence import SampleRun
from coderun.runner.executors import WorkerPool, make_pool
from coderun.runner.grade import grade
from coderun.sandbox import create_sandbox, isolation

pytestmark = pytest.mark.integration  # a venv, a sandbox or a project's tests in every test

NETWORK = """\
import json, socket
def column(path, index, skip):
    try:
        with open(path) as f:
            return sorted({line.split()[index] for line in f.read().splitlines()[skip:] if line.split()})
    except OSError:
        return []
seen = {"interfaces": sorted(name for _, name in socket.if_nameindex()),
        "routes": column("/proc/net/route", 0, 1), "routes6": column("/proc/net/ipv6_route", -1, 0)}
"""
# the sample: right only when it sees loopback alone, and it says what it saw
SAMPLE = NETWORK + """
def add(a, b):
    assert seen == {"interfaces": ["lo"], "routes": [], "routes6": seen["routes6"]} and \\
        set(seen["routes6"]) <= {"lo"}, seen
    return a + b
"""

needs_namespaces = pytest.mark.skipif(isolation.unavailable() is not None,
                                      reason=f"namespaces cannot be made here: {isolation.unavailable()}")


def _loopback_only(seen: dict) -> bool:
    return seen["interfaces"] == ["lo"] and not seen["routes"] and set(seen["routes6"]) <= {"lo"}


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_command_in_the_sandbox_has_no_network_but_loopback(request, backend):
    """The local backend used to share the host's network with every sample (its interfaces, its routes)."""
    spec = spec_for(backend, request)
    with quiet(), create_sandbox(backend, spec) as sb:
        if backend == "local" and not sb.isolated:
            pytest.skip(f"namespaces cannot be made here: {sb.isolation_note}")
        w = sb.new_workdir()
        done = sb.exec([sb.python, "-c", NETWORK + "print(json.dumps(seen))"], cwd=w, timeout=60)
        assert done.returncode == 0, done.stderr
        seen = json.loads(done.stdout)
        assert _loopback_only(seen), seen


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_sample_in_a_worker_has_no_network_but_loopback(request, backend):
    """The same from inside a sample's test run, forked by a worker: it passes only if it sees loopback alone."""
    ev = _in_a_worker(request, backend, SAMPLE)
    assert grade(ev.expected, ev).verdict is VerdictKind.PASS, ev


def _in_a_worker(request, backend: str, source: str):
    """The evidence of one sample run by a worker of the tiny project on `backend`."""
    spec = spec_for(backend, request)
    if backend == "local" and isolation.unavailable():
        pytest.skip(f"namespaces cannot be made here: {isolation.unavailable()}")
    with WorkerPool(backend, {"tiny": spec}, 1) as pool:
        return pool.run("tiny", SampleRun(relfile="pkg/mod.py", new_source=source, nodeids=NODEIDS, timeout=60,
                                          per_test_timeout=20, env={}))


# the sample: right only when its copy (the folder of its file) is on a tmpfs
IN_MEMORY = """\
import os
def _fstype(path):
    best, kind = "", None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, right = line.split(" - ")
            point = left.split()[4]
            if (path == point or path.startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
                best, kind = point, right.split()[0]
    return kind
SEEN = _fstype(os.path.realpath(os.path.dirname(__file__)))
def add(a, b):
    assert SEEN == "tmpfs", SEEN
    return a + b
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_workers_copies_are_in_memory(request, backend):
    """A worker writes a copy of the tree for every sample whose last copy it cannot put back. On the local
    backend they were on the host's disk: ocfl-py's (3570 files) took 3.5-6.6 s a sample there, 0.2 s in
    a container's tmpfs. In namespaces the worker's scratch is now a tmpfs too."""
    ev = _in_a_worker(request, backend, IN_MEMORY)
    assert grade(ev.expected, ev).verdict is VerdictKind.PASS, ev


@pytest.mark.parametrize("backend", BACKENDS)
def test_localhost_resolves_in_the_sandbox(request, backend):
    """neo4j's test_bolt_connection_open resolves localhost and expects the connection to be refused: a docker
    sandbox had an empty /etc/hosts (network_disabled), so its ground truth failed there and passed locally."""
    spec = spec_for(backend, request)
    with quiet(), create_sandbox(backend, spec) as sb:
        w = sb.new_workdir()
        done = sb.exec([sb.python, "-c", "import socket; print(socket.getaddrinfo('localhost', 9, 0, "
                        "socket.SOCK_STREAM)[0][4][0])"], cwd=w, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() in ("127.0.0.1", "::1"), done.stderr


# The sample: right only when its user's home (from the user database, as ansible finds it) is writable and
# neither it nor / holds what a sample before it left there.
HOME_PROBE = """\
import os, pwd
HOME = pwd.getpwuid(os.getuid()).pw_dir
LEFT = [p for p in (os.path.join(HOME, "probe.txt"), "/probe.txt") if os.path.exists(p)]
os.makedirs(os.path.join(HOME, ".ansible", "tmp"), exist_ok=True)
open(os.path.join(HOME, "probe.txt"), "w").close()
try:
    open("/probe.txt", "w").close()
except OSError:
    pass
def add(a, b):
    assert not LEFT, f"the sample before left {LEFT}"
    return a + b
"""


@pytest.mark.parametrize("executor", ["naive", "workers"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_the_sample_users_home_is_writable_and_fresh_for_each_sample(request, backend, executor):
    """infrared's ansible writes ~/.ansible/tmp in the home the user database names: on docker, a read-only
    /home/coderun failed 25 of its 30 tasks' ground truth; a local worker's samples shared bubblewrap's
    writable root, and so a home of their own making. Two samples in a row: both pass."""
    spec = spec_for(backend, request)
    if backend == "local" and isolation.unavailable():
        pytest.skip(f"namespaces cannot be made here: {isolation.unavailable()}")
    with quiet(), make_pool(executor, backend, {"tiny": spec}, 1) as pool:
        for _ in range(2):
            ev = pool.run("tiny", SampleRun(relfile="pkg/mod.py", new_source=HOME_PROBE, nodeids=NODEIDS,
                                            timeout=60, per_test_timeout=20, env={}))
            assert grade(ev.expected, ev).verdict is VerdictKind.PASS, ev


VIEW = """\
import json, os, sys
coderun_home, tree, user_file, project, venv = sys.argv[1:6]
def writable(path):
    try:
        with open(os.path.join(path, "probe.txt"), "w") as f:
            f.write("x")
        return True
    except OSError:
        return False
def readable(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""
print(json.dumps({"tree": os.path.exists(tree), "coderun_home": os.path.exists(coderun_home),
                  "user_file": os.path.exists(user_file),
                  "tmp": sorted(os.listdir("/tmp")), "project": writable(project), "venv": writable(venv),
                  "shadow": readable("/etc/shadow")}))
"""


@needs_namespaces
def test_a_local_sandbox_sees_its_copy_and_the_venv_but_not_the_host(request, tmp_path):
    """Samples on the local backend used to read and write what the user can: the pristine tree (the
    original of every function), $CODERUN_HOME, the user's files, a /tmp shared with every other sample."""
    spec = spec_for("local", request)
    home = os.environ.get("CODERUN_HOME") or str(tmp_path)
    canary = f"coderun-canary-{uuid.uuid4().hex[:8]}"
    canaries = [Path(tempfile.gettempdir()) / canary, Path.home() / canary]
    try:
        for path in canaries:
            path.write_text("not yours")
        with create_sandbox("local", spec) as sb:
            w = sb.new_workdir()
            venv = os.path.dirname(os.path.dirname(spec.python))
            done = sb.exec([sb.python, "-c", VIEW, home, spec.project_dir, str(canaries[1]), w, venv], cwd=w,
                           timeout=60)
    finally:
        for path in canaries:
            path.unlink()
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["project"] and not seen["venv"], seen
    assert not seen["tree"] and not seen["coderun_home"] and not seen["user_file"], seen
    assert canary not in seen["tmp"], seen
    assert seen["shadow"] == "", "a root-only file of /etc was readable"


TAR = """\
import io, os, tarfile, subprocess
data = io.BytesIO()
with tarfile.open(fileobj=data, mode="w:gz") as tar:
    info = tarfile.TarInfo("testcases/file.txt")
    info.size, info.uid, info.gid = 3, 4321, 4321
    tar.addfile(info, io.BytesIO(b"abc"))
open("testcases.tar.gz", "wb").write(data.getvalue())
done = subprocess.run(["tar", "-xzf", "testcases.tar.gz"], capture_output=True, text=True)
print(os.geteuid(), done.returncode, done.stderr.strip())
"""


@needs_namespaces
@pytest.mark.skipif(os.geteuid() != 0, reason="a user's sandbox keeps the user's uid: nothing to change")
def test_a_local_sandbox_made_by_root_runs_its_commands_as_a_user(request):
    """rdiffweb's tests untar their fixtures with GNU tar, which as root restores the archive's owners and
    cannot with every capability dropped ("Cannot change ownership to uid 1000"): 12 of its tasks were
    broken. As docker's `coderun` user, the sandbox's commands run as a user."""
    spec = spec_for("local", request)
    with quiet(), create_sandbox("local", spec) as sb:
        w = sb.new_workdir()
        done = sb.exec([sb.python, "-c", TAR], cwd=w, timeout=60)
        who = sb.exec(["sh", "-c", "whoami; touch mine"], cwd=w, timeout=60)
        owner = os.stat(Path(w) / "mine").st_uid
    assert done.returncode == 0, done.stderr
    euid, tar_exit, _ = done.stdout.split(" ", 2)
    assert euid != "0" and tar_exit == "0", done.stdout
    assert who.returncode == 0 and who.stdout.split()[0] != "root", who.stdout + who.stderr
    assert owner == 0  # on the host, what the sandbox wrote stays the host user's


def test_without_namespaces_a_sandbox_says_so(request, monkeypatch, tmp_path):
    """Where namespaces cannot be made (bubblewrap missing), the sandbox warns and records why; with
    `namespaces` required it refuses to start."""
    from coderun.errors import SandboxUnavailable

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("unshare", "nsenter", "timeout", "true"):
        if shutil.which(tool):
            (bin_dir / tool).symlink_to(shutil.which(tool))
    monkeypatch.setenv("PATH", str(bin_dir))
    isolation.unavailable.cache_clear()
    isolation.tools.cache_clear()
    try:
        sb = create_sandbox("local", spec_for("local", request))
        with pytest.warns(UserWarning, match="without isolation"):
            sb.start()
        assert not sb.isolated and "bwrap not found" in sb.isolation_note
        sb.close()
        with pytest.raises(SandboxUnavailable, match="namespaces cannot be made"):
            create_sandbox("local", spec_for("local", request, isolation="namespaces")).start()
    finally:
        isolation.unavailable.cache_clear()
        isolation.tools.cache_clear()


def test_installed_copies_of_the_project_are_found_and_nothing_else(tmp_path):
    """An install of the project (install.project) put its modules in site-packages: the original functions,
    readable by a sample although never imported. They are hidden (local) or deleted (image); another
    distribution in the same namespace package is not."""
    from coderun.envs.installed import installed_copies

    tree, venv = tmp_path / "tree", tmp_path / "venv"
    site = venv / "lib" / "python3.9" / "site-packages"
    files = {tree / "src/pkg/__init__.py": "", tree / "src/pkg/core.py": "def f(): return 1\n",
             tree / "src/zope/__init__.py": "", tree / "src/zope/mine/__init__.py": "",
             tree / "src/single.py": "x = 1\n",
             site / "pkg/__init__.py": "", site / "pkg/core.py": "def f(): return 1\n",
             site / "pkg/__pycache__/core.cpython-39.pyc": "",
             site / "zope/__init__.py": "", site / "zope/mine/__init__.py": "",
             site / "zope/other/__init__.py": "", site / "single.py": "x = 1\n",
             site / "__pycache__/single.cpython-39.pyc": "", site / "unrelated/__init__.py": ""}
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    found = sorted(os.path.relpath(p, site) for p in installed_copies(str(venv), str(tree), "src"))
    assert found == ["__pycache__/single.cpython-39.pyc", "pkg", "single.py", "zope/__init__.py", "zope/mine"]


def test_vendored_copies_in_the_system_are_found_once_and_never_in_the_standard_library(tmp_path):
    """Google's SDK ships cachetools under /usr/lib: a copy a sample could read the original from. Found by one
    walk per process, even when two workers start at once; an interpreter's standard library (not site- or
    dist-packages) is not walked, and a module named like the project's there is no copy of it."""
    import threading

    tree, system = tmp_path / "tree", tmp_path / "usr"
    files = [tree / "pkg/__init__.py", tree / "pkg/core.py", tree / "tests/test_core.py",
             system / "lib/sdk/third_party/pkg/core.py", system / "lib/sdk/third_party/other/core.py",
             system / "lib/python3.11/pkg/core.py", system / "lib/python3/dist-packages/pkg/core.py",
             system / "share/doc/pkg/README"]
    for path in files:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    walks, walk = [], os.walk

    def counted(top, *args, **kwargs):
        walks.append(top)
        return walk(top, *args, **kwargs)

    isolation._walk_index.cache_clear()
    found: list[list[str]] = []
    try:
        os.walk = counted
        threads = [threading.Thread(target=lambda: found.append(isolation._system_copies(str(tree), (str(system),))))
                   for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        os.walk = walk
        isolation._walk_index.cache_clear()
    assert walks == [str(system)]
    assert [sorted(os.path.relpath(p, system) for p in f) for f in found] == \
        [["lib/python3/dist-packages/pkg", "lib/sdk/third_party/pkg"]] * 2


def test_the_system_index_is_kept_for_later_processes_until_a_folder_changes(tmp_path, monkeypatch):
    """The walk of /usr took 0.5 s of every run's first sandbox start: it is kept in the home with each folder's
    modification time. A copy of the project put there later changes a folder's time and is found; a walk
    that saw folders change while it ran is not kept."""
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    tree, system = tmp_path / "tree", tmp_path / "usr"
    for path in (tree / "pkg/core.py", system / "lib/sdk/third_party/other/core.py", system / "share/doc/README"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    (tree / "pkg/__init__.py").write_text("")

    def age(*folders: Path) -> None:  # last changed a minute ago, as a system's folders are
        for folder in folders:
            os.utime(folder, (os.stat(folder).st_atime, os.stat(folder).st_mtime - 60))

    walks, walk = [], os.walk

    def copies() -> list[str]:
        isolation._walk_index.cache_clear()  # a new process
        os.walk = lambda top, *a, **k: walks.append(top) or walk(top, *a, **k)
        try:
            return [os.path.relpath(p, system) for p in isolation._system_copies(str(tree), (str(system),))]
        finally:
            os.walk = walk
            isolation._walk_index.cache_clear()

    assert copies() == [] and len(walks) == 1  # folders changed just now: walked, not kept
    age(*(Path(folder) for folder, _, _ in walk(system)))
    assert copies() == [] and len(walks) == 2  # walked and kept
    assert copies() == [] and len(walks) == 2  # the kept index, every folder unchanged
    vendored = system / "lib/sdk/third_party/pkg/core.py"
    vendored.parent.mkdir()  # changes third_party's time, and no other folder's
    vendored.write_text("")
    assert copies() == ["lib/sdk/third_party/pkg"] and len(walks) == 3
    age(vendored.parent.parent, vendored.parent)
    assert copies() == ["lib/sdk/third_party/pkg"] and len(walks) == 4
    assert copies() == ["lib/sdk/third_party/pkg"] and len(walks) == 4


def test_a_tree_for_a_worker_leaves_out_history_and_bytecode(tmp_path):
    """The tar a worker takes its copies from: never .git (the history holds the originals) nor bytecode."""
    import io
    import tarfile

    from coderun.sandbox.trees import tree_tar

    for rel in ("pkg/mod.py", "pkg/__pycache__/mod.cpython-39.pyc", "pkg/old.pyc", ".git/HEAD", "sub/.git",
                "README"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    with tarfile.open(fileobj=io.BytesIO(tree_tar(tmp_path))) as tar:
        names = sorted(m.name for m in tar.getmembers())
    assert names == ["README", "pkg", "pkg/mod.py", "sub"]


@pytest.mark.parametrize("fmt", ["pax", "gnu"])
def test_a_docker_archive_repacked_keeps_long_paths_in_the_tree(fmt):
    """ocfl-py's fixtures have paths over 100 characters, which a tar keeps in a pax header (or GNU's long
    name): repack renamed the member but not its header, so those files landed under pristine/ in every docker
    copy and 24 of 52 tasks' ground truth failed ("empty directory" in its fixture)."""
    import io
    import tarfile

    from coderun.sandbox.trees import repack

    long = "fixtures/" + "/".join(["some_prefix%3a" + "a" * 40] * 3) + "/inventory.json"
    src = io.BytesIO()
    with tarfile.open(fileobj=src, mode="w", format=tarfile.PAX_FORMAT if fmt == "pax" else tarfile.GNU_FORMAT) as tar:
        for name, data in (("pristine/short.txt", b"s"), (f"pristine/{long}", b"l")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with tarfile.open(fileobj=io.BytesIO(repack(src.getvalue(), "pristine"))) as tar:
        assert sorted(tar.getnames()) == sorted(["short.txt", long])
        assert tar.extractfile(long).read() == b"l"
