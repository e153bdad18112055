"""The sample's folder: a private copy of the pristine tree at the same path for every sample of a worker,
written from memory (Snapshot, taken from the tar the host sends: the tree is nowhere a sample can read), with
the worker's kept bytecode, and put back after a sample instead of copied again when it can be (Folder). A
sample's process drops every copy of the file it replaces (SampleFolders.forget). Standalone (stdlib only,
Python 3.7): imported by the worker.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import stat
import tarfile
import time
from collections.abc import Callable

from coderun_hashes import hashes


def rmtree(path: str) -> None:
    def fix(func, p, _exc):
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(p), stat.S_IRWXU)
            os.chmod(p, stat.S_IRWXU)
        with contextlib.suppress(OSError):
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p, ignore_errors=True)
            else:
                os.unlink(p)

    if os.path.lexists(path):
        shutil.rmtree(path, onerror=fix)


def unlink(p: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(p)


def pycs(root: str) -> dict[str, bytes]:
    out = {}
    for d, _dirs, files in os.walk(root):
        if os.path.basename(d) == "__pycache__":
            for f in files:
                if f.endswith(".pyc"):
                    with open(os.path.join(d, f), "rb") as fh:
                        out[os.path.relpath(os.path.join(d, f), root)] = fh.read()
    return out


def pyc_source(rel: str) -> str:
    """pkg/__pycache__/mod.cpython-39[-pytest-8.4.2].pyc -> pkg/mod.py"""
    folder = os.path.dirname(os.path.dirname(rel))
    return os.path.join(folder, os.path.basename(rel).split(".", 1)[0] + ".py")


class Snapshot:
    """The pristine tree (without .git and bytecode) held in the worker's memory: writing a copy from it is
    about twice as fast as shutil.copytree, which reads every file and copies its metadata one call at a time.
    The copy is the same: contents, modes, modification times, symlinks."""

    LIMIT = 256 << 20

    def __init__(self) -> None:
        self.dirs: list[tuple[str, int, int, int]] = []          # rel, mode, atime_ns, mtime_ns
        self.files: list[tuple[str, bytes, int, int, int]] = []  # rel, data, mode, atime_ns, mtime_ns
        self.links: list[tuple[str, str]] = []
        self.umask = os.umask(0)
        os.umask(self.umask)

    @classmethod
    def from_tar(cls, data: bytes) -> Snapshot:
        """The tree of a tar (coderun.sandbox.trees); ValueError when it is over LIMIT bytes or holds
        something else than files, folders and links."""
        snap, size, now = cls(), 0, time.time_ns() if hasattr(time, "time_ns") else int(time.time() * 1e9)
        snap.dirs.append(("", 0o40755, now, now))
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            for m in tar.getmembers():
                rel, mtime = os.path.normpath(m.name), int(round(m.mtime * 1e6)) * 1000  # a tar keeps microseconds
                if m.issym():
                    snap.links.append((rel, m.linkname))
                elif m.isdir():
                    snap.dirs.append((rel, stat.S_IFDIR | m.mode, mtime, mtime))
                elif m.isfile() or m.islnk():
                    size += m.size
                    if size > cls.LIMIT:
                        raise ValueError(f"the project tree is over {cls.LIMIT >> 20} MiB")
                    body = tar.extractfile(m).read()
                    snap.files.append((rel, body, stat.S_IFREG | m.mode, mtime, mtime))
                else:
                    raise ValueError(f"{rel}: neither a file, a folder nor a link")
        return snap

    def text(self, rel: str) -> bytes | None:
        return next((data for r, data, *_ in self.files if r == rel), None)

    def write(self, dest: str) -> None:
        for rel, *_ in self.dirs:
            os.mkdir(os.path.join(dest, rel), 0o700)
        for rel, data, mode, atime, mtime in self.files:
            _write_file(os.path.join(dest, rel), data, mode, atime, mtime, self.umask)
        for rel, target in self.links:
            os.symlink(target, os.path.join(dest, rel))
        for rel, mode, atime, mtime in reversed(self.dirs):  # last: writing inside changes a folder's times
            path = os.path.join(dest, rel)
            os.chmod(path, stat.S_IMODE(mode))
            os.utime(path, ns=(atime, mtime))


def _write_file(path: str, data: bytes, mode: int, atime_ns: int, mtime_ns: int, umask: int) -> None:
    """Create `path` (it must not exist) with these bytes, permission bits and times."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, stat.S_IMODE(mode))
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if stat.S_IMODE(mode) & umask:
            os.fchmod(fd, stat.S_IMODE(mode))
        os.utime(fd, ns=(atime_ns, mtime_ns))
    finally:
        os.close(fd)


class Folder:
    """The record that lets the next sample use the sample folder as the last one left it, instead of a
    new copy: made after a fresh copy, it holds the lstat of every entry under the folder. After a
    sample, an entry is intact when its type, mode, owner, size, modification and change times, inode
    and link count are as recorded and, for a file, its bytes are the pristine ones (the after-run hashes
    say so for the project's files; the others are compared). restore() removes what the record does not
    hold and writes back everything else from memory; it answers False (the folder is then removed and
    the next sample gets a new copy) when it cannot."""

    def __init__(self, base: str, files: dict[str, bytes], links: dict[str, str]):
        self.base, self.files, self.links = base, files, links   # paths relative to base
        self.stats: dict[str, os.stat_result] = dict(self.scan(lambda rel: True))

    def scan(self, descend: Callable[[str], bool]):
        """(relative path, lstat) of the folder and everything under it, descending into the folders
        `descend` accepts."""
        yield "", os.lstat(self.base)
        todo = [""]
        while todo:
            folder = todo.pop()
            with os.scandir(os.path.join(self.base, folder)) as entries:
                found = [(os.path.join(folder, e.name), e.stat(follow_symlinks=False)) for e in entries]
            for rel, st in found:
                yield rel, st
                if stat.S_ISDIR(st.st_mode) and descend(rel):
                    todo.append(rel)

    @staticmethod
    def key(st: os.stat_result) -> tuple:
        return (st.st_mode, st.st_uid, st.st_gid, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino,
                st.st_nlink)

    def restore(self, after: dict[str, str], known: dict[str, tuple[bytes, str]]) -> bool:
        try:
            extra, bad = self.damage(after, known)
            for rel in extra:
                self.remove(rel)
            for rel in sorted(bad, key=lambda r: r.count(os.sep)):  # folders before what they hold
                self.put_back(rel)
            self.settle()
            return True
        except Exception:  # noqa: BLE001  (anything unexpected: a new copy)
            return False

    def damage(self, after: dict[str, str], known: dict[str, tuple[bytes, str]]) -> tuple[list[str], list[str]]:
        """(entries the record does not hold, recorded entries to write back)."""
        if not stat.S_ISDIR(os.lstat(self.base).st_mode):  # never read through a link put in its place
            raise OSError("the sample folder is not a folder any more")
        extra, bad, seen = [], [], set()
        recorded = self.stats
        for rel, st in self.scan(lambda rel: rel in recorded and stat.S_ISDIR(recorded[rel].st_mode)):
            seen.add(rel)
            if rel not in recorded:
                extra.append(rel)
            elif self.key(st) != self.key(recorded[rel]) or not self.intact(rel, st, after, known):
                bad.append(rel)
        return extra, bad + [rel for rel in recorded if rel not in seen]

    def intact(self, rel: str, st: os.stat_result, after: dict, known: dict) -> bool:
        if not stat.S_ISREG(st.st_mode):
            return True
        inside = rel[len("project" + os.sep):] if rel.startswith("project" + os.sep) else None
        if inside is not None and inside in after and inside in known:
            return after[inside] == known[inside][1]
        data = self.files[rel]
        with open(os.path.join(self.base, rel), "rb") as f:
            return f.read(len(data) + 1) == data

    def remove(self, rel: str) -> None:
        path = os.path.join(self.base, rel)
        if os.path.isdir(path) and not os.path.islink(path):
            rmtree(path)
        elif os.path.lexists(path):
            os.unlink(path)

    def put_back(self, rel: str) -> None:
        want, path = self.stats[rel], os.path.join(self.base, rel)
        if stat.S_ISDIR(want.st_mode):
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                st = None
            if st is None or not stat.S_ISDIR(st.st_mode):
                if st is not None:
                    os.unlink(path)
                os.mkdir(path, 0o700)
            elif (st.st_uid, st.st_gid) != (want.st_uid, want.st_gid):
                raise OSError(f"{rel}: owner changed")
            os.chmod(path, stat.S_IMODE(want.st_mode))
            return  # times: settle()
        self.remove(rel)
        if stat.S_ISLNK(want.st_mode):
            os.symlink(self.links[rel], path)
        else:  # umask -1: the mode is always set, whatever the umask
            _write_file(path, self.files[rel], want.st_mode, want.st_atime_ns, want.st_mtime_ns, -1)
        self.stats[rel] = os.lstat(path)

    def settle(self) -> None:
        """Folder modes and times as recorded (deepest first: writing in a folder changes its times),
        and the record of every folder updated (their change times moved)."""
        folders = sorted((r for r, st in self.stats.items() if stat.S_ISDIR(st.st_mode)),
                         key=lambda r: -r.count(os.sep) if r else 1)
        for rel in folders:
            want, path = self.stats[rel], os.path.join(self.base, rel)
            st = os.lstat(path)
            if (st.st_mode, st.st_mtime_ns) != (want.st_mode, want.st_mtime_ns):
                os.chmod(path, stat.S_IMODE(want.st_mode))
                os.utime(path, ns=(want.st_atime_ns, want.st_mtime_ns))
        for rel in folders:
            self.stats[rel] = os.lstat(os.path.join(self.base, rel))



class SampleFolders:
    """The worker's sample folder (scratch/s: `home`, `tmp` and the `project` copy) and what a copy of
    the pristine tree is made from: the snapshot, the kept bytecode, the pristine files' hashes."""

    def __init__(self, scratch: str):
        self.scratch = scratch
        self.bytecode: dict[str, bytes] = {}      # relative .pyc path -> content, from priming runs
        self.snapshot: Snapshot | None = None     # the pristine tree in memory
        self.known: dict[str, tuple[bytes, str]] = {}  # relative path -> pristine bytes and sha256
        self.folder: Folder | None = None         # the sample folder, when pristine and kept for the next

    def load(self, tree: bytes) -> dict[str, str]:
        """Take the pristine tree (a tar) into memory; returns its hashes, as the hasher lists a copy."""
        self.snapshot = Snapshot.from_tar(tree)
        _base, project = self.pristine()
        pristine = hashes(project)
        self.known = {rel: (data, pristine[rel]) for rel, data, *_ in self.snapshot.files if rel in pristine}
        return pristine

    def forget(self, relfile: str) -> None:
        """Drop every copy of `relfile`'s pristine bytes and bytecode this process holds: called first in a
        sample's child (and in a template, for its task's file), so nothing of the original the sample
        replaces is in the memory the sample's code runs in. Copies made here then hold an empty file in its
        place until the sample's is written."""
        files = self.snapshot.files if self.snapshot is not None else []
        for i, entry in enumerate(files):
            if entry[0] == relfile:
                files[i] = (relfile, b"", *entry[2:])
        self.known.pop(relfile, None)
        for rel in [r for r in self.bytecode if pyc_source(r) == relfile]:
            del self.bytecode[rel]
        if self.folder is not None and os.path.join("project", relfile) in self.folder.files:
            self.folder.files[os.path.join("project", relfile)] = b""

    def pristine(self) -> tuple[str, str]:
        """The sample's folder, emptied, with the pristine tree and all the kept bytecode in it."""
        self.folder = None
        base, project = self.fresh()
        self.copy_pristine(project)
        return base, project

    def sample(self) -> tuple[str, str]:
        """The pristine folder: as the last sample's tidy() put it back (see Folder), else a new copy."""
        if self.folder is not None:
            return self.folder.base, os.path.join(self.folder.base, "project")
        base, project = self.pristine()
        files = {os.path.join("project", rel): data for rel, data, *_ in self.snapshot.files}
        files.update((os.path.join("project", rel), data) for rel, data in self.bytecode.items())
        links = {os.path.join("project", rel): target for rel, target in self.snapshot.links}
        self.folder = Folder(base, files, links)
        return base, project

    def fresh(self) -> tuple[str, str]:
        """The sample's folder: always the same path, emptied (see coderun_worker's docstring)."""
        base = os.path.join(self.scratch, "s")
        rmtree(base)
        os.mkdir(base, 0o700)
        for d in ("home", "tmp"):
            os.mkdir(os.path.join(base, d))
        return base, os.path.join(base, "project")

    def copy_pristine(self, project: str) -> None:
        """The pristine tree, plus the kept bytecode."""
        self.snapshot.write(project)
        for rel, data in self.bytecode.items():
            path = os.path.join(project, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)

    def write_sample(self, project: str, relfile: str, source: str) -> None:
        """Put the spliced file in a pristine copy, and take out its kept bytecode (of the original)."""
        for rel in self.bytecode:
            if pyc_source(rel) == relfile:
                unlink(os.path.join(project, rel))
        with open(os.path.join(project, relfile), "wb") as f:
            f.write(source.encode("utf-8"))

    def tidy(self, base: str, after: dict[str, str] | None) -> None:
        """After a sample: put the folder back for the next one, or remove it (`after`: the copy's
        hashes after the run; None when the run has none)."""
        if self.folder is None or after is None or not self.folder.restore(after, self.known):
            self.folder = None
            rmtree(base)
