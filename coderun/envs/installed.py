"""Installed copies of a project's own code: what `pip install` of the project (install.project, extras) put in
an environment's site-packages. The tests import the project from the sample's copy, so these files are never
run; but they are the original functions, readable by a sample. The local backend hides them from its
sandboxes (an empty folder or file in their place); an image's last layer deletes them.

    installed_copies(venv, tree, import_root) -> paths under the venv's site-packages

A copy is a module at the same path under site-packages as under the project's import root. A folder is taken
whole when every module in it is the project's; else the project's modules in it one by one (a namespace
package such as zope holds other distributions too). Standalone (stdlib only, Python 3.7): the image build runs
this file as `python installed.py TREE [--delete]`, which prints (or deletes) the copies of that interpreter's
site-packages.
"""

from __future__ import annotations

import glob
import os
import shutil
import sys
from pathlib import Path


def installed_copies(venv: str, tree: str, import_root: str = "") -> list[str]:
    root = os.path.join(tree, import_root) if import_root else tree
    out: list[str] = []
    for site in sorted(glob.glob(os.path.join(venv, "lib", "python*", "site-packages"))):
        out += site_copies(site, root)
    return out


def site_copies(site: str, root: str) -> list[str]:
    """The copies of `root`'s modules under the site-packages folder `site`."""
    if not os.path.isdir(root) or not os.path.isdir(site):
        return []
    ours = _modules(root)
    out: list[str] = []
    for name in sorted(os.listdir(root)):
        if os.path.exists(os.path.join(site, name)) and (name in ours or os.path.isdir(os.path.join(root, name))):
            out += _copies(site, ours, name)
    return out


def _copies(site: str, ours: set[str], rel: str) -> list[str]:
    path = os.path.join(site, rel)
    if os.path.islink(path) or not os.path.isdir(path):
        return [path] + _bytecode(site, rel) if rel in ours else []
    theirs = _modules(path, prefix=rel)
    if not theirs & ours:
        return []
    if theirs <= ours:
        return [path]
    out: list[str] = []
    for name in sorted(os.listdir(path)):
        if name != "__pycache__":
            out += _copies(site, ours, os.path.join(rel, name))
    return out


def _bytecode(site: str, rel: str) -> list[str]:
    folder, module = os.path.split(rel)
    stem = module[:-3] if module.endswith(".py") else module
    return sorted(glob.glob(os.path.join(site, folder, "__pycache__", f"{glob.escape(stem)}.*.pyc")))


def _modules(root: str, prefix: str = "") -> set[str]:
    """Relative paths of the .py files under root (`prefix` put before them)."""
    out = set()
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in (".git", "__pycache__")]
        rel = os.path.relpath(folder, root)
        for f in files:
            if f.endswith(".py"):
                out.add(os.path.normpath(os.path.join(prefix, rel, f)))
    return out


SOURCE = Path(__file__).read_text(encoding="utf-8")


def main(argv: list[str]) -> int:
    import site as _site

    delete = "--delete" in argv
    tree = [a for a in argv if a != "--delete"][0]
    for folder in _site.getsitepackages():
        for path in site_copies(folder, tree):
            print(path)
            if delete:
                shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.unlink(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
