"""What an interpreter knows: its builtins, its standard-library modules, its installed distributions.

Asked of the project's own Python (a tiny subprocess), so `print` in a 3.9 project is judged by 3.9.
Pythons before 3.10 have no `sys.stdlib_module_names`: the list is then read from the stdlib directory.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from coderun.errors import AnalysisError

_PROBE = r"""
import builtins, json, os, sys, sysconfig
names = getattr(sys, "stdlib_module_names", None)
if names is None:
    std = sysconfig.get_paths()["stdlib"]
    names = set(sys.builtin_module_names)
    for entry in os.listdir(std):
        if entry == "site-packages":
            continue
        base = entry[:-3] if entry.endswith(".py") else entry.split(".")[0]
        if entry.endswith(".py") or os.path.isfile(os.path.join(std, entry, "__init__.py")):
            names.add(base)
    dyn = os.path.join(std, "lib-dynload")
    if os.path.isdir(dyn):
        names.update(e.split(".")[0] for e in os.listdir(dyn))
top = {}
try:
    from importlib import metadata
    for dist in metadata.distributions():
        name = dist.metadata["Name"] or ""
        mods = set()
        text = dist.read_text("top_level.txt")
        if text:
            mods.update(l.strip() for l in text.splitlines() if l.strip())
        else:
            for f in dist.files or ():
                parts = f.parts
                if not parts or parts[0].endswith((".dist-info", ".egg-info")) or parts[0] in ("..", "__pycache__"):
                    continue
                first = parts[0]
                if len(parts) == 1:
                    if first.endswith(".py"):
                        mods.add(first[:-3])
                    elif first.endswith((".so", ".pyd")):
                        mods.add(first.split(".")[0])
                else:
                    mods.add(first)
        for m in mods:
            top.setdefault(m, name)
except Exception:
    pass
site_dirs = sorted({sysconfig.get_paths()[k] for k in ("purelib", "platlib")})
types = [n for n in dir(builtins) if isinstance(getattr(builtins, n), type)]
print(json.dumps({"version": "%d.%d.%d" % sys.version_info[:3], "builtins": dir(builtins), "site": site_dirs,
                  "types": types,
                  "stdlib": sorted(set(names) | {"__future__", "__main__"}), "installed": top}))
"""


@dataclass(frozen=True)
class PythonFacts:
    executable: str
    version: str
    builtins: frozenset[str]
    stdlib: frozenset[str]
    installed: dict[str, str]        # top-level module -> distribution name (the env's site-packages)
    site_dirs: tuple[str, ...] = ()  # where those distributions live
    builtin_types: frozenset[str] = frozenset()  # builtins that are classes (str, dict, ValueError…)

    def is_stdlib(self, top: str) -> bool:
        return top in self.stdlib


@lru_cache(maxsize=16)
def _probe(executable: str, mtime: float) -> PythonFacts:
    try:
        out = subprocess.run([executable, "-I", "-c", _PROBE], capture_output=True, text=True, timeout=120,
                             check=True).stdout
        data = json.loads(out)
    except (OSError, subprocess.SubprocessError, json.JSONDecodeError) as e:
        raise AnalysisError(f"cannot ask {executable} for its builtins and standard library: {e}",
                            hint="check that the project's environment is intact (coderun env build)") from None
    return PythonFacts(executable=executable, version=data["version"], builtins=frozenset(data["builtins"]),
                       stdlib=frozenset(data["stdlib"]), installed=dict(data["installed"]),
                       site_dirs=tuple(data.get("site", ())), builtin_types=frozenset(data.get("types", ())))


def python_facts(python: Path | None = None) -> PythonFacts:
    """Facts of `python` (the project's environment), or of the interpreter running coderun."""
    exe = str(python) if python else sys.executable
    try:
        mtime = Path(exe).stat().st_mtime
    except OSError:
        raise AnalysisError(f"python interpreter {exe} does not exist",
                            hint="rebuild the project's environment, or analyze without one") from None
    return _probe(exe, mtime)


_SYNTAX_PROBE = r"""
import ast, json, sys, warnings
warnings.simplefilter("ignore")
root, rels = json.load(sys.stdin)
bad = {}
for rel in rels:
    try:
        with open(root + "/" + rel, "rb") as fh:
            ast.parse(fh.read(), filename=rel)
    except SyntaxError as e:
        bad[rel] = "not valid Python %d.%d: %s (line %s)" % (sys.version_info[0], sys.version_info[1], e.msg, e.lineno)
    except (ValueError, OSError) as e:
        bad[rel] = "not parseable: %s" % e
print(json.dumps(bad))
"""


def syntax_errors(facts: PythonFacts, root: Path, rels: list[str]) -> dict[str, str]:
    """Files the project's Python cannot parse (Python 2 code, newer syntax), with the reason."""
    try:
        out = subprocess.run([facts.executable, "-I", "-c", _SYNTAX_PROBE], input=json.dumps([str(root), rels]),
                             capture_output=True, text=True, timeout=600, check=True).stdout
        return json.loads(out)
    except (OSError, subprocess.SubprocessError, json.JSONDecodeError) as e:
        raise AnalysisError(f"cannot check the project's files with {facts.executable}: {e}") from None
