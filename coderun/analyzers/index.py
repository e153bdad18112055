"""The project's files as modules: parsing (tree-sitter), module names, and lookups across files.

A module is "of the project" when it, or a package above it, is a file or regular package of the
repository. Namespace packages (`zope`) claim nothing: `zope.event` stays third-party while
`zope.interface.declarations` belongs to zope.interface's tree.
"""

from __future__ import annotations

import ast
import os
import warnings
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import tree_sitter_python
from tree_sitter import Language, Node, Parser

from coderun.analyzers.scopes import Binding, Scope, ScopeBuilder

_LANGUAGE = Language(tree_sitter_python.language())
_SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__", ".tox", ".nox", ".venv", "venv", "env", "node_modules",
              "site-packages", ".eggs", "build", ".mypy_cache", ".pytest_cache"}
_NAMESPACE_MARKERS = (b"declare_namespace", b"extend_path")


def python_files(root: Path) -> list[str]:
    """Repository-relative posix paths of the .py files, skipping VCS, caches and virtualenvs."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.endswith(".egg-info")
                             and not (d.startswith(".") and d != "."))
        rel_dir = Path(dirpath).relative_to(root)
        out += [(rel_dir / f).as_posix() for f in sorted(filenames) if f.endswith(".py")]
    return out


@dataclass(eq=False)
class SourceFile:
    rel: str
    module: str
    is_package: bool
    data: bytes
    tree_root: Node
    scope: Scope

    @property
    def package(self) -> str:
        return self.module if self.is_package else self.module.rpartition(".")[0]

    @cached_property
    def classes(self) -> dict[str, Scope]:
        return {s.qualname: s for s in self.scope.walk() if s.kind == "class"}

    @cached_property
    def text(self) -> str:
        return self.data.decode("utf-8", "replace")

    @cached_property
    def line_starts(self) -> list[int]:
        starts, pos = [0], 0
        while (pos := self.data.find(b"\n", pos) + 1) > 0:
            starts.append(pos)
        return starts

    def char_column(self, row: int, byte_col: int) -> int:
        """jedi counts columns in characters, tree-sitter in bytes."""
        start = self.line_starts[row]
        return len(self.data[start:start + byte_col].decode("utf-8", "replace"))


class ParseFailure(Exception):
    pass


@dataclass
class ProjectIndex:
    root: Path
    import_root: str = "."
    files: list[str] = field(default_factory=list)
    # Files the project's Python rejects (see pyfacts.syntax_errors); None: ask this interpreter.
    invalid: dict[str, str] | None = None
    _parsed: dict[str, SourceFile | ParseFailure] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.root = Path(self.root)
        self._parser = Parser(_LANGUAGE)
        self.modules: dict[str, str] = {}          # dotted module -> rel path
        self.namespaces: set[str] = set()
        base = Path(self.import_root).as_posix().strip("/")
        base = "" if base in ("", ".") else base + "/"
        for rel in self.files:
            for mod in _module_names(rel, base):
                self.modules.setdefault(mod, rel)
            if rel.endswith("__init__.py"):
                head = (self.root / rel).read_bytes()[:4096]
                if any(m in head for m in _NAMESPACE_MARKERS):
                    for mod in _module_names(rel, base):
                        self.namespaces.add(mod)
        self._base = base

    # -- modules ------------------------------------------------------------------------------------
    def module_of(self, rel: str) -> tuple[str, bool]:
        names = _module_names(rel, self._base)
        return (names[0] if names else rel.removesuffix(".py").replace("/", ".")), rel.endswith("__init__.py")

    def project_prefix(self, dotted: str) -> str | None:
        """The longest prefix of `dotted` that is a (non-namespace) module of the project."""
        parts = dotted.split(".")
        for i in range(len(parts), 0, -1):
            prefix = ".".join(parts[:i])
            if prefix in self.modules and prefix not in self.namespaces:
                return prefix
        return None

    # -- parsing ------------------------------------------------------------------------------------
    def parse(self, rel: str) -> SourceFile:
        """The parsed file; raises ParseFailure for files Python itself rejects (e.g. Python 2)."""
        cached = self._parsed.get(rel)
        if isinstance(cached, ParseFailure):
            raise cached
        if cached is not None:
            return cached
        data = (self.root / rel).read_bytes()
        reason = self.invalid.get(rel) if self.invalid is not None else _host_syntax_error(data, rel)
        if reason is not None:
            failure = ParseFailure(reason)
            self._parsed[rel] = failure
            raise failure
        tree = self._parser.parse(data)
        module, is_pkg = self.module_of(rel)
        package = module if is_pkg else module.rpartition(".")[0]
        scope = ScopeBuilder(module, package).build(tree.root_node)
        sf = SourceFile(rel, module, is_pkg, data, tree.root_node, scope)
        self._parsed[rel] = sf
        return sf

    def parse_module(self, module: str) -> SourceFile | None:
        rel = self.modules.get(module)
        if rel is None:
            return None
        try:
            return self.parse(rel)
        except (ParseFailure, OSError):
            return None

    # -- lookups across files -----------------------------------------------------------------------
    def lookup(self, dotted: str, depth: int = 0) -> tuple[SourceFile, Binding | None] | None:
        """Follow `pkg.mod.Name` (through re-exports) to the file and module-level binding defining it.

        Returns (file, None) when `dotted` is a project module itself; None outside the project.
        """
        if depth > 8:
            return None
        prefix = self.project_prefix(dotted)
        if prefix is None:
            return None
        sf = self.parse_module(prefix)
        if sf is None:
            return None
        rest = dotted[len(prefix):].lstrip(".")
        if not rest:
            return sf, None
        name, _, more = rest.partition(".")
        bindings = sf.scope.bindings.get(name)
        if not bindings:
            for star_mod, _rel, _line in sf.scope.star_imports:
                found = self.lookup(f"{star_mod}.{rest}", depth + 1) if star_mod else None
                if found is not None:
                    return found
            return None
        b = bindings[0]
        if b.kind == "import" and b.target:
            if b.target == dotted:
                return None
            return self.lookup(b.target + ("." + more if more else ""), depth + 1)
        if more and b.kind == "class":
            cls = sf.classes.get(b.target or name)
            member = cls.bindings.get(more.split(".")[0]) if cls is not None else None
            if member:
                return sf, member[0]
        return sf, b

    def resolve_class(self, sf: SourceFile, expr: str, depth: int = 0) -> tuple[SourceFile, Scope] | None:
        """The class a base-class expression written in `sf` names, when the project defines it."""
        if depth > 8 or not expr:
            return None
        name, _, rest = expr.partition(".")
        bindings = sf.scope.bindings.get(name)
        if not bindings:
            return None
        b = bindings[0]
        if b.kind == "class" and not rest:
            cls = sf.classes.get(b.target or name)
            return (sf, cls) if cls is not None else None
        if b.kind == "import" and b.target:
            found = self.lookup(b.target + ("." + rest if rest else ""))
            if found is None or found[1] is None:
                return None
            other, binding = found
            if binding.kind == "class":
                cls = other.classes.get(binding.target or "")
                return (other, cls) if cls is not None else None
        return None


def _host_syntax_error(data: bytes, rel: str) -> str | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(data, filename=rel)
    except SyntaxError as e:
        return f"not valid Python 3: {e.msg} (line {e.lineno})"
    except ValueError as e:  # null bytes
        return f"not parseable: {e}"
    return None


def _module_names(rel: str, base: str) -> list[str]:
    """Dotted names of a file: relative to the import root, and to the repository root."""
    out = []
    for prefix in ([base] if base else []) + [""]:
        if prefix and not rel.startswith(prefix):
            continue
        path = rel[len(prefix):].removesuffix(".py")
        if path.endswith("/__init__"):
            path = path[: -len("/__init__")]
        elif path == "__init__":
            continue
        parts = path.split("/")
        if all(p.isidentifier() for p in parts):
            out.append(".".join(parts))
    return out
