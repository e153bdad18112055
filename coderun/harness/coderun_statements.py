"""Where the statements of a file start, kept per file text, for pytest's short tracebacks (see
Statements). Standalone (stdlib and pytest, Python 3.7): imported by the worker.
"""

from __future__ import annotations

import ast
import bisect
import contextlib
import hashlib
import io
import os
import re
import stat
import tokenize
import warnings
from collections.abc import Callable


class Statements:
    """Where the statements of a file start, kept per file text, for pytest's short tracebacks.

    To print a frame, pytest parses the frame's whole file and walks every node of it to find the
    statement around the line (_pytest._code.source: getstatementrange_ast, get_statement_startend2),
    for every frame of every failure: a median 10 ms of a failing sample. The answer depends only on the
    file's text. The worker keeps, per text, the sorted statement starts of the task's test files and of
    the files its children's tracebacks showed, and hands pytest a stand-in for the parsed tree, which
    the replacement of get_statement_startend2 looks up. A text it does not know is parsed as pytest
    would. The replacement is installed only when pytest's own function agrees with it on every line of
    a probe module; otherwise pytest runs unchanged.
    """

    MAX_FILES = 1000
    MAX_BYTES = 2 << 20
    FRAME = re.compile(r"^([^\s:][^:\n]*\.py):\d+: ", re.MULTILINE)

    def __init__(self) -> None:
        self.stand_ins: dict[bytes, ast.AST] = {}                # digest of a file text -> stand-in tree
        self.starts: dict[int, tuple[ast.AST, list[int]]] = {}   # id(tree) -> (tree, statement starts)
        self.tried: set[str] = set()                             # paths read (or refused) already
        self.before_first: tuple[int, int | None] | None = None   # pytest >= 9.1's answer above the first start

    def install(self) -> bool:
        try:
            import _pytest._code.code as code
            import _pytest._code.source as source

            original = source.getstatementrange_ast
            if code.getstatementrange_ast is not original or not self.agrees(source.get_statement_startend2):
                return False
        except Exception:  # noqa: BLE001  (another pytest: it runs unchanged)
            return False

        def getstatementrange_ast(lineno, src, assertion=False, astnode=None):
            if astnode is None:
                astnode = self.tree(str(src))
            return original(lineno, src, assertion, astnode)

        source.getstatementrange_ast = code.getstatementrange_ast = getstatementrange_ast
        source.get_statement_startend2 = self.startend
        return True

    def agrees(self, original: Callable) -> bool:
        tree = ast.parse(_PROBE, "source", "exec")
        # Above the first statement, pytest before 9.1 wraps round to the last start; later ones say (0, None).
        self.before_first = (0, None) if original(-1, tree) == (0, None) else None
        for lineno in range(-1, _PROBE.count("\n") + 2):
            if original(lineno, tree) != self.startend(lineno, tree):
                return False
        return True

    def tree(self, text: str) -> ast.AST:
        """The stand-in for `text`'s tree; parses as pytest does (SyntaxError included) when unknown."""
        key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        node = self.stand_ins.get(key)
        if node is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                parsed = ast.parse(text, "source", "exec")
            node = ast.Module(body=[], type_ignores=[])
            self.starts[id(node)] = (node, _statement_starts(parsed))
            self.stand_ins[key] = node
        return node

    def startend(self, lineno: int, node: ast.AST) -> tuple[int, int | None]:
        """get_statement_startend2: the statement start at or before `lineno`, and the next one."""
        kept = self.starts.get(id(node))
        if kept is None or kept[0] is not node:  # a tree pytest parsed itself
            kept = self.starts[id(node)] = (node, _statement_starts(node))
        values = kept[1]
        i = bisect.bisect_right(values, lineno)
        if i == 0 and self.before_first is not None:
            return self.before_first
        return values[i - 1], (values[i] if i < len(values) else None)

    def remember(self, path: str) -> None:
        """Keep `path`'s statement starts, under the text pytest makes of it (lines, right-stripped)."""
        if path in self.tried or len(self.tried) >= self.MAX_FILES:
            return
        with contextlib.suppress(Exception):
            st = os.stat(path)
            if stat.S_ISREG(st.st_mode) and st.st_size <= self.MAX_BYTES:
                with open(path, "rb") as f:
                    self.remember_bytes(path, f.read())
        self.tried.add(path)

    def remember_bytes(self, key: str, data: bytes) -> None:
        """Keep the statement starts of a file's bytes (`key`: the path it is remembered under)."""
        if key in self.tried or len(self.tried) >= self.MAX_FILES or len(data) > self.MAX_BYTES:
            return
        self.tried.add(key)
        with contextlib.suppress(Exception):
            lines = io.TextIOWrapper(io.BytesIO(data), tokenize.detect_encoding(io.BytesIO(data).readline)[0])
            self.tree("\n".join(line.rstrip() for line in lines.readlines()))

    def learn(self, output: str, project: str, pristine: Callable[[str], bytes | None],
              installed: tuple[str, ...]) -> None:
        """Remember the files of the frames a traceback in `output` showed: the project's (their pristine
        bytes, never a sample's copy) and installed modules'."""
        for path in dict.fromkeys(m.group(1) for m in self.FRAME.finditer(output, 0, 1 << 20)):
            full = os.path.normpath(os.path.join(project, path))
            if full.startswith(project + os.sep):
                data = pristine(os.path.relpath(full, project))
                if data is not None:
                    self.remember_bytes(full, data)
            elif full.startswith(installed):
                self.remember(full)


def _statement_starts(tree: ast.AST) -> list[int]:
    """The sorted lines (0-based) where pytest considers a statement to start (get_statement_startend2):
    every statement and except clause, a definition's decorators, and the line before a finally/else."""
    values: list[int] = []
    todo = [tree]
    while todo:  # statements nest in statement lists only: expressions need no visit
        x = todo.pop()
        for _name, field in ast.iter_fields(x):
            if isinstance(field, list) and field and isinstance(field[0], _BLOCKS):
                todo.extend(field)
        if isinstance(x, (ast.stmt, ast.ExceptHandler)):
            if isinstance(x, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                values.extend(d.lineno - 1 for d in x.decorator_list)
            values.append(x.lineno - 1)
            for name in ("finalbody", "orelse"):
                val = getattr(x, name, None)
                if val:
                    values.append(val[0].lineno - 2)
    values.sort()
    return values


_BLOCKS = (ast.stmt, ast.ExceptHandler, *((ast.match_case,) if hasattr(ast, "match_case") else ()))



# Every kind of statement, clause and decorator layout get_statement_startend2 treats apart.
_PROBE = """\
import os


@decorator
@other(1,
       2)
class A(B):
    x = 1

    @property
    def f(self):
        try:
            pass
        except ValueError as e:
            raise
        except Exception:
            pass
        else:
            return 1
        finally:
            del x
        for i in y:
            continue
        else:
            pass
        while z:
            break
        else:
            pass
        if a:
            pass
        elif b:
            pass
        else:
            pass
        with c as d, e:
            assert x, (
                "message")

    async def g(self):
        async with x:
            await y
        async for i in z:
            yield i
        else:
            pass
        return [i for i in range(3)
                if i]


def h(*a, **k):
    global q
    lambda: 1
    x = {
        1: 2,
    }
    return x
"""

