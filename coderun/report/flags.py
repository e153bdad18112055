"""Static flags on a sample: signs that it touches the test machinery or the world around its function.

Flags are reported next to a verdict, never a verdict: the grader decides from evidence the sample cannot
forge. They name what the code *says* (a call to `sys.exit`, a write-mode `open`, an import of pytest),
resolved through the sample's own import aliases (`import os as o; o._exit(0)` is `calls os._exit`).
Code that does not parse gets no flags: it never runs.
"""

from __future__ import annotations

import ast
import warnings

from coderun.runner.splice import SampleSyntaxError, extract_code

_MACHINERY = ("pytest", "_pytest", "unittest", "conftest", "pluggy")
_PATCHABLE = ("pytest", "_pytest", "unittest", "pluggy", "sys.modules", "builtins", "sys.stdout",
              "sys.stderr", "sys.excepthook", "atexit", "faulthandler")
_EXIT_CALLS = {"sys.exit": "calls sys.exit", "os._exit": "calls os._exit", "exit": "calls exit",
               "quit": "calls exit", "os.abort": "calls os.abort"}
_SIGNALS = ("os.kill", "os.killpg", "signal.signal", "signal.alarm", "signal.raise_signal", "signal.pthread_kill")
_FS_CALLS = ("os.remove", "os.unlink", "os.rmdir", "os.removedirs", "os.rename", "os.renames", "os.replace",
             "os.truncate", "os.chmod", "os.chown", "os.symlink", "os.link", "os.open", "os.mkdir",
             "os.makedirs", "shutil.rmtree", "shutil.move", "shutil.copy", "shutil.copy2", "shutil.copyfile",
             "shutil.copytree", "tempfile.mkstemp", "tempfile.mkdtemp")
_PATH_WRITES = ("write_text", "write_bytes", "unlink", "rmdir", "touch", "rename", "mkdir")  # not .replace: str
_PROCESS = ("os.system", "os.popen", "os.fork", "os.forkpty", "os.spawnl", "os.execv", "os.execve",
            "os.execvp", "subprocess", "multiprocessing", "pty.spawn")
_RAISED = ("SystemExit", "KeyboardInterrupt", "GeneratorExit")
_OPEN = ("open", "io.open", "codecs.open", "builtins.open")


def _under(path: str, prefixes: tuple[str, ...]) -> str | None:
    for prefix in prefixes:
        if path == prefix or path.startswith(prefix + "."):
            return prefix
    return None


class NameResolver(ast.NodeVisitor):
    """Resolves expressions to the dotted names they stand for, through the code's own imports; a subclass
    says what an import means (`imported`)."""

    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}

    def imported(self, module: str, node: ast.AST) -> None:
        """Called for every module the code imports."""

    def stored(self, target: ast.AST) -> None:
        """Called for every attribute or subscript the code assigns or deletes (tuples unpacked)."""

    def _each_stored(self, target: ast.AST) -> None:
        if isinstance(target, ast.Tuple | ast.List):
            for elt in target.elts:
                self._each_stored(elt)
        elif isinstance(target, ast.Attribute | ast.Subscript):
            self.stored(target)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._each_stored(target)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self._each_stored(target)
        self.generic_visit(node)

    def resolve(self, node: ast.AST) -> str | None:
        """The dotted name an expression stands for, through import aliases (None if not a name)."""
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            return f"{base}.{node.attr}" if base else None
        if isinstance(node, ast.Call):   # Path(...).write_text -> "Path().write_text" style base
            base = self.resolve(node.func)
            first = node.args[0] if node.args else None
            if base in ("__import__", "importlib.import_module") and isinstance(first, ast.Constant) \
                    and isinstance(first.value, str):
                return first.value   # __import__("os")._exit is os._exit
            return f"{base}()" if base else None
        return None

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.imported(alias.name, node)
            if alias.asname:
                self.aliases[alias.asname] = alias.name
            else:
                top = alias.name.split(".")[0]
                self.aliases[top] = top

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        self.imported(module, node)
        for alias in node.names:
            if not module:   # from . import conftest
                self.imported(alias.name, node)
            self.aliases[alias.asname or alias.name] = f"{module}.{alias.name}" if module else alias.name


class _Flagger(NameResolver):
    def __init__(self) -> None:
        super().__init__()
        self.flags: list[str] = []

    def flag(self, text: str) -> None:
        if text not in self.flags:
            self.flags.append(text)

    def imported(self, module: str, node: ast.AST) -> None:
        top = module.split(".")[0]
        if top in _MACHINERY:
            self.flag(f"imports {top}")

    # definitions and literals ----------------------------------------------------------------
    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if node.name.startswith("pytest_"):
            self.flag(f"defines pytest hook {node.name}")
        self.generic_visit(node)

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and "conftest" in node.value:
            self.flag("mentions conftest")

    # assignments that patch --------------------------------------------------------------------
    def stored(self, target: ast.AST) -> None:
        # the object patched (pytest in `pytest.x = ...`), or the name rebound (sys.modules = ...)
        paths = [p for p in (self.resolve(target.value), self.resolve(target)) if p]
        module = next((m for m in (_under(p, _PATCHABLE) for p in paths) if m), None)
        if module:
            self.flag(f"patches {module}")
        elif any(_under(p, ("sys.path",)) for p in paths):
            self.flag("modifies sys.path")

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._each_stored(node.target)
        self.generic_visit(node)

    def visit_Raise(self, node: ast.Raise) -> None:
        exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        name = self.resolve(exc) if exc is not None else None
        if name in _RAISED:
            self.flag(f"raises {name}")
        self.generic_visit(node)

    # calls -----------------------------------------------------------------------------------
    def visit_Call(self, node: ast.Call) -> None:
        name = self.resolve(node.func)
        if name:
            self._call(name, node)
        self.generic_visit(node)

    def _call(self, name: str, node: ast.Call) -> None:
        if name in _EXIT_CALLS:
            self.flag(_EXIT_CALLS[name])
        elif name in _OPEN:
            self._open(node)
        elif name in ("__import__", "importlib.import_module") and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                self.imported(first.value, node)
        elif name in ("setattr", "delattr") and node.args:
            self._each_stored(ast.Attribute(value=node.args[0], attr="_", ctx=ast.Store()))
        elif name.split(".")[-1] in ("patch", "setattr", "object", "dict", "delattr", "setitem") and node.args:
            self._patch_call(node)
        if _under(name, _SIGNALS):
            self.flag(f"sends signals ({name})")
        if name in _FS_CALLS:
            self.flag(f"writes files ({name})")
        if _under(name, _PROCESS):
            self.flag(f"starts processes ({name})")
        if name == "os.chdir":
            self.flag("changes directory (os.chdir)")
        if _under(name, ("sys.path",)) and name != "sys.path":
            self.flag("modifies sys.path")
        if "." in name and name.rsplit(".", 1)[1] in _PATH_WRITES and not _under(name, ("os", "shutil")):
            self.flag(f"writes files (.{name.rsplit('.', 1)[1]})")

    def _open(self, node: ast.Call) -> None:
        mode = node.args[1] if len(node.args) > 1 else next(
            (k.value for k in node.keywords if k.arg == "mode"), None)
        if mode is None:
            return
        if not (isinstance(mode, ast.Constant) and isinstance(mode.value, str)):
            self.flag("opens files with a computed mode")
        elif set(mode.value) & set("wax+"):
            self.flag(f"writes files (open mode {mode.value!r})")

    def _patch_call(self, node: ast.Call) -> None:
        """mock.patch("unittest.x"), monkeypatch.setattr(pytest, ...), patch.object(unittest.TestResult, ...)."""
        first = node.args[0]
        path = first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) \
            else self.resolve(first)
        module = _under(path, _PATCHABLE) if path else None
        if module:
            self.flag(f"patches {module}")


def _parse(code: str) -> ast.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(code)


def parse_sample(code: str, name: str | None = None) -> ast.Module | None:
    """The sample's syntax tree; with the target's `name`, code that does not parse as it is (markdown, prose,
    trailing junk) is first extracted the way the injector does it. None when neither parses."""
    try:
        return _parse(code)
    except (SyntaxError, ValueError):
        if name is None:
            return None
        try:
            return _parse(extract_code(code, name)[0])
        except (SampleSyntaxError, SyntaxError, ValueError):
            return None


def sample_flags(code: str, name: str | None = None) -> list[str]:
    """Short flags, in order of first appearance, for code that touches the test machinery (`parse_sample`
    says which code is read; code that does not parse gets none: it never runs)."""
    tree = parse_sample(code, name)
    if tree is None:
        return []
    flagger = _Flagger()
    flagger.visit(tree)
    return flagger.flags
