"""Pieces of the worker (coderun/harness/coderun_*.py) and the eval scheduler that the end-to-end
worker tests cannot single out: the in-memory copy of the pristine tree, which kept bytecode a sample's
copy leaves out, the hasher both executors use, the messages both sides read, the files shipped, and
the order in which slots take units."""

from __future__ import annotations

import importlib
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from coderun.evaluation.evaluate import _next_unit
from coderun.harness import HARNESS_DIR
from coderun.sandbox.trees import tree_tar

sys.path.insert(0, str(HARNESS_DIR))  # as in the sandbox: the files import each other as top-level modules
child, children, folders, hashing, statements = (
    importlib.import_module(f"coderun_{name}") for name in ("child", "children", "folders", "hashes", "statements"))


def _snapshot(root: Path):
    """The worker's snapshot of a tree, as it gets it: the tar the host sends."""
    return folders.Snapshot.from_tar(tree_tar(root))


def _tree(root: Path) -> dict[str, tuple]:
    out = {}
    for d, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            p = Path(d) / name
            st = p.lstat()
            rel = str(p.relative_to(root))
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif p.is_dir():
                out[rel] = ("dir", stat.S_IMODE(st.st_mode), st.st_mtime_ns // 1_000_000)
            else:  # a tar keeps times to about the microsecond
                out[rel] = ("file", p.read_bytes(), stat.S_IMODE(st.st_mode), st.st_mtime_ns // 1_000_000)
    return out


def test_snapshot_copy_equals_copytree(tmp_path):
    src = tmp_path / "src"
    (src / "pkg" / "sub").mkdir(parents=True)
    (src / ".git").mkdir()
    (src / ".git" / "HEAD").write_text("ref")
    (src / "pkg" / "__init__.py").write_text("")
    (src / "pkg" / "mod.py").write_text("x = 1\n")
    (src / "pkg" / "sub" / "data.bin").write_bytes(bytes(range(256)) * 100)
    (src / "run.sh").write_text("#!/bin/sh\n")
    (src / "run.sh").chmod(0o755)
    (src / "ro.txt").write_text("read only")
    (src / "ro.txt").chmod(0o444)
    (src / "link").symlink_to("pkg/mod.py")
    os.utime(src / "pkg" / "mod.py", ns=(1_000_000_000_000_000_000, 1_000_000_000_123_456_789))
    os.utime(src / "pkg", ns=(1_500_000_000_000_000_000, 1_500_000_000_000_000_000))

    (src / "pkg" / "__pycache__").mkdir()
    (src / "pkg" / "__pycache__" / "mod.cpython-39.pyc").write_bytes(b"compiled original")
    (src / "pkg" / "old.pyc").write_bytes(b"compiled original")
    snap = _snapshot(src)
    snap.write(str(tmp_path / "ours"))
    shutil.copytree(src, tmp_path / "theirs", symlinks=True,
                    ignore=shutil.ignore_patterns(".git", "__pycache__", "*.pyc"))
    ours, theirs = _tree(tmp_path / "ours"), _tree(tmp_path / "theirs")
    assert ours == theirs
    assert ".git" not in ours and ours["pkg/mod.py"][3] == 1_000_000_000_123
    assert "pkg/__pycache__" not in ours and "pkg/old.pyc" not in ours


def test_snapshot_gives_up_on_a_tree_over_its_limit(tmp_path, monkeypatch):
    (tmp_path / "big.bin").write_bytes(b"x" * 2000)
    monkeypatch.setattr(folders.Snapshot, "LIMIT", 1000)
    with pytest.raises(ValueError, match="over"):
        _snapshot(tmp_path)


def test_kept_bytecode_maps_to_its_source():
    assert folders.pyc_source("pkg/__pycache__/mod.cpython-39.pyc") == "pkg/mod.py"
    assert folders.pyc_source("tests/__pycache__/test_x.cpython-39-pytest-8.4.2.pyc") == "tests/test_x.py"
    assert folders.pyc_source("__pycache__/conftest.cpython-311.pyc") == "conftest.py"


def test_kept_bytecode_of_the_spliced_file_is_left_out(tmp_path):
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "mod.py").write_text("x = 1\n")
    (src / "pkg" / "other.py").write_text("y = 2\n")
    worker = folders.SampleFolders(str(tmp_path / "scratch"))
    worker.snapshot = _snapshot(src)
    worker.bytecode = {"pkg/__pycache__/mod.cpython-39.pyc": b"stale", "pkg/__pycache__/other.cpython-39.pyc": b"kept"}
    worker.copy_pristine(str(tmp_path / "copy"))
    cache = tmp_path / "copy" / "pkg" / "__pycache__"
    assert sorted(p.name for p in cache.iterdir()) == ["mod.cpython-39.pyc", "other.cpython-39.pyc"]
    worker.write_sample(str(tmp_path / "copy"), "pkg/mod.py", "x = 3\n")
    assert sorted(p.name for p in cache.iterdir()) == ["other.cpython-39.pyc"]
    assert (tmp_path / "copy" / "pkg" / "mod.py").read_text() == "x = 3\n"


def _sample_folder(tmp_path: Path) -> tuple[folders.Snapshot, dict, Path, folders.Folder]:
    """A pristine tree, its snapshot and kept bytecode, written into a sample folder with its record."""
    src = tmp_path / "src"
    (src / "pkg" / "sub").mkdir(parents=True)
    (src / "pkg" / "__init__.py").write_text("")
    (src / "pkg" / "mod.py").write_text("x = 1\n")
    (src / "pkg" / "sub" / "data.bin").write_bytes(bytes(range(256)) * 100)
    (src / "tests").mkdir()
    (src / "tests" / "test_mod.py").write_text("def test_x():\n    assert 1 == 1\n")
    (src / "run.sh").write_text("#!/bin/sh\n")
    (src / "run.sh").chmod(0o755)
    (src / "link").symlink_to("pkg/mod.py")
    os.utime(src / "pkg", ns=(1_500_000_000_000_000_000, 1_500_000_000_000_000_000))
    snap = _snapshot(src)
    bytecode = {"pkg/__pycache__/__init__.cpython-39.pyc": b"kept bytecode"}
    worker = folders.SampleFolders(str(tmp_path))
    worker.snapshot, worker.bytecode = snap, bytecode
    base = tmp_path / "s"
    for d in (base, base / "home", base / "tmp"):
        d.mkdir()
    worker.copy_pristine(str(base / "project"))
    files = {f"project/{rel}": data for rel, data, *_ in snap.files}
    files.update((f"project/{rel}", data) for rel, data in bytecode.items())
    links = {f"project/{rel}": target for rel, target in snap.links}
    return snap, bytecode, base, folders.Folder(str(base), files, links)


def _known(snap: folders.Snapshot, src: Path) -> dict:
    pristine = hashing.hashes(str(src))
    return {rel: (data, pristine[rel]) for rel, data, *_ in snap.files}


def test_a_samples_process_holds_no_copy_of_the_file_it_replaces(tmp_path):
    """Issue 34: a worker keeps the pristine tree in memory, and a sample's child is a fork of it. The child
    (and a task's template) drops every copy of the file the sample replaces: the snapshot's bytes, the
    known hashes' bytes, its kept bytecode and the folder record's bytes, so its code finds no original."""
    snap, bytecode, base, folder = _sample_folder(tmp_path)
    original = (tmp_path / "src" / "pkg" / "mod.py").read_bytes()
    worker = folders.SampleFolders(str(tmp_path))
    worker.snapshot, worker.folder, worker.known = snap, folder, _known(snap, tmp_path / "src")
    worker.bytecode = {**bytecode, "pkg/__pycache__/mod.cpython-39.pyc": b"compiled " + original}
    worker.forget("pkg/mod.py")
    held = [data for _, data, *_ in snap.files] + [data for data, _ in worker.known.values()]
    held += [*worker.bytecode.values(), *folder.files.values()]
    assert not [data for data in held if original in data]
    assert snap.text("pkg/__init__.py") == b"" and snap.text("pkg/mod.py") == b""
    copy = tmp_path / "copy"
    worker.copy_pristine(str(copy))  # a copy made after it: the sample's file goes in the empty one's place
    assert (copy / "pkg" / "mod.py").read_bytes() == b"" and (copy / "tests" / "test_mod.py").exists()


def test_a_damaged_sample_folder_is_put_back_as_a_fresh_copy_would_be(tmp_path):
    snap, _, base, folder = _sample_folder(tmp_path)
    fresh = _tree(base)
    project = base / "project"
    st = (project / "tests" / "test_mod.py").stat()
    (project / "tests" / "test_mod.py").write_text("def test_x():\n    assert 1 != 1\n")  # same size
    os.utime(project / "tests" / "test_mod.py", ns=(st.st_atime_ns, st.st_mtime_ns))    # same times
    (project / "pkg" / "__pycache__" / "__init__.cpython-39.pyc").write_bytes(b"poisoned code")
    os.link(project / "pkg" / "mod.py", base / "home" / "hard")
    (project / "pkg" / "sub" / "data.bin").unlink()
    (project / "pkg" / "sub" / "data.bin").mkdir()
    (project / "pkg" / "sub" / "data.bin" / "inside").write_text("x")
    (project / "link").unlink()
    (project / "link").symlink_to("/etc/passwd")
    (project / "run.sh").chmod(0o777)
    (project / "new_dir").mkdir()
    (project / "new_dir" / "conftest.py").write_text("boom")
    (base / "tmp" / "left.txt").write_text("left behind")
    (project / "tests").chmod(0o555)
    after = hashing.hashes(str(project), _known(snap, tmp_path / "src"))

    assert folder.restore(after, _known(snap, tmp_path / "src"))
    assert _tree(base) == fresh
    assert all(p.lstat().st_nlink == 1 for p in base.rglob("*") if p.is_file() and not p.is_symlink())
    assert folder.damage(hashing.hashes(str(project)), _known(snap, tmp_path / "src")) == ([], [])


def test_an_untouched_sample_folder_needs_nothing_and_a_replaced_one_is_given_up(tmp_path):
    snap, _, base, folder = _sample_folder(tmp_path)
    known = _known(snap, tmp_path / "src")
    assert folder.damage(hashing.hashes(str(base / "project"), known), known) == ([], [])
    shutil.rmtree(base)
    base.write_text("not a folder")
    assert not folder.restore({}, known)


def _unit(project: str, cost: float):
    return SimpleNamespace(task=SimpleNamespace(project=project), cost=cost)


def test_a_slot_stays_with_its_project_then_takes_one_nobody_is_on():
    todo = [_unit("a", 9), _unit("b", 8), _unit("a", 7), _unit("c", 6)]
    assert _next_unit(todo, None, set()) == 0           # the longest first
    assert _next_unit(todo, None, {"a"}) == 1           # a second slot starts on another project
    assert _next_unit(todo, "c", {"a"}) == 3            # a slot keeps its project
    assert _next_unit(todo, "d", {"a", "b"}) == 3       # its project is done: one nobody is on
    assert _next_unit(todo, "d", {"a", "b", "c"}) == 0  # everybody busy: the longest


# -- pytest's statement ranges, kept per file text ---------------------------------------------------

def _ranges(source_mod, text: str) -> list:
    """getstatementrange_ast on every line of `text`, as pytest calls it (SyntaxError as a value)."""
    src = source_mod.Source(text.splitlines())
    out = []
    for lineno in range(len(src.lines)):
        try:
            out.append(source_mod.getstatementrange_ast(lineno, src)[1:])
        except SyntaxError as e:
            out.append(type(e))
    return out


def _keep_pytest_functions(monkeypatch):
    import _pytest._code.code as code
    import _pytest._code.source as source

    for mod, name in ((source, "getstatementrange_ast"), (source, "get_statement_startend2"),
                      (code, "getstatementrange_ast")):
        monkeypatch.setattr(mod, name, getattr(mod, name))  # put back after the test
    return source


def test_kept_statement_ranges_are_pytests_own(monkeypatch):
    source = _keep_pytest_functions(monkeypatch)
    here = Path(statements.__file__).parent.parent / "runner"
    texts = [(here / "grade.py").read_text(), (here / "taxonomy.py").read_text(), statements._PROBE, "def f(:\n    pass\n"]
    before = [_ranges(source, t) for t in texts]
    stats = statements.Statements()
    assert stats.install()
    for t in texts[:2]:
        stats.tree("\n".join(line.rstrip() for line in t.splitlines()))  # known before pytest asks
    assert [_ranges(source, t) for t in texts] == before
    assert before[3][0] is SyntaxError


def test_statement_ranges_are_not_replaced_when_pytest_disagrees(monkeypatch):
    source = _keep_pytest_functions(monkeypatch)
    monkeypatch.setattr(source, "get_statement_startend2", lambda lineno, node: (lineno, None))
    original = source.getstatementrange_ast
    assert not statements.Statements().install()
    assert source.getstatementrange_ast is original


def test_frames_are_learned_from_the_pristine_tree_and_installed_modules_only(tmp_path):
    pristine, project, installed, elsewhere = (tmp_path / n for n in ("pristine", "s/project", "site", "tmp"))
    for d in (pristine / "pkg", project / "pkg", installed, elsewhere):
        d.mkdir(parents=True)
    (pristine / "pkg" / "mod.py").write_text("x = 1\n")
    (project / "pkg" / "mod.py").write_text("changed by the sample = 2\n")
    (installed / "lib.py").write_text("y = 2\n")
    (elsewhere / "made.py").write_text("z = 3\n")
    output = (f"pkg/mod.py:1: in f\n{installed}/lib.py:1: in g\n{elsewhere}/made.py:1: in h\n"
              f"../../tmp/made.py:1: in h\nE   AssertionError\n")
    stats = statements.Statements()
    snapshot = _snapshot(pristine)  # the worker reads the project's files from its snapshot
    stats.learn(output, str(project), snapshot.text, (str(installed) + os.sep,))
    assert stats.tried == {str(project / "pkg" / "mod.py"), str(installed / "lib.py")}
    assert len(stats.stand_ins) == 2
    stats.tree("x = 1")  # the pristine text, not the sample's
    assert len(stats.stand_ins) == 2


# -- a child's exit --------------------------------------------------------------------------------

def _forked(then_exit: bool) -> tuple[int, str]:
    """A child that writes 7 on its exit pipe and closes every fd, then exits (or goes on running)."""
    end_r, end_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(end_r)
        if then_exit:
            child.Exit.fd = end_w
            child.Exit.leave(7)
        os.write(end_w, b"7")
        child.close_fds_except(low=0)
        while True:
            os.pause()
    os.close(end_w)
    said = b""
    while chunk := os.read(end_r, 16):
        said += chunk
    os.close(end_r)
    return pid, said.decode()


def test_an_exiting_child_is_taken_at_its_word_and_reaped_later():
    pid, said = _forked(then_exit=True)
    # On a busy machine the child may not be scheduled for a while after its last close: wait until the
    # kernel has it exiting (exit_note's own wait is a few ms), but do not reap it.
    deadline = time.monotonic() + 10
    while not children._exiting(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert children.exit_note(pid, said) == 7
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 7


def test_a_child_that_says_it_exits_but_runs_on_is_waited_for():
    pid, said = _forked(then_exit=False)
    try:
        assert said == "7"
        assert children.exit_note(pid, said) is None
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)


def test_exit_codes_are_read_without_waitstatus_to_exitcode_missing_before_3_9():
    """The worker runs in the project's Python: os.waitstatus_to_exitcode (3.9+) broke every 3.7/3.8 worker."""
    for argv, expected in ([[sys.executable, "-c", "raise SystemExit(3)"], 3],
                           [[sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"],
                            -signal.SIGKILL]):
        proc = subprocess.Popen(argv)
        _, status = os.waitpid(proc.pid, 0)
        assert children.status_code(status) == expected


_CLEAN = """
import os, sys
sys.path.insert(0, sys.argv[1])
import coderun_children
from types import SimpleNamespace
top = sys.argv[2]
for rel in ("lead/junk.txt", "junk/deep/file", "file.txt", "kept/file"):
    os.makedirs(os.path.dirname(os.path.join(top, rel)), exist_ok=True)
    open(os.path.join(top, rel), "w").close()
coderun_children.clean_shared(SimpleNamespace(cfg={"clean": [top], "keep": [top + "/kept"]}, scratch=top + "/wk"))
print(sorted(os.path.relpath(os.path.join(d, f), top) for d, _, fs in os.walk(top) for f in fs))
"""


@pytest.mark.skipif(not shutil.which("bwrap"), reason="needs bubblewrap (CI installs it)")
def test_a_samples_leftovers_go_and_the_sandboxs_own_mounts_stay(tmp_path):
    """The worker empties /tmp after each sample; bubblewrap binds the venv and harness in where they are on
    the host, often under /tmp (a home there). Removing such a read-only tree failed file by file, over
    100 ms after every sample; a writable mount there would have been emptied."""
    mounted = tmp_path / "venv"
    (mounted / "lib").mkdir(parents=True)
    (mounted / "lib" / "mod.py").write_text("x = 1\n")
    top = "/tmp/top"
    # /tmp becomes empty; what the run needs from the host's /tmp (CI's venv and checkout) is bound back in.
    needed = sorted({p for p in (sys.prefix, sys.base_prefix, str(HARNESS_DIR)) if p.startswith("/tmp/")})
    argv = ["bwrap", "--dev-bind", "/", "/", "--tmpfs", "/tmp", *[a for p in needed for a in ("--ro-bind", p, p)],
            "--bind", str(mounted), f"{top}/lead/venv", sys.executable, "-c", _CLEAN, str(HARNESS_DIR), top]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode and "namespace" in done.stderr:
        pytest.skip(f"bubblewrap cannot make a sandbox here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['kept/file', 'lead/venv/lib/mod.py']"
    assert (mounted / "lib" / "mod.py").read_text() == "x = 1\n"


# -- one hasher, one set of messages, every file shipped --------------------------------------------

# What the naive path ran before the hasher was shared (coderun.runner.execute._HASH_SCRIPT, an os.walk):
# the rules the shared hasher must keep.
_OS_WALK_HASHER = r"""
import hashlib, json, os, sys
root = sys.argv[1]
out = {}
for d, dirs, files in os.walk(root):
    dirs[:] = [x for x in dirs if x not in ("__pycache__", ".git", ".pytest_cache", ".mypy_cache")]
    for f in files:
        p = os.path.join(d, f)
        rel = os.path.relpath(p, root)
        if f.endswith((".pyc", ".pyo")):
            continue
        try:
            if os.path.islink(p):
                out[rel] = "link:" + os.readlink(p)
            else:
                h = hashlib.sha256()
                with open(p, "rb") as fh:
                    for chunk in iter(lambda: fh.read(1 << 20), b""):
                        h.update(chunk)
                out[rel] = h.hexdigest()
        except OSError as e:
            out[rel] = "unreadable:" + type(e).__name__
print(json.dumps(out))
"""


def _awkward_tree(root: Path) -> None:
    for d in ("pkg/sub", "pkg/__pycache__", ".git", "node.pyc", "real", ".mypy_cache/x"):
        (root / d).mkdir(parents=True, exist_ok=True)
    (root / "pkg" / "mod.py").write_text("x = 1\n")
    (root / "pkg" / "sub" / "big.bin").write_bytes(bytes(range(256)) * 9000)  # more than one chunk
    (root / "pkg" / "__pycache__" / "mod.cpython-39.pyc").write_bytes(b"pyc")
    (root / "pkg" / "stale.pyc").write_bytes(b"pyc")
    (root / "pkg" / "opt.pyo").write_bytes(b"pyo")
    (root / ".git" / "HEAD").write_text("ref")
    (root / ".mypy_cache" / "x" / "y").write_text("cache")
    (root / "node.pyc" / "inside.py").write_text("a folder named like bytecode is walked")
    (root / "real" / "f.txt").write_text("through a link to a folder: never")
    (root / "empty").write_bytes(b"")
    (root / "to_file").symlink_to("pkg/mod.py")
    (root / "to_dir").symlink_to("real")
    (root / "dangling").symlink_to("nowhere")
    (root / "dangling.pyc").symlink_to("nowhere")
    (root / "read_only.txt").write_text("read only")
    (root / "read_only.txt").chmod(0o444)


def test_the_shared_hasher_gives_what_the_naive_paths_os_walk_gave(tmp_path):
    """One hasher for both executors: its output must be the old naive script's, run the way each uses it."""
    import json

    _awkward_tree(tmp_path / "t")
    root = str(tmp_path / "t")
    old = json.loads(subprocess.run([sys.executable, "-I", "-c", _OS_WALK_HASHER, root], check=True,
                                    capture_output=True, text=True).stdout)
    from coderun.runner.execute import _HASH_SCRIPT

    naive = json.loads(subprocess.run([sys.executable, "-I", "-c", _HASH_SCRIPT, root], check=True,
                                      capture_output=True, text=True).stdout)
    assert naive == old == hashing.hashes(root)
    assert "to_dir" not in old and "node.pyc/inside.py" in old and old["dangling"] == "link:nowhere"
    known = {"pkg/mod.py": (b"x = 1\n", "the known hash"), "empty": (b"other", "not this one")}
    cached = hashing.hashes(root, known)
    assert cached == {**old, "pkg/mod.py": "the known hash"}


def test_an_entry_whose_type_cannot_be_read_is_hashed_as_os_walk_did(tmp_path, monkeypatch):
    """os.walk takes an entry whose is_dir() fails for a file (a link into a folder it may not enter
    gives "link:..."): the worker once called it "unreadable", unlike the naive path."""
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "into_locked").symlink_to("/locked/file")

    class Entry:
        def __init__(self, entry):
            self._entry, self.name, self.path = entry, entry.name, entry.path

        def is_dir(self):
            raise PermissionError(13, "Permission denied")

        def is_symlink(self):
            return self._entry.is_symlink()

    real_scandir = os.scandir
    monkeypatch.setattr(hashing.os, "scandir", lambda p: [Entry(e) for e in real_scandir(p)])
    assert hashing.hashes(str(tmp_path / "t")) == {"into_locked": "link:/locked/file"}


def test_every_module_the_worker_imports_is_shipped():
    """The host writes WORKER_FILES into the sandbox; a sibling import missing there breaks every worker."""
    import ast

    from coderun.harness import LIMIT_FILES, RECORDER_FILES, REPORTER_FILES, WORKER_FILES

    on_disk = ({p.name for p in HARNESS_DIR.glob("coderun_*.py")} - set(REPORTER_FILES) - set(RECORDER_FILES)
               - set(LIMIT_FILES))
    assert set(WORKER_FILES) == on_disk
    for name in WORKER_FILES:
        tree = ast.parse((HARNESS_DIR / name).read_text())
        for node in ast.walk(tree):
            modules = ([a.name for a in node.names] if isinstance(node, ast.Import)
                       else [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            for module in modules:
                assert not module.startswith("coderun.") and module != "coderun", f"{name} imports {module}"
                if module.startswith("coderun_"):
                    # the worker is started after the reporter's files are written beside it
                    assert f"{module}.py" in WORKER_FILES + REPORTER_FILES, f"{name}: {module}"


def test_the_host_reads_what_the_worker_writes():
    from coderun.harness import coderun_protocol as protocol

    req = protocol.decode(protocol.encode(protocol.run_request(
        "tok", "pkg/mod.py", "x = 1\n", ("tests/test_a.py::test_x",), timeout=5.0, per_test_timeout=2,
        env={"A": "é"}, args=["-q"], output_limit=100, template=False)))
    assert (req["kind"], req["id"], req["token"], req["nodeids"], req["env"]) == (
        protocol.RUN, "tok", "tok", ["tests/test_a.py::test_x"], {"A": "é"})
    answer = protocol.result(req["id"], returncode=1, timed_out=False, duration=0.5, stdout="out", stderr="",
                             truncated=False, report='{"kind": "test"}\n', report_truncated=False)
    protocol.finish_result(answer, {"pkg/mod.py": "h"}, {"child": 0.4}, template=True)
    parsed = protocol.parse_result(protocol.decode(protocol.encode(answer)), "tok")
    assert parsed is not None and (parsed.returncode, parsed.after, parsed.template) == (1, {"pkg/mod.py": "h"}, True)
    assert protocol.parse_result(answer, "another request") is None
    assert protocol.parse_result(protocol.error("tok", "boom"), "tok") is None
    assert protocol.parse_hello(protocol.hello("8.0", {"a": "h"})).pristine == {"a": "h"}
    assert protocol.parse_hello({"ready": True}) is None
