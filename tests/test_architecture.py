"""The package's shape (issue 20): short modules and functions, and stages that import only earlier stages.

Read with `ast`, nothing is imported or run. Each test lists every violation at once, naming the file, the
line and what to do about it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "coderun"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60
# The order data flows in: a module may import its own stage and earlier ones, never a later one.
STAGES = ("shared", "harness", "manifests", "envs", "sandbox", "analyzers", "runner", "rigor", "tasks", "prompts",
          "generate", "evaluation", "report", "rank", "importers", "studies", "cli")
# Modules at the package's top level: the shared ones anyone may import, and the entry point.
TOP_LEVEL = {"__init__": "shared", "errors": "shared", "config": "shared", "records": "shared", "choices": "shared",
             "events": "shared", "__main__": "cli"}
# Shipped into the sandbox and run by the project's interpreter on their own: they import nothing of coderun.
HARNESS = PACKAGE / "harness"


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _rel(path: Path) -> str:
    return path.relative_to(PACKAGE.parent).as_posix()


def _dotted(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(dotted: str) -> bool:
    path = PACKAGE.parent.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def stage_of(module: str) -> str:
    """The stage of a dotted module name inside coderun ("coderun.tasks.build" -> "tasks")."""
    parts = module.split(".")
    if len(parts) == 1:
        return "shared"
    return TOP_LEVEL.get(parts[1], parts[1])


def imported_modules(path: Path, tree: ast.Module) -> list[tuple[int, str]]:
    """(line, dotted name) of every coderun module `path` imports, anywhere in the file (functions too)."""
    package = _dotted(path) if path.name == "__init__.py" else _dotted(path).rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            # `from coderun import tasks` imports the module coderun.tasks, `from coderun import x` coderun
            found += [(node.lineno, f"{base}.{a.name}" if _is_module(f"{base}.{a.name}") else base)
                      for a in node.names]
    ours = [(line, name) for line, name in found if name == "coderun" or name.startswith("coderun.")]
    return sorted(set(ours))


def _parsed() -> list[tuple[Path, str, ast.Module]]:
    out = []
    for path in _modules():
        text = path.read_text(encoding="utf-8")
        out.append((path, text, ast.parse(text, filename=str(path))))
    return out


def test_stage_order_is_the_documented_one():
    """Every folder of the package is a stage of STAGES (a new folder must be placed in the order)."""
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"}
    top = {p.stem for p in PACKAGE.glob("*.py")}
    assert folders <= set(STAGES), f"place {sorted(folders - set(STAGES))} in STAGES, in the order data flows"
    assert top <= set(TOP_LEVEL), f"top-level modules {sorted(top - set(TOP_LEVEL))}: give them a stage's folder"


def test_no_module_over_500_lines():
    long = [f"{_rel(p)}: {n} lines" for p, text, _ in _parsed() if (n := len(text.splitlines())) > MAX_MODULE_LINES]
    assert not long, (f"modules over {MAX_MODULE_LINES} lines; split each by what its parts do, into modules "
                      "of the same stage:\n  " + "\n  ".join(long))


def test_no_function_over_60_lines():
    long = []
    for path, _, tree in _parsed():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long.append(f"{_rel(path)}:{node.lineno} {node.name}(): {n} lines")
    assert not long, (f"functions over {MAX_FUNCTION_LINES} lines; extract named steps from each:\n  "
                      + "\n  ".join(long))


def test_no_stage_imports_a_later_stage():
    """'Nothing imports a stage that runs after it' (shared modules are for anyone; cli may import all)."""
    upward = []
    for path, _, tree in _parsed():
        if path.is_relative_to(HARNESS):
            continue
        own = stage_of(_dotted(path))
        for line, name in imported_modules(path, tree):
            other = stage_of(name)
            if STAGES.index(other) > STAGES.index(own):
                upward.append(f"{_rel(path)}:{line} ({own}) imports {name} ({other})")
    assert not upward, ("modules importing a stage that runs after their own; move what they need down to "
                        "their stage or an earlier one, or have the later stage pass it in. Stage order: "
                        + " -> ".join(STAGES) + "\n  " + "\n  ".join(upward))


def test_harness_files_import_nothing_of_coderun():
    """They are copied into the sandbox and run by the project's interpreter, where coderun is not installed."""
    found = [f"{_rel(p)}:{line} imports {name}" for p, _, tree in _parsed() if p.is_relative_to(HARNESS)
             for line, name in imported_modules(p, tree)]
    assert not found, "harness files must run standalone; copy nothing of coderun in:\n  " + "\n  ".join(found)


@pytest.mark.parametrize(("source", "module", "expected"), [
    ("from coderun.evaluation.evaluate import x\n", "coderun/tasks/build.py", ["coderun.evaluation.evaluate"]),
    ("def f():\n    from coderun import report\n", "coderun/runner/grade.py", ["coderun.report"]),
    ("from ..report import flags\n", "coderun/runner/grade.py", ["coderun.report.flags"]),
    ("from . import store\n", "coderun/tasks/__init__.py", ["coderun.tasks.store"]),
    ("from coderun.tasks import build, store\n", "coderun/cli/tasks.py", ["coderun.tasks.build", "coderun.tasks.store"]),
    ("from coderun import __version__\n", "coderun/cli/main.py", ["coderun"]),
    ("import os\nimport coderun.errors\n", "coderun/tasks/build.py", ["coderun.errors"]),
])
def test_imports_are_found_in_every_form(source, module, expected):
    """The check sees imports inside functions, relative ones, and `from coderun import stage`."""
    path = PACKAGE.parent / module
    assert [name for _, name in imported_modules(path, ast.parse(source))] == expected


def test_stage_of_names_the_folder_and_the_shared_modules():
    assert stage_of("coderun.tasks.build") == "tasks"
    assert stage_of("coderun.errors") == stage_of("coderun") == "shared"
    assert stage_of("coderun.__main__") == "cli"
