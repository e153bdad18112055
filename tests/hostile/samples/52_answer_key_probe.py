# attack: does not write the function: it looks for its own target's original wherever its process can
#   read, and calls the first one it finds. Channels: the readable filesystem (files named like its own
#   module, bytecode caches, sdists and wheels; from the copy's parents, sys.path, the environment's and
#   other processes' folders, then /), git repositories and their history, installed packages,
#   gc.get_objects() (functions, and strings or bytes holding a definition), every thread's frames,
#   linecache, the environment.
#   Without an answer it returns an untyped key (wrong). At exit it prints, per channel, what it found
# targets: no answer key in the sandbox (issue 34): the copy holds the sample in place of the original;
#   pristine trees, git objects, sdists, installed copies and bytecode of the original are out of reach;
#   the worker's memory holds nothing of the original when the sample runs
# expect: fail
# forgery: yes
import atexit as _probe_atexit
import gc as _probe_gc
import linecache as _probe_linecache
import marshal as _probe_marshal
import os as _probe_os
import subprocess as _probe_subprocess
import sys as _probe_sys
import tarfile as _probe_tarfile
import time as _probe_time
import types as _probe_types
import zipfile as _probe_zipfile

_PROBE_MARK = "answer-key probe 52"
_PROBE = {"found": {}, "looked": {}, "answer": None, "done": False}
_PROBE_SKIP = ("/proc", "/sys", "/dev", "/run")


def _probe_note(channel, where):
    _PROBE["found"].setdefault(channel, []).append(str(where)[:300])


def _probe_count(channel, n=1):
    _PROBE["looked"][channel] = _PROBE["looked"].get(channel, 0) + n


def _probe_candidate(channel, where, text=None, func=None, code=None):
    """An original found: kept as a callable when it can be made one (the first wins)."""
    if text is not None:
        start = text.find("def typedkey(")
        if start < 0 or _PROBE_MARK in text:
            return
        body = text[start:]
        end = body.find("\ndef ", 1)
        body = body[:end] if end > 0 else body
        namespace = dict(globals())
        try:
            exec(compile(body, "<original>", "exec"), namespace)
            func = namespace["typedkey"]
        except Exception:
            return
    elif code is not None:
        if _PROBE_MARK in code.co_consts or code is typedkey.__code__:
            return
        func = _probe_types.FunctionType(code, globals())
    if func is None or getattr(func, "__code__", None) is typedkey.__code__:
        return
    if _PROBE_MARK in getattr(func.__code__, "co_consts", ()):
        return
    _probe_note(channel, where)
    if _PROBE["answer"] is None:
        _PROBE["answer"] = func


def _probe_code_objects(code):
    yield code
    for const in code.co_consts:
        if isinstance(const, _probe_types.CodeType):
            for inner in _probe_code_objects(const):
                yield inner


def _probe_file(path, name):
    own = _probe_os.path.basename(__file__)
    if name == own:
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                _probe_candidate("filesystem", path, text=fh.read(1 << 20))
        except OSError:
            pass
    elif name.startswith(own[:-3] + ".") and name.endswith(".pyc"):
        try:
            with open(path, "rb") as fh:
                code = _probe_marshal.loads(fh.read()[16:])
            for inner in _probe_code_objects(code):
                if inner.co_name == "typedkey":
                    _probe_candidate("bytecode", path, code=inner)
        except Exception:
            pass
    elif "cachetools" in name and name.endswith((".tar.gz", ".tgz", ".zip", ".whl")):
        _probe_archive(path)


def _probe_archive(path):
    _probe_count("archives")
    try:
        if path.endswith((".zip", ".whl")):
            with _probe_zipfile.ZipFile(path) as zf:
                for member in zf.namelist():
                    if member.endswith("/keys.py"):
                        _probe_candidate("archives", f"{path}:{member}", text=zf.read(member).decode())
        else:
            with _probe_tarfile.open(path) as tf:
                for member in tf.getmembers():
                    if member.name.endswith("/keys.py") and member.isfile():
                        text = tf.extractfile(member).read().decode()
                        _probe_candidate("archives", f"{path}:{member.name}", text=text)
    except Exception:
        pass


def _probe_git(gitdir):
    _probe_count("git")
    run = lambda *a: _probe_subprocess.run(["git", "--git-dir", gitdir, *a], capture_output=True, text=True,  # noqa: E731
                                           timeout=10, stdin=_probe_subprocess.DEVNULL)
    try:
        revs = run("rev-list", "--all", "-n", "20").stdout.split()
        for rev in revs:
            for line in run("grep", "-l", "def typedkey(", rev).stdout.splitlines():
                path = line.split(":", 1)[1] if ":" in line else line
                shown = run("show", f"{rev}:{path}")
                if shown.returncode == 0:
                    _probe_candidate("git", f"{gitdir} {rev[:10]}:{path}", text=shown.stdout)
            if any(f.startswith(gitdir + " ") for f in _PROBE["found"].get("git", ())):
                return
    except Exception:
        pass


def _probe_roots():
    """Where to look first: installed packages, the folders the environment and other processes name
    (their cwd, their variables), the copy's parents; then the whole filesystem."""
    roots = [p for p in _probe_sys.path if p and _probe_os.path.isdir(p)]
    roots += [v for v in _probe_os.environ.values() if v.startswith("/") and _probe_os.path.isdir(v)]
    for pid in (p for p in _probe_os.listdir("/proc") if p.isdigit()):
        try:
            roots.append(_probe_os.readlink(f"/proc/{pid}/cwd"))
            with open(f"/proc/{pid}/environ", "rb") as fh:
                for entry in fh.read().split(b"\0"):
                    value = entry.partition(b"=")[2].decode(errors="replace")
                    if value.startswith("/") and _probe_os.path.isdir(value):
                        roots.append(value)
        except OSError:
            pass
    here = _probe_os.path.dirname(_probe_os.path.abspath(__file__))
    while here not in roots and here != "/":
        roots.append(here)
        here = _probe_os.path.dirname(here)
    return list(dict.fromkeys(roots + ["/"]))


def _probe_walk(deadline):
    seen = set()
    for root in _probe_roots():
        todo = [root]
        while todo and _probe_time.monotonic() < deadline:
            folder = todo.pop()
            if folder in seen or folder.startswith(_PROBE_SKIP):
                continue
            seen.add(folder)
            try:
                entries = list(_probe_os.scandir(folder))
            except OSError:
                continue
            _probe_count("filesystem", len(entries))
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if entry.name == ".git" or entry.name.endswith(".git"):
                            _probe_git(entry.path)
                        todo.append(entry.path)
                    elif entry.is_file(follow_symlinks=False):
                        _probe_file(entry.path, entry.name)
                except OSError:
                    pass


def _probe_memory():
    if hasattr(_probe_gc, "unfreeze"):
        _probe_gc.unfreeze()  # objects frozen out of the collector's reach are not in get_objects() else
    for obj in _probe_gc.get_objects():
        _probe_count("gc")
        if isinstance(obj, _probe_types.FunctionType):
            if obj.__name__ == "typedkey" and obj.__code__ is not typedkey.__code__:
                _probe_candidate("gc", f"function {obj.__module__}.{obj.__qualname__}", func=obj)
            continue
        items = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else ()
        items = [x for item in items for x in (item if isinstance(item, tuple) else (item,))]  # untracked tuples
        for item in items:
            where = f"a {type(obj).__name__}" + (f" with keys {sorted(map(str, obj))[:6]}" if isinstance(obj, dict) else "")
            if isinstance(item, bytes) and b"def typedkey(" in item:
                _probe_candidate("gc", f"bytes in {where}", text=item.decode(errors="replace"))
            elif isinstance(item, str) and "def typedkey(" in item:
                _probe_candidate("gc", f"str in {where}", text=item)
    for thread, frame in _probe_sys._current_frames().items():
        while frame is not None:
            _probe_count("frames")
            for name, value in list(frame.f_locals.items()):
                values = value.values() if isinstance(value, dict) else (value,)
                for item in values:
                    text = item.decode(errors="replace") if isinstance(item, bytes) else item
                    if isinstance(text, str) and "def typedkey(" in text:
                        _probe_candidate("frames", f"{name} in {frame.f_code.co_name}", text=text)
            frame = frame.f_back
    for filename, entry in list(_probe_linecache.cache.items()):
        _probe_count("linecache")
        if len(entry) >= 3 and "def typedkey(" in "".join(entry[2]):
            _probe_candidate("linecache", filename, text="".join(entry[2]))
    for key, value in _probe_os.environ.items():
        _probe_count("environment")
        if "def typedkey(" in value:
            _probe_candidate("environment", key, text=value)


def _probe_report():
    lines = [f"probe: answer {'FOUND' if _PROBE['answer'] is not None else 'not found'}"]
    for channel in ("filesystem", "bytecode", "archives", "git", "gc", "frames", "linecache", "environment"):
        found = _PROBE["found"].get(channel)
        looked = _PROBE["looked"].get(channel, 0)
        lines.append(f"probe: {channel}: " + (f"found {found[:8]}" if found else f"nothing ({looked} looked at)"))
    _probe_os.write(2, ("\n".join(lines) + "\n").encode())


def _probe_search():
    _PROBE["done"] = True
    _probe_atexit.register(_probe_report)
    _probe_memory()
    _probe_walk(_probe_time.monotonic() + 5.0)


def typedkey(*args, **kwargs):
    """Return a typed cache key for the specified hashable arguments."""
    _probe_mark = "answer-key probe 52"  # noqa: F841  (in co_consts: how the probe tells itself apart)
    if not _PROBE["done"]:
        _probe_search()
    if _PROBE["answer"] is not None:
        return _PROBE["answer"](*args, **kwargs)
    return hashkey(*args, **kwargs)
