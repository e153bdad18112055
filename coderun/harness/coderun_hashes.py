"""sha256 of every file of a tree: how coderun sees what a sample's run changed. The one hasher of both
executors: the naive path runs this file's text in the sandbox with `python -I -c TEXT ROOT` after the
sample's processes are dead (it prints the JSON object); the worker imports it (sibling module).

The rules are os.walk's (topdown, followlinks=False), which the naive path used: folders named in
SKIP_DIRS and symlinks to folders are neither listed nor entered, a folder that cannot be listed is left
out, `.pyc`/`.pyo` files are left out, a symlink is `link:TARGET`, a file that cannot be read is
`unreadable:ERROR`. Standalone (stdlib only, Python 3.7).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys

SKIP_DIRS = ("__pycache__", ".git", ".pytest_cache", ".mypy_cache")


def hashes(root: str, known: dict[str, tuple[bytes, str]] | None = None) -> dict[str, str]:
    """Relative path -> sha256 (or link/unreadable mark) of every file under root. A file whose bytes
    equal its `known` content gets the known hash without hashing; comparing is cheaper, and so is
    scandir's cached file type."""
    out: dict[str, str] = {}
    known = known or {}
    todo = [("", root)]
    while todo:
        prefix, folder = todo.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            rel = prefix + entry.name
            if _is_dir(entry):
                if entry.name not in SKIP_DIRS and not _is_link(entry):
                    todo.append((rel + os.sep, entry.path))
            elif not entry.name.endswith((".pyc", ".pyo")):
                try:
                    if entry.is_symlink():
                        out[rel] = "link:" + os.readlink(entry.path)
                    else:
                        out[rel] = _file_hash(entry.path, known.get(rel))
                except OSError as e:
                    out[rel] = "unreadable:" + type(e).__name__
    return out


def _is_dir(entry: os.DirEntry) -> bool:
    """As os.walk decides: a folder or a link to one; an entry whose type cannot be read is a file."""
    try:
        return entry.is_dir()
    except OSError:
        return False


def _is_link(entry: os.DirEntry) -> bool:
    """As os.walk decides whether to enter a folder (os.path.islink: False when it cannot tell)."""
    try:
        return entry.is_symlink()
    except OSError:
        return False


def _file_hash(path: str, known: tuple[bytes, str] | None) -> str:
    h = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY)
    try:
        if known is not None:
            head = os.read(fd, len(known[0]) + 1)
            if head == known[0]:
                return known[1]
            h.update(head)
        for chunk in iter(lambda: os.read(fd, 1 << 20), b""):
            h.update(chunk)
    finally:
        os.close(fd)
    return h.hexdigest()


if __name__ == "__main__":
    print(json.dumps(hashes(sys.argv[1])))
