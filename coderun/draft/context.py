"""What every part of a draft shares: the tree and its metadata, the notes and warnings written so far, the
machine's answers (interpreters, the package index), and the project's layout (import root, packages)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from coderun.draft.metadata import Metadata
from coderun.draft.testfiles import is_test_name

NAMESPACES = {"zope", "backports", "jaraco", "sphinxcontrib", "azure"}
NOT_PACKAGES = {"tests", "test", "testing", "docs", "doc", "examples", "example", "benchmarks", "scripts",
                "build", "dist", "tools", "bin", "site-packages", "node_modules", "venv", ".venv"}


@dataclass(frozen=True)
class Probes:
    """What a draft asks of the machine rather than the tree (make.py answers)."""

    has_python: Callable[[int], bool]    # an interpreter for Python 3.<minor> is on PATH
    on_index: Callable[[str], bool]      # pip's package index has this requirement's distribution
    release_count: Callable[[str], int] = lambda name: 0  # how many releases the index has of a distribution


@dataclass
class DraftContext:
    tree: Path
    meta: Metadata
    warnings: list[str]
    probes: Probes
    as_of: tuple[dt.date, str] | None = None
    python: str | None = None     # --python: the user's choice over the evidence
    undocumented: bool = False    # --undocumented: functions without docstrings are candidates too
    notes: dict[str, list[str]] = field(default_factory=dict)

    def note(self, section: str, text: str) -> None:
        self.notes.setdefault(section, []).append(text)

    # -- layout ------------------------------------------------------------------------------------

    def import_root(self) -> str:
        root, why = self.find_import_root()
        if why:
            self.note("import_root", why)
        return root

    def find_import_root(self) -> tuple[str, str]:
        """(the directory the packages live in, why), without a note."""
        pdir = self.meta.package_dir
        if pdir and (self.tree / pdir).is_dir():
            return pdir, f"the packages live in {pdir}/ (package_dir)"
        src = self.tree / "src"
        if src.is_dir() and any((d / "__init__.py").is_file() or d.suffix == ".py" for d in src.iterdir()):
            return "src", "src layout: the packages live in src/"
        return ".", ""

    def packages(self, import_root: str) -> tuple[list[str], list[str]]:
        """(package directories, top-level modules) at the import root, relative to the tree."""
        root = self.tree / import_root
        pkgs, mods = [], []
        for p in sorted(root.iterdir()):
            rel = p.relative_to(self.tree).as_posix()
            if p.name.startswith((".", "_")) or p.name in NOT_PACKAGES or p.name.endswith(".egg-info"):
                continue
            if p.is_dir() and ((p / "__init__.py").is_file() or (p.name in NAMESPACES)):
                pkgs.append(rel)
            elif p.suffix == ".py" and p.name not in ("setup.py", "conftest.py", "noxfile.py", "fabfile.py",
                                                      "tasks.py", "conf.py", "versioneer.py") \
                    and not is_test_name(p.name) \
                    and (self.meta.py_modules is None or p.stem in self.meta.py_modules):
                mods.append(rel)  # with py_modules declared, a root benchmark.py is not the project's
        return pkgs, mods

    def discovery(self, import_root: str, test_paths: list[str]) -> dict:
        pkgs, mods = self.packages(import_root)
        include = [g for p in pkgs for g in (f"{p}/*.py", f"{p}/**/*.py")] or mods
        exclude = []
        for t in test_paths:  # a test path that is a package itself (its doctests) stays discovered
            if any(t.startswith(p + "/") for p in pkgs) or t in mods:
                exclude += [t, f"{t}/**"] if (self.tree / t).is_dir() else [t]
        self.note("tasks", "functions are discovered in the project's own packages, not its tests")
        out: dict[str, object] = {"include": include}
        if exclude:
            out["exclude"] = exclude
        return out
