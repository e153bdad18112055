"""The package's shape (issues 20, 37): stages that import only earlier stages, and short functions.

The import rules are import-linter's contracts in pyproject.toml ([tool.importlinter]): the stages as layers,
and the harness files importing nothing of coderun. `lint-imports` checks them (CI runs it too); the tests here
run it, and show once per contract that it fails on a violating import. Function length is read with `ast`.
Module size (500 lines) is a review guideline, not a test: CONTRIBUTING.md.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "coderun"
MAX_FUNCTION_LINES = 60
LINT_IMPORTS = Path(sysconfig.get_path("scripts")) / "lint-imports"


def lint_imports(tree: Path) -> subprocess.CompletedProcess:
    """`lint-imports` on the package under `tree`, with the contracts of `tree`/pyproject.toml.

    It puts its working directory first on sys.path, so `tree`'s coderun is the one read, not an installed one.
    """
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tree), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--no-logo"], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=300)


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _rel(path: Path) -> str:
    return path.relative_to(PACKAGE.parent).as_posix()


def _parsed() -> list[tuple[Path, str, ast.Module]]:
    out = []
    for path in _modules():
        text = path.read_text(encoding="utf-8")
        out.append((path, text, ast.parse(text, filename=str(path))))
    return out


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




@pytest.mark.integration
def test_import_contracts_are_kept():
    """The stages import only earlier ones; the harness files import nothing of coderun (pyproject.toml)."""
    run = lint_imports(ROOT)
    assert run.returncode == 0, f"lint-imports: a contract is broken\n{run.stdout}{run.stderr}"
    assert "0 broken" in run.stdout, run.stdout


@pytest.mark.integration
@pytest.mark.parametrize(("module", "line", "reported"), [
    # an earlier stage importing a later one
    pytest.param("sandbox/base.py", "from coderun.cli import main", "coderun.sandbox.base -> coderun.cli",
                 id="later-stage"),
    # inside a function, too
    pytest.param("tasks/build.py", "def _late():\n    from coderun.report import flags",
                 "coderun.tasks.build -> coderun.report", id="in-a-function"),
    # a harness file importing coderun (it runs where coderun is not installed)
    pytest.param("harness/coderun_capped.py", "from coderun.errors import UsageError",
                 "coderun.harness.coderun_capped -> coderun.errors", id="harness"),
])
def test_import_contracts_fail_on_a_violating_import(tmp_path, module, line, reported):
    """The contracts bite: a copy of the package with one import added breaks one, and lint-imports says where."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    shutil.copytree(PACKAGE, tmp_path / "coderun", ignore=shutil.ignore_patterns("__pycache__"))
    with open(tmp_path / "coderun" / module, "a", encoding="utf-8") as f:
        f.write(f"\n\n{line}\n")
    run = lint_imports(tmp_path)
    assert run.returncode == 1, f"lint-imports kept the contracts with `{line}` in {module}:\n{run.stdout}{run.stderr}"
    assert "1 broken" in run.stdout and reported in run.stdout, run.stdout


_HEAVY = ("jedi", "coderun.analyzers", "coderun.tasks.build", "coderun.cli.tasks")


def test_a_command_imports_what_it_runs_and_the_help_lists_every_command():
    """`coderun eval` on built tasks needs neither the task build nor the analyzers (jedi): importing every
    command's modules cost each run about 0.2 s. The help and the test's `app` still have every command."""
    code = ("import sys\nfrom coderun.cli import main as m\nsys.argv = ['coderun', 'eval', '--help']\n"
            "try:\n    m.main()\nexcept SystemExit:\n    pass\n"
            f"print('HEAVY', sorted(x for x in {_HEAVY!r} if x in sys.modules))\n"
            "import typer.main\nprint('ALL', sorted(typer.main.get_command(m.app).commands))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "COLUMNS": "100"})
    assert "--ground-truth" in done.stdout, done.stderr
    assert "HEAVY []" in done.stdout
    from coderun.cli.main import _COMMANDS

    assert f"ALL {sorted(_COMMANDS)}" in done.stdout
