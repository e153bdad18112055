"""The library never draws (issue 37): it says what happens as events (coderun.events) and the CLI renders
them, so `rich` is imported only by coderun/cli/ and by the report renderers of coderun/report/."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "coderun"
# Where rich may be imported: the CLI, and the report's renderers (tables made for a terminal; see
# coderun/report/render.py for why they stay beside the report).
ALLOWED = ("cli", "report")


def rich_imports(source: str) -> list[int]:
    """The lines of `source` that import rich (or one of its modules), at any depth."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        if any(n == "rich" or n.startswith("rich.") for n in names):
            lines.append(node.lineno)
    return lines


def test_rich_is_imported_only_by_the_cli_and_the_report_renderers():
    violations = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] in ALLOWED:
            continue
        violations += [f"coderun/{rel}:{line}" for line in rich_imports(path.read_text(encoding="utf-8"))]
    assert not violations, ("rich imported outside coderun/cli/ and coderun/report/; take `on_event` "
                            "(coderun.events) and let the CLI render:\n  " + "\n  ".join(violations))


def test_the_check_sees_every_form_of_import():
    source = ("import rich\nimport os, rich.console\nfrom rich.table import Table\n"
              "def f():\n    from rich import box\nfrom richer import x\nfrom .rich import y\n")
    assert rich_imports(source) == [1, 2, 3, 5]
