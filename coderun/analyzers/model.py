"""Records the analyzer produces: one `FunctionInfo` per function or method, with its classified references.

JSON shape of a function (what `coderun analyze --json` prints and the cache stores):
    {"file": "pkg/mod.py", "qualname": "Class.method", "name": "method", "lineno": 12, ...,
     "level": "class_runnable",
     "oracle_context": {"classes": [...], "apis": [...], "vars": [...]},   # what the body uses
     "all_context": {"classes": [...], "apis": [...], "vars": [...]},      # what the file offers
     "references": [{"name": "self._parse", "kind": "class", "context_kind": "apis",
                     "target": "pkg.mod.Parser._parse", "lineno": 14}, ...]}
`oracle_context`/`all_context` follow CoderEval's `{"apis", "classes", "vars"}`: type references (classes,
and modules used as namespaces), API invocations (anything called) and variable references (the rest).
Names are written as in the code (`os.path.join`, `self._parse`, `CONSTANT`), builtins included.
"""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, ConfigDict, Field

from coderun.records import ContextSet, Level


class RefKind(str, Enum):
    """Where a referenced name is defined, in increasing order of dependency."""

    BUILTIN = "builtin"
    STDLIB = "stdlib"
    PLIB = "plib"
    CLASS = "class"
    FILE = "file"
    PROJECT = "project"

    @property
    def level(self) -> Level:
        return _LEVEL_OF[self]


_LEVEL_OF = {
    RefKind.BUILTIN: Level.SELF_CONTAINED,
    RefKind.STDLIB: Level.SLIB_RUNNABLE,
    RefKind.PLIB: Level.PLIB_RUNNABLE,
    RefKind.CLASS: Level.CLASS_RUNNABLE,
    RefKind.FILE: Level.FILE_RUNNABLE,
    RefKind.PROJECT: Level.PROJECT_RUNNABLE,
}


class ContextKind(str, Enum):
    CLASSES = "classes"
    APIS = "apis"
    VARS = "vars"


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Reference(_Frozen):
    name: str                      # as written: "os.path.join", "self._parse", "CONSTANT"
    kind: RefKind
    context_kind: ContextKind
    target: str | None = None      # fully qualified definition, when resolved ("pkg.mod.func")
    lineno: int = 0                # first use in the file (1-based)
    via: str = "syntax"            # "syntax" or "jedi": who resolved it


class FunctionInfo(_Frozen):
    file: str                      # repository-relative, posix
    qualname: str                  # "func", "Class.method", "outer.<locals>.inner"
    name: str
    lineno: int                    # the `def` line
    start_lineno: int              # first decorator line (== lineno without decorators)
    end_lineno: int
    start_byte: int                # whole definition, decorators included
    end_byte: int
    def_start_byte: int            # the `def` (or `async def`) keyword
    body_start_byte: int
    body_end_byte: int
    body_lineno: int
    body_end_lineno: int
    is_async: bool = False
    class_name: str | None = None  # qualname of the enclosing class
    signature: str                 # the `def ...:` header text
    docstring: str = ""            # cleaned (inspect.cleandoc)
    source: str                    # the definition text, decorators included
    body_lines: int = 0            # non-blank body lines, docstring excluded
    decorators: list[str] = Field(default_factory=list)
    level: Level
    oracle_context: ContextSet = Field(default_factory=ContextSet)
    all_context: ContextSet = Field(default_factory=ContextSet)
    references: list[Reference] = Field(default_factory=list)
    unresolved: list[str] = Field(default_factory=list)  # free names nothing defines

    @property
    def key(self) -> str:
        return f"{self.file}::{self.qualname}"


class SkippedFile(_Frozen):
    file: str
    reason: str


class ProjectAnalysis(_Frozen):
    analyzer_version: str
    root: str
    commit: str | None = None
    python: str | None = None       # the interpreter whose builtins/stdlib were used
    jedi: bool = True
    functions: list[FunctionInfo] = Field(default_factory=list)
    skipped: list[SkippedFile] = Field(default_factory=list)

    def find(self, file: str, qualname: str) -> FunctionInfo | None:
        for f in self.functions:
            if f.file == file and f.qualname == qualname:
                return f
        return None

    def in_file(self, file: str) -> list[FunctionInfo]:
        return [f for f in self.functions if f.file == file]
