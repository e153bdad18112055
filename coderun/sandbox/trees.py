"""A project tree as the uncompressed tar a worker takes its copies from (`Sandbox.pristine_tree`): paths
relative to the tree's root, files, folders and symlinks with their modes and times, and never `.git` (history
holds the originals) nor bytecode (`__pycache__`, `.pyc`: a compiled original)."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

_LEFT_OUT_DIRS = frozenset({".git", "__pycache__"})
_LEFT_OUT_SUFFIXES = (".pyc", ".pyo")


def left_out(rel: str) -> bool:
    """Whether a path of the tree (relative, `/`-separated) is left out of every copy."""
    parts = rel.split("/")
    return any(p in _LEFT_OUT_DIRS for p in parts) or parts[-1] == ".git" or rel.endswith(_LEFT_OUT_SUFFIXES)


def tree_tar(root: Path) -> bytes:
    """`root` (a host folder) as a tar."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if not left_out(_rel(root, folder, d)))
            for name in [*dirs, *sorted(files)]:
                rel = _rel(root, folder, name)
                if not left_out(rel):
                    tar.add(os.path.join(folder, name), arcname=rel, recursive=False)
    return out.getvalue()


def repack(data: bytes, top: str) -> bytes:
    """Docker's archive of a folder (its entries under `top/`) as a tar of the tree alone."""
    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(data)) as src, \
            tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as dst:
        for member in src.getmembers():
            name = member.name[len(top) + 1:] if member.name.startswith(top + "/") else ""
            if not name or left_out(name):
                continue
            member.name = name
            if "path" in member.pax_headers:  # a long name is also in the member's pax header, which wins
                member.pax_headers["path"] = name
            dst.addfile(member, src.extractfile(member) if member.isfile() else None)
    return out.getvalue()


def _rel(root: Path, folder: str, name: str) -> str:
    return os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/")
