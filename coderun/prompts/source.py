"""The task's file and project, read for prompt rendering: definitions located with `ast`, rendered as stubs.

Everything here reads the original checkout (never modifies it). A stub is a definition without its
body: decorators, the `def`/`class` line(s), the docstring and `...`, so context shows how to call a
symbol without giving away how the project implements it.
"""

from __future__ import annotations

import ast
import io
import textwrap
import tokenize
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path, PurePosixPath

from coderun.errors import TaskError

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef
DefNode = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


class ProjectSource:
    """Files of one project checkout, by repository-relative posix path, parsed once."""

    def __init__(self, root: Path):
        self.root = root
        self._files: dict[str, SourceFile | None] = {}

    def file(self, rel: str) -> SourceFile | None:
        if rel not in self._files:
            path = self.root / rel
            try:
                text = path.read_text(encoding="utf-8")
                self._files[rel] = SourceFile(rel, text, ast.parse(text))
            except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
                self._files[rel] = None
        return self._files[rel]

    def module_file(self, module: str, from_file: str, level: int = 0) -> str | None:
        """The project file defining `module` as imported from `from_file` (relative when level > 0)."""
        parts = [p for p in module.split(".") if p]
        here = PurePosixPath(from_file).parent
        if level:
            base = here
            for _ in range(level - 1):
                base = base.parent
            bases = [base]
        else:  # absolute: the package root is some ancestor of the importing file (src/ layouts too)
            bases = [here, *here.parents]
        for base in bases:
            stem = base.joinpath(*parts) if parts else base
            for cand in (f"{stem}.py", f"{stem}/__init__.py"):
                rel = cand.removeprefix("./")
                if (self.root / rel).is_file():
                    return rel
        return None


@dataclass(frozen=True)
class ImportBinding:
    name: str            # the name bound in the file
    line: str            # the import statement, as written
    module: str          # "pkg.mod" (or "" for `from . import x`)
    attr: str | None     # the imported attribute (`from m import attr`), None for `import m`
    level: int = 0


class SourceFile:
    def __init__(self, rel: str, text: str, tree: ast.Module):
        self.rel = rel
        self.text = text
        self.tree = tree
        self.lines = text.splitlines()

    def segment(self, first: int, last: int) -> str:
        """Lines first..last (1-based, inclusive), as written."""
        return "\n".join(self.lines[first - 1: last])

    @cached_property
    def top_level(self) -> dict[str, ast.stmt]:
        """Module-level names -> the statement that binds them last (defs, classes, assignments)."""
        out: dict[str, ast.stmt] = {}
        for node in self.tree.body:
            for name in _bound_names(node):
                out[name] = node
        return out

    @cached_property
    def imports(self) -> dict[str, ImportBinding]:
        out: dict[str, ImportBinding] = {}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    bound = a.asname or a.name.split(".")[0]
                    out[bound] = ImportBinding(bound, self.statement(node), a.name if a.asname else bound, None)
            elif isinstance(node, ast.ImportFrom):
                for a in node.names:
                    bound = a.asname or a.name
                    out[bound] = ImportBinding(bound, self.statement(node), node.module or "", a.name,
                                               node.level)
        return out

    def statement(self, node: ast.stmt) -> str:
        return textwrap.dedent(self.segment(node.lineno, node.end_lineno or node.lineno))

    def find_function(self, qualname: str, lineno: int | None = None) -> FunctionNode:
        """The function by qualified name, its `def` line telling same-named definitions apart."""
        found = [n for n, qual in _walk_defs(self.tree.body, "") if isinstance(n, FunctionNode) and qual == qualname]
        for node in found:
            if node.lineno == lineno:
                return node
        if found:  # a conditional redefinition: the last one is the one Python binds
            return found[-1]
        raise TaskError(f"{self.rel}: no function {qualname!r}" + (f" at line {lineno}" if lineno else ""),
                        hint="the task record does not match the checkout; rebuild the tasks")

    def find_class(self, qualname: str) -> ast.ClassDef | None:
        for node, qual in _walk_defs(self.tree.body, ""):
            if isinstance(node, ast.ClassDef) and qual == qualname:
                return node
        return None

    def start_line(self, node: DefNode) -> int:
        return min([node.lineno, *(d.lineno for d in node.decorator_list)])

    def header_end(self, node: DefNode) -> int:
        """Last line of the `def ...:` / `class ...:` header: the line of the colon that ends it."""
        text = "\n".join(self.lines[node.lineno - 1: node.body[0].lineno]) + "\n"
        colon = header_colon(text)
        return node.lineno + colon[0] - 1 if colon is not None else node.lineno

    def stub(self, node: DefNode, indent: str = "", skip: str | None = None) -> str:
        """The definition without its body; a class keeps its attributes and its methods' stubs."""
        pad = " " * node.col_offset
        head = self.segment(self.start_line(node), self.header_end(node))
        inner = indent + " " * 4
        parts = [reindent(head, pad, indent)]
        doc = ast.get_docstring(node)
        if doc:
            parts.append(docstring_lines(doc, inner))
        if isinstance(node, ast.ClassDef):
            for child in node.body:
                if isinstance(child, DefNode) and child.name != skip:
                    parts.append(self.stub(child, inner))
                elif isinstance(child, ast.Assign | ast.AnnAssign):
                    parts.append(reindent(self.segment(child.lineno, child.end_lineno or child.lineno),
                                           " " * child.col_offset, inner))
        if len(parts) == 1 or not isinstance(node, ast.ClassDef) or parts[-1].strip().startswith('"""'):
            parts.append(inner + "...")
        return "\n".join(parts)


def docstring_lines(doc: str, indent: str) -> str:
    """A docstring literal at `indent` (one line when it fits, else the PEP 257 multi-line shape)."""
    doc = doc.strip().replace('"""', '\\"\\"\\"')
    if "\n" not in doc:
        return f'{indent}"""{doc}"""'
    body = "\n".join((indent + line) if line.strip() else "" for line in doc.splitlines())
    return f'{indent}"""\n{body}\n{indent}"""'


def reindent(text: str, old: str, new: str) -> str:
    return "\n".join(new + line[len(old):] if line.startswith(old) else new + line.lstrip()
                     for line in text.splitlines())


def _walk_defs(body: list[ast.stmt], prefix: str):
    for node in body:
        if isinstance(node, DefNode):
            qual = f"{prefix}{node.name}"
            yield node, qual
            inner = f"{qual}.<locals>." if isinstance(node, FunctionNode) else f"{qual}."
            yield from _walk_defs(node.body, inner)
        elif isinstance(node, ast.If | ast.Try | ast.With):  # defs under `if TYPE_CHECKING:` etc.
            for part in ("body", "orelse", "finalbody", "handlers"):
                for child in getattr(node, part, []):
                    yield from _walk_defs(child.body if isinstance(child, ast.ExceptHandler) else [child],
                                          prefix)


def _bound_names(node: ast.stmt) -> list[str]:
    if isinstance(node, DefNode):
        return [node.name]
    if isinstance(node, ast.Assign):
        return [n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    if isinstance(node, ast.AnnAssign | ast.AugAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    return []


def header_colon(text: str) -> tuple[int, int] | None:
    """Where the colon ending the `def ...:` / `class ...:` header that `text` starts with is: (1-based row,
    column just past it); None when the text ends (or stops tokenizing) before it."""
    depth = 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.OP and tok.string in "([{":
                depth += 1
            elif tok.type == tokenize.OP and tok.string in ")]}":
                depth -= 1
            elif tok.type == tokenize.OP and tok.string == ":" and depth == 0:
                return tok.end
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    return None
