"""jedi, for the names the syntax tree alone cannot place (star imports, inherited members from other
files): it follows imports through the project's environment and says which module defines a name."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import jedi


@dataclass(frozen=True)
class JediHit:
    module: str           # dotted module that defines the name ("" when unknown)
    path: Path | None     # its file, when it has one
    builtin: bool         # defined in builtins
    type: str             # jedi's type: module, class, function, instance, statement, param…


class JediResolver:
    def __init__(self, root: Path, import_root: str = ".", python: Path | None = None,
                 site_dirs: tuple[str, ...] = ()):
        """With `python`, jedi runs its inference in that interpreter. jedi cannot run inside every
        Python (0.20 needs >= 3.10 there); for older ones it runs here and is given the environment's
        site-packages (`site_dirs`) to look into, which is what resolving names needs."""
        self.root = root.resolve()
        sys_path = [str((self.root / import_root).resolve())]
        self.environment = None
        if python is not None:
            try:
                self.environment = jedi.create_environment(str(python), safe=False)
            except jedi.InvalidPythonEnvironment:
                sys_path += list(site_dirs)
        self.project = jedi.Project(path=self.root, added_sys_path=sys_path, smart_sys_path=True)
        self._scripts: dict[str, jedi.Script] = {}

    def _script(self, rel: str, code: str) -> jedi.Script:
        script = self._scripts.get(rel)
        if script is None:
            script = jedi.Script(code=code, path=self.root / rel, project=self.project,
                                 environment=self.environment)
            self._scripts[rel] = script
        return script

    def goto(self, rel: str, code: str, line: int, column: int) -> JediHit | None:
        """Where the name at (1-based line, 0-based character column) is defined, following imports."""
        try:
            names = self._script(rel, code).goto(line, column, follow_imports=True)
        except Exception:  # jedi raises assorted internal errors on odd code; the name stays unresolved
            return None
        for n in names:
            path = Path(n.module_path) if n.module_path else None
            return JediHit(module=n.module_name or "", path=path, builtin=n.in_builtin_module(),
                           type=n.type)
        return None

    def forget(self, rel: str) -> None:
        self._scripts.pop(rel, None)
