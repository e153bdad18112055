"""Reading test modules with `ast`: which files hold tests, of which kind, and what they import."""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def has_tests(tree: Path) -> bool:
    """Any file pytest or unittest would collect tests from (test_*.py / *_test.py, or one defining tests)."""
    for f in tree.rglob("*.py"):
        rel = f.relative_to(tree).parts
        if any(p.startswith(".") or p in ("build", "dist", "node_modules") for p in rel[:-1]):
            continue
        named = is_test_name(f.name) or f.stem in ("tests", "test") or f.parent.name in ("tests", "test", "testing")
        if named and test_kind(f):
            return True
    return False


def holds_tests(path: Path) -> bool:
    """A test directory, or a test module by its name (a benchmark script defining test_ functions is not)."""
    if path.is_dir():
        return any(is_test_name(f.name) or f.parent.name in ("tests", "test") for f in py_files(path)
                   if test_kind(f))
    return is_test_name(path.name) or path.parent.name in ("tests", "test")


def is_test_name(name: str) -> bool:
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def py_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path] if path.suffix == ".py" else []
    return sorted(p for p in path.rglob("*.py") if "__pycache__" not in p.parts) if path.is_dir() else []


def _parse(path: Path) -> ast.Module | None:
    try:
        return ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (SyntaxError, ValueError):
        return None


def test_kind(path: Path) -> str | None:
    """"unittest" for TestCase suites only, "pytest" for anything pytest-specific, None for no tests."""
    module = _parse(path)
    if module is None:
        return None
    has_case = has_plain = False
    for node in ast.walk(module):
        if isinstance(node, ast.ClassDef):
            bases = [ast.unparse(b) for b in node.bases]
            if any(b.endswith("TestCase") or b.endswith("TestSuite") for b in bases):
                has_case = True
            elif node.name.startswith("Test") and any(isinstance(n, ast.FunctionDef) and n.name.startswith("test")
                                                      for n in node.body):
                has_plain = True
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(n.split(".")[0] == "pytest" for n in names):
                has_plain = True
    has_plain |= any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name.startswith("test")
                     for n in module.body)
    if has_plain:
        return "pytest"
    return "unittest" if has_case else None


def defines_tests(path: Path) -> bool:
    """Whether a module defines test functions or test methods (not just fixtures or helpers)."""
    module = _parse(path)
    if module is None:
        return False
    for node in module.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            return True
        if isinstance(node, ast.ClassDef) and any(
                isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name.startswith("test")
                for n in node.body):
            return True
    return False


def unconditional_imports(path: Path, *, in_functions: bool = True) -> list[str]:
    """Modules imported unconditionally (imports under try/if are optional, so they are left out); without
    `in_functions`, only those that importing the module runs (pytest collects a file by importing it, so an
    import inside a function fails that test alone, when it runs)."""
    module = _parse(path)
    if module is None:
        return []
    out: list[str] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Try, ast.If)) or (sys.version_info >= (3, 11) and
                                                         isinstance(child, getattr(ast, "TryStar", ast.Try))):
                continue
            if not in_functions and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(child, ast.Import):
                out.extend(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                out.append(child.module)
            else:
                visit(child)

    visit(module)
    return out
