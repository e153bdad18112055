"""The injector: put a generated function into the original file, in place of the original one.

Everything is located with tree-sitter byte ranges (on the original file and on the sample), never by
searching text. Python's own parser is the judge of syntax: tree-sitter recovers from errors, so a sample
only counts as parsed when `ast.parse` accepts it (with the target's Python version where it is older than
the host's), and the spliced file must `compile`.

What `splice` does with a sample, in order:

1. Extraction: the fenced markdown block that defines the target (or the first Python block), else the
   whole text; an indented sample is dedented; leading prose lines and trailing top-level lines that do not
   parse (models keep generating after the function; CodeGen's samples are cut at a token limit) are
   dropped, each noted in `SpliceResult.notes`. The function itself must parse: nothing inside it is fixed.
2. Indentation: tabs in indentation become spaces (4 per tab when that keeps the same syntax tree, else
   Python's own 8), so a tab-indented sample (CoderEval's) fits a space-indented file. Lines inside
   multi-line strings are never touched, so docstrings and string values stay exactly as generated.
3. The definition: for `f`, the last module-level `def f` (the one Python would bind); for `C.m`, a
   module-level `def m`, or `m` inside a sample `class C` (or a class named like the last class of the
   qualname, or any class that defines `m`).
4. Replacement: the original definition's byte range is replaced by the sample's, re-indented to the
   original's depth. Decorators: the sample's when it has any, else the original's stay untouched.
   `async`: an async original stays async (a sync sample gets `async` prefixed, since callers await it);
   an async sample for a sync original is kept as written.
5. Helpers: other definitions of the sample (functions, classes, simple `NAME = ...` assignments) are
   kept right after the target, at the target's depth. For a method target, helpers that came from the
   sample's class body, or that the method reaches as `self.x` / `cls.x` / `Class.x`, go into the class;
   other module-level helpers go right after the outermost enclosing class. A helper whose name already
   exists in the destination scope is dropped (the sample is graded on its target, not on rewriting the
   project's other code), and so are other top-level statements (calls, `if __name__ == ...` blocks).
6. Imports at the sample's top level are hoisted to the module top, after the module docstring and
   `from __future__` imports, unless the file already has the same import. A sample's `from __future__`
   imports are dropped: they would change the semantics of the whole module.
"""

from __future__ import annotations

import ast
import functools
import pickle
import re
import subprocess
import sys
import threading
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum

import tree_sitter_python
from pydantic import BaseModel, ConfigDict, Field
from tree_sitter import Language, Node, Parser

from coderun.errors import TaskError
from coderun.runner.fences import python_blocks

_LANGUAGE = Language(tree_sitter_python.language())
_local = threading.local()

_DEFS = ("function_definition", "class_definition")
_IMPORTS = ("import_statement", "import_from_statement")
_BLOCK_HOLDERS = ("if_statement", "try_statement", "elif_clause", "else_clause", "except_clause",
                  "finally_clause")


class SpliceErrorKind(str, Enum):
    SYNTAX = "syntax"                          # the sample (or the spliced file) does not parse
    MISSING_DEFINITION = "missing_definition"  # the sample has no definition of the target name


class SpliceResult(BaseModel):
    """The spliced file, or why the sample cannot be run (graded as a syntax failure)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ok: bool
    new_source: str | None = None
    error: SpliceErrorKind | None = None
    message: str = ""
    function_code: str | None = None            # the sample's definition as inserted
    function_lines: tuple[int, int] | None = None  # 1-based, inclusive, in new_source
    helper_names: list[str] = Field(default_factory=list)
    hoisted_imports: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


class SampleSyntaxError(Exception):
    """Internal: the sample cannot be used; carries the error kind for SpliceResult."""

    def __init__(self, kind: SpliceErrorKind, message: str, notes: list[str] | None = None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.notes = notes or []


# --------------------------------------------------------------------------- tree-sitter basics

def _parser() -> Parser:
    # a Parser is not thread-safe; evaluation workers may be threads
    parser = getattr(_local, "parser", None)
    if parser is None:
        parser = _local.parser = Parser(_LANGUAGE)
    return parser


def _parse(data: bytes) -> Node:
    return _parser().parse(data).root_node


def _text(node: Node) -> str:
    return node.text.decode("utf-8") if node.text is not None else ""


def _unwrap(node: Node) -> Node:
    """The function or class inside a decorated_definition (or the node itself)."""
    if node.type == "decorated_definition":
        inner = node.child_by_field_name("definition")
        if inner is not None:
            return inner
    return node


def _name(node: Node) -> str | None:
    name = _unwrap(node).child_by_field_name("name")
    return _text(name) if name is not None else None


def _is_async(func: Node) -> bool:
    return any(child.type == "async" for child in func.children)


def _body_children(node: Node) -> list[Node]:
    """Statements of a module or of a class/function body."""
    if node.type == "module":
        return list(node.named_children)
    body = _unwrap(node).child_by_field_name("body")
    return list(body.named_children) if body is not None else []


def _scope_statements(children: list[Node]) -> Iterator[Node]:
    """Statements of a scope, looking into if/try blocks (conditional definitions)."""
    for child in children:
        yield child
        if child.type in _BLOCK_HOLDERS:
            for sub in child.named_children:
                if sub.type == "block":
                    yield from _scope_statements(list(sub.named_children))
                elif sub.type in _BLOCK_HOLDERS:
                    yield from _scope_statements([sub])


def _string_rows(root: Node) -> set[int]:
    """0-based rows that begin inside a multi-line string: their text is string content."""
    rows: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "string":
            rows.update(range(node.start_point[0] + 1, node.end_point[0] + 1))
            continue
        if node.end_point[0] > node.start_point[0]:
            stack.extend(node.children)
    return rows


# --------------------------------------------------------------------------- locating the target

@dataclass(frozen=True)
class _Target:
    outer: Node                  # decorated_definition or function_definition: the replaced range
    func: Node                   # the function_definition
    classes: tuple[Node, ...]    # enclosing class_definitions, outermost first


def _find_original(root: Node, qualname: str, lineno: int | None) -> _Target:
    parts = qualname.split(".")
    scope: Node = root
    classes: list[Node] = []
    for part in parts[:-1]:
        found = [s for s in _scope_statements(_body_children(scope))
                 if _unwrap(s).type == "class_definition" and _name(s) == part]
        if not found:
            raise TaskError(f"class {part!r} of {qualname!r} is not defined in the original file")
        scope = _unwrap(found[0])
        classes.append(scope)
    matches = [s for s in _scope_statements(_body_children(scope))
               if _unwrap(s).type == "function_definition" and _name(s) == parts[-1]]
    if lineno is not None:
        matches = [m for m in matches if lineno in (m.start_point[0] + 1, _unwrap(m).start_point[0] + 1)]
    if not matches:
        where = f" at line {lineno}" if lineno is not None else ""
        raise TaskError(f"function {qualname!r}{where} is not defined in the original file")
    return _Target(outer=matches[0], func=_unwrap(matches[0]), classes=tuple(classes))


@dataclass(frozen=True)
class _Found:
    outer: Node
    func: Node
    from_class: Node | None      # the sample class the method was taken from


def _find_in_sample(root: Node, qualname: str) -> _Found | None:
    parts = qualname.split(".")
    name, class_path = parts[-1], parts[:-1]
    top = list(root.named_children)
    funcs = [s for s in top if _unwrap(s).type == "function_definition" and _name(s) == name]
    if funcs:
        return _Found(funcs[-1], _unwrap(funcs[-1]), None)
    if not class_path:
        return None
    for cls in _candidate_classes(top, class_path):
        methods = [s for s in _body_children(cls)
                   if _unwrap(s).type == "function_definition" and _name(s) == name]
        if methods:
            return _Found(methods[-1], _unwrap(methods[-1]), cls)
    return None


def _candidate_classes(top: list[Node], class_path: list[str]) -> Iterator[Node]:
    """Sample classes that may hold the method: the full path, the innermost class's name, any class."""
    classes = [_unwrap(s) for s in top if _unwrap(s).type == "class_definition"]
    for cls in classes:               # exact nesting: class Outer: class Inner: def m
        node: Node | None = cls if _name(cls) == class_path[0] else None
        for part in class_path[1:]:
            if node is None:
                break
            inner = [_unwrap(s) for s in _body_children(node)
                     if _unwrap(s).type == "class_definition" and _name(s) == part]
            node = inner[0] if inner else None
        if node is not None:
            yield node
    yield from (c for c in classes if _name(c) == class_path[-1])
    yield from classes


# --------------------------------------------------------------------------- preparing the sample

_CODE_START = re.compile(r"^(async\s+def\s|def\s|class\s|@|import\s|from\s|#)")


def host_feature_version(python: tuple[int, int] | None) -> tuple[int, int] | None:
    """The `feature_version` for ast.parse: the target's version when older than the host's."""
    if python is None or python >= sys.version_info[:2]:
        return None
    return max(python, (3, 4))


# CPython 3.11's compiler is not safe to call from several threads at once ("AST constructor recursion
# depth mismatch", gh-106905), and evaluation splices in worker threads.
_COMPILE_LOCK = threading.Lock()


def _quiet_parse(code: str, python: tuple[int, int] | None) -> ast.Module:
    feature = host_feature_version(python)
    for _attempt in range(2):
        try:
            with warnings.catch_warnings(), _COMPILE_LOCK:   # a sample's invalid escapes are its own business
                warnings.simplefilter("ignore")
                return ast.parse(code, feature_version=feature)
        except SystemError:
            # CPython 3.11 sometimes loses count of its AST recursion depth ("AST constructor recursion
            # depth mismatch"): parse again, then in a fresh interpreter, rather than blame the sample.
            continue
    return _parse_in_subprocess(code, feature)


def _parse_in_subprocess(code: str, feature: tuple[int, int] | None) -> ast.Module:
    script = ("import ast, pickle, sys, warnings\nwarnings.simplefilter('ignore')\n"
              "code, feature = pickle.load(sys.stdin.buffer)\n"
              "try:\n    out = ast.parse(code, feature_version=feature)\n"
              "except SyntaxError as e:\n    out = e\n"
              "pickle.dump(out, sys.stdout.buffer)\n")
    proc = subprocess.run([sys.executable, "-c", script], input=pickle.dumps((code, feature)),
                          capture_output=True, timeout=60)
    if proc.returncode != 0:
        raise SyntaxError(f"cannot parse: {proc.stderr.decode(errors='replace')[-200:]}")
    result = pickle.loads(proc.stdout)
    if isinstance(result, SyntaxError):
        raise result
    return result


def _parses(code: str, python: tuple[int, int] | None) -> ast.Module | None:
    try:
        return _quiet_parse(code, python)
    except (SyntaxError, ValueError):   # ValueError: null bytes
        return None


def _syntax_message(code: str, python: tuple[int, int] | None) -> str:
    try:
        _quiet_parse(code, python)
    except SyntaxError as exc:
        return f"line {exc.lineno}: {exc.msg}"
    except ValueError as exc:
        return str(exc)
    return "does not parse"


def _ast_defines(tree: ast.Module, name: str) -> bool:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            return True
        if isinstance(node, ast.ClassDef) and _ast_defines(ast.Module(body=node.body, type_ignores=[]), name):
            return True
    return False


def fenced_blocks(text: str, name: str) -> list[str]:
    """Python blocks of a markdown answer, those that define `name` first."""
    blocks = python_blocks(text)
    pattern = _def_pattern(name)
    # a cheap pre-filter for the order; the definition is found by parsing later
    return sorted(blocks, key=lambda block: pattern.search(block) is None)


def extract_code(text: str, name: str, python: tuple[int, int] | None = None) -> tuple[str, list[str]]:
    """The code part of a model's answer, and notes on what was dropped.

    Code that parses as it is (fences inside a docstring included) is taken whole; otherwise the first
    markdown block that yields a definition of `name`; otherwise the text without the leading prose and
    trailing lines that do not parse. Raises SampleSyntaxError when nothing parses.
    """
    text = _dedent_first(text.replace("\r\n", "\n").replace("\r", "\n"))
    if not text.strip():
        raise SampleSyntaxError(SpliceErrorKind.SYNTAX, "sample is empty")
    tree = _parses(text, python)
    if tree is not None and _ast_defines(tree, name):
        return text, []
    copied = _indent_first_as_next(text)
    if copied is not None and (tree := _parses(copied, python)) is not None and _ast_defines(tree, name):
        return copied, ["indented the first line as the lines after it (a definition copied from its column)"]
    blocks = fenced_blocks(text, name)
    for block in blocks:
        try:
            code, notes = _recover(_dedent_first(block), name, python)
        except SampleSyntaxError:
            continue
        parsed = _parses(code, python)
        if parsed is not None and _ast_defines(parsed, name):
            return code, ["took the code from a fenced markdown block", *notes]
    if blocks and any(_parses(_dedent_first(b), python) is not None for b in blocks):
        raise SampleSyntaxError(SpliceErrorKind.MISSING_DEFINITION,
                                f"no fenced code block defines {name!r}")
    return _recover(text, name, python)


def _dedent_first(code: str) -> str:
    """Dedent a sample whose first line is indented (a method copied out of its class)."""
    lines = code.split("\n")
    first = next((ln for ln in lines if ln.strip()), "")
    prefix = first[: len(first) - len(first.lstrip())]
    if not prefix:
        return code
    return "\n".join(ln[len(prefix):] if ln.startswith(prefix) else ln for ln in lines)


def _indent_first_as_next(code: str) -> str | None:
    """`@classmethod\n    @other\n    def f(cls):` -- a decorated method copied from the column where it
    starts, so that only its first line lost the indentation -- dedented as a whole; None when the
    first line is not like that."""
    lines = code.split("\n")
    rows = [i for i, ln in enumerate(lines) if ln.strip()]
    if len(rows) < 2 or lines[rows[0]][:1].isspace() or not lines[rows[1]][:1].isspace():
        return None
    second = lines[rows[1]]
    lines[rows[0]] = second[: len(second) - len(second.lstrip())] + lines[rows[0]]
    return _dedent_first("\n".join(lines))


def _line_starts(code: str, predicate) -> list[int]:
    offsets, pos = [], 0
    for line in code.split("\n"):
        if predicate(line):
            offsets.append(pos)
        pos += len(line) + 1
    return offsets


def _def_pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"^[ \t]*(async[ \t]+)?def[ \t]+{re.escape(name)}[ \t]*\(", re.MULTILINE)


def _recover(code: str, name: str, python: tuple[int, int] | None) -> tuple[str, list[str]]:
    """The largest part of `code` that parses and defines `name`: drop leading prose, trailing junk.

    Cuts are tried only at line starts: before the first `def name(` line (where code may start) and
    after it at column 0 (where a top-level statement may start), so the function itself is never cut.
    """
    tree = _parses(code, python)
    if tree is not None:
        return code, []
    failure = SampleSyntaxError(SpliceErrorKind.SYNTAX,
                                f"sample does not parse: {_syntax_message(code, python)}")
    first_def = _def_pattern(name).search(code)
    if first_def is None:
        raise failure
    starts = [0] + [s for s in _line_starts(code, lambda ln: bool(_CODE_START.match(ln.lstrip())))
                    if 0 < s <= first_def.start()]
    for start in starts:
        part = _dedent_first(code[start:])
        def_at = _def_pattern(name).search(part)
        ends = [len(part)] + sorted((e for e in _line_starts(part, lambda ln: bool(ln[:1].strip()))
                                     if def_at is not None and e > def_at.start()), reverse=True)
        for end in ends:
            tree = _parses(part[:end], python)
            if tree is not None and _ast_defines(tree, name):
                notes = []
                if start:
                    notes.append(f"dropped {code[:start].count(chr(10))} leading line(s) that do not parse")
                if end < len(part):
                    notes.append(f"dropped {part[end:].rstrip().count(chr(10)) + 1} trailing line(s) "
                                 "that do not parse")
                return part[:end].rstrip() + "\n", notes
    raise failure


def _expand_indent_tabs(code: str, tabsize: int) -> str:
    rows = _string_rows(_parse(code.encode()))
    lines = code.split("\n")
    for i, line in enumerate(lines):
        if i in rows:
            continue
        body = line.lstrip(" \t")
        indent = line[: len(line) - len(body)]
        if "\t" in indent:
            lines[i] = indent.expandtabs(tabsize) + body
    return "\n".join(lines)


def _untab(code: str, tree: ast.Module, python: tuple[int, int] | None) -> str:
    """Spaces for tabs in indentation, keeping the syntax tree (4 per tab when possible, else 8)."""
    if "\t" not in code:
        return code
    reference = ast.dump(tree)
    for tabsize in (4, 8):
        candidate = _expand_indent_tabs(code, tabsize)
        parsed = _parses(candidate, python)
        if parsed is not None and ast.dump(parsed) == reference:
            return candidate
    return code


@dataclass
class _Prepared:
    code: bytes
    root: Node
    found: _Found
    notes: list[str] = field(default_factory=list)


def prepare_sample(sample_code: str, qualname: str, python: tuple[int, int] | None = None) -> _Prepared:
    """Extract, recover, normalise and parse a sample; raises SampleSyntaxError when it cannot be used."""
    name = qualname.split(".")[-1]
    code, notes = extract_code(sample_code, name, python)
    tree = _parses(code, python)
    assert tree is not None  # extract_code returns parseable code
    code = _untab(code, tree, python)
    data = code.encode("utf-8")
    root = _parse(data)
    found = _find_in_sample(root, qualname)
    if found is None:
        raise SampleSyntaxError(SpliceErrorKind.MISSING_DEFINITION,
                                f"sample has no definition of {name!r}", notes)
    return _Prepared(data, root, found, notes)


# --------------------------------------------------------------------------- re-indenting and placing

def _line_prefix(data: bytes, node: Node) -> str:
    """The indentation of the line a node starts on (the original's depth)."""
    line_start = data.rfind(b"\n", 0, node.start_byte) + 1
    return data[line_start:node.start_byte].decode("utf-8")


def _reindent(text: str, first_row: int, col: int, string_rows: set[int], prefix: str) -> str:
    """Text of a statement starting at (first_row, col), moved to indentation `prefix`.

    The first line is returned without indentation (the caller's offset already has it); lines inside
    multi-line strings are kept byte for byte.
    """
    lines = text.split("\n")
    out = [lines[0]]
    for row, line in enumerate(lines[1:], start=first_row + 1):
        if row in string_rows:
            out.append(line)
        elif not line.strip():
            out.append("")
        elif not line[:col].strip():
            out.append(prefix + line[col:])
        else:   # a comment or bracket continuation left of the block: its indentation is free
            out.append(prefix + line.lstrip())
    return "\n".join(out)


def _node_text(prep: _Prepared, node: Node, prefix: str, string_rows: set[int],
               make_async: bool = False) -> str:
    raw = prep.code[node.start_byte:node.end_byte]
    if make_async:   # insert `async ` before `def`, after any decorators
        func_at = _unwrap(node).start_byte - node.start_byte
        raw = raw[:func_at] + b"async " + raw[func_at:]
    return _reindent(raw.decode("utf-8"), node.start_point[0], node.start_point[1], string_rows, prefix)


def _assigned_names(stmt: Node) -> list[str] | None:
    """Names bound by `NAME = ...` / `A, B = ...` (None for any other statement)."""
    if stmt.type != "expression_statement" or stmt.named_child_count != 1:
        return None
    assign = stmt.named_children[0]
    if assign.type != "assignment":
        return None
    left = assign.child_by_field_name("left")
    if left is None:
        return None
    if left.type == "identifier":
        return [_text(left)]
    if left.type in ("pattern_list", "tuple_pattern") and all(
            c.type == "identifier" for c in left.named_children):
        return [_text(c) for c in left.named_children]
    return None


def _import_names(stmt: Node) -> list[str]:
    names = []
    for child in stmt.named_children:
        if stmt.type == "import_from_statement" and child == stmt.child_by_field_name("module_name"):
            continue
        if child.type == "aliased_import":
            alias = child.child_by_field_name("alias")
            names.append(_text(alias) if alias is not None else "")
        elif child.type == "dotted_name":
            names.append(_text(child).split(".")[0])
    return names


def _bound_names(stmt: Node) -> list[str]:
    if _unwrap(stmt).type in _DEFS:
        return [_name(stmt) or ""]
    if stmt.type in _IMPORTS:
        return _import_names(stmt)
    return _assigned_names(stmt) or []


def _scope_names(children: list[Node]) -> set[str]:
    return {n for stmt in _scope_statements(children) for n in _bound_names(stmt)}


def _is_docstring_or_noise(stmt: Node) -> bool:
    if stmt.type in ("comment", "pass_statement"):
        return True
    return (stmt.type == "expression_statement" and stmt.named_child_count == 1
            and stmt.named_children[0].type in ("string", "concatenated_string"))


def _self_attributes(func: Node, class_name: str) -> set[str]:
    """Names the method reaches as self.x / cls.x / Class.x."""
    owners = {"self", "cls", class_name}
    found: set[str] = set()
    stack = [func]
    while stack:
        node = stack.pop()
        if node.type == "attribute":
            obj, attr = node.child_by_field_name("object"), node.child_by_field_name("attribute")
            if obj is not None and attr is not None and obj.type == "identifier" and _text(obj) in owners:
                found.add(_text(attr))
        stack.extend(node.children)
    return found


def _top_level(node: Node) -> Node:
    while node.parent is not None and node.parent.type != "module":
        node = node.parent
    return node


@dataclass
class _Plan:
    in_scope: list[Node] = field(default_factory=list)     # helpers placed right after the target
    after_class: list[Node] = field(default_factory=list)  # module-level helpers of a method target
    imports: list[Node] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _plan_helpers(prep: _Prepared, target: _Target, orig_root: Node) -> _Plan:
    plan = _Plan()
    name = _name(target.func) or ""
    module_names = _scope_names(_body_children(orig_root))
    class_names = _scope_names(_body_children(target.classes[-1])) if target.classes else module_names
    reached = _self_attributes(prep.found.func, _name(target.classes[-1]) or "") if target.classes else set()
    owner = _top_level(prep.found.outer)
    members = []
    if prep.found.from_class is not None:
        members = [s for s in _body_children(prep.found.from_class) if s != prep.found.outer]
    for stmt in members:   # the sample class's other members: into the class
        _place(plan, stmt, plan.in_scope, class_names | {name}, "class")
    for stmt in prep.root.named_children:
        if stmt == owner:
            continue
        if stmt.type in _IMPORTS:
            plan.imports.append(stmt)
        elif stmt.type == "future_import_statement":
            plan.notes.append(f"dropped {_text(stmt)!r}: it would change the whole module")
        elif not target.classes:
            _place(plan, stmt, plan.in_scope, module_names | {name}, "module")
        elif _unwrap(stmt).type == "function_definition" and _name(stmt) in reached:
            _place(plan, stmt, plan.in_scope, class_names | {name}, "class")
        else:
            _place(plan, stmt, plan.after_class, module_names, "module")
    return plan


def _place(plan: _Plan, stmt: Node, dest: list[Node], taken: set[str], scope: str) -> None:
    if _is_docstring_or_noise(stmt):
        return
    names = _bound_names(stmt) if (_unwrap(stmt).type in _DEFS or _assigned_names(stmt)) else []
    line = stmt.start_point[0] + 1
    if not names:
        plan.notes.append(f"dropped the sample's top-level statement at line {line} ({stmt.type})")
    elif taken & set(names):
        plan.notes.append(f"dropped the sample's {', '.join(sorted(taken & set(names)))} (line {line}): "
                          f"the {scope} already defines it")
    else:
        dest.append(stmt)
        taken.update(names)


def _import_point(data: bytes, root: Node) -> int:
    """Byte offset where hoisted imports go: after header comments, the docstring, `from __future__`."""
    end = 0
    first = True
    for stmt in root.named_children:
        if stmt.type == "comment":
            end = stmt.end_byte
            continue
        is_docstring = first and _is_docstring_or_noise(stmt) and stmt.type == "expression_statement"
        first = False
        if not (is_docstring or stmt.type == "future_import_statement"):
            break
        end = stmt.end_byte
    if end == 0:
        return 0
    newline = data.find(b"\n", end)
    return len(data) if newline < 0 else newline + 1


@functools.lru_cache(maxsize=4096)
def _import_key(text: str) -> str:
    try:
        return ast.dump(_quiet_parse(text, None))
    except SyntaxError:
        return " ".join(text.split())


def _new_imports(plan: _Plan, orig_root: Node) -> list[str]:
    existing = {_import_key(_text(s)) for s in orig_root.named_children if s.type in _IMPORTS}
    out: list[str] = []
    for stmt in plan.imports:
        text = _text(stmt)
        key = _import_key(text)
        if key not in existing:
            existing.add(key)
            out.append(text)
    return out


# --------------------------------------------------------------------------- the entry points

@dataclass(frozen=True)
class _Edit:
    start: int
    end: int
    text: bytes


def _apply(data: bytes, edits: list[_Edit]) -> bytes:
    for edit in sorted(edits, key=lambda e: (e.start, e.end), reverse=True):
        data = data[:edit.start] + edit.text + data[edit.end:]
    return data


def _shifted(offset: int, edits: list[_Edit]) -> int:
    """Where `offset` of the original lands after the edits that come before it."""
    return offset + sum(len(e.text) - (e.end - e.start) for e in edits if e.end <= offset
                        and (e.start < offset or e.start == e.end))


def _compile_error(source: str, python: tuple[int, int] | None) -> str | None:
    try:
        # Without a feature version to check, the source is compiled directly: half the time of building
        # the AST's Python objects first and compiling those.
        code = source if host_feature_version(python) is None else _quiet_parse(source, python)
        with warnings.catch_warnings(), _COMPILE_LOCK:
            warnings.simplefilter("ignore")
            compile(code, "<spliced>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        where = f"line {exc.lineno}: " if isinstance(exc, SyntaxError) else ""
        return f"{where}{getattr(exc, 'msg', str(exc))}"
    return None


@functools.lru_cache(maxsize=64)
def _original_compiles(source: str, python: tuple[int, int] | None) -> bool:
    """The same file is checked for every sample of its task: once is enough."""
    return _compile_error(source, python) is None


def splice(original_file_source: str, target_qualname: str, sample_code: str, *,
           python: tuple[int, int] | None = None, lineno: int | None = None) -> SpliceResult:
    """Replace the definition of `target_qualname` in a file by the sample's definition.

    `python` is the target interpreter's (major, minor), used to reject syntax it does not have;
    `lineno` picks one of several definitions of the same name (a property's getter and setter).
    Raises TaskError when the original file has no such function (a task problem, not the sample's).
    """
    data = original_file_source.encode("utf-8")
    orig_root = _parse(data)
    target = _find_original(orig_root, target_qualname, lineno)
    try:
        prep = prepare_sample(sample_code, target_qualname, python)
    except SampleSyntaxError as exc:
        return SpliceResult(ok=False, error=exc.kind, message=exc.message, notes=exc.notes)
    rows = _string_rows(prep.root)
    prefix = _line_prefix(data, target.outer)
    own_decorators = prep.found.outer.type == "decorated_definition"
    sample_node = prep.found.outer if own_decorators else prep.found.func
    replaced = target.outer if own_decorators else target.func
    make_async = _is_async(target.func) and not _is_async(prep.found.func)
    function_code = _node_text(prep, sample_node, prefix, rows, make_async)
    plan = _plan_helpers(prep, target, orig_root)
    notes = prep.notes + plan.notes
    if make_async:
        notes.append("made the sample async: the original is async")

    gap = "\n\n" if target.classes else "\n\n\n"
    scope_text = "".join(gap + prefix + _node_text(prep, h, prefix, rows) for h in plan.in_scope)
    edits = [_Edit(replaced.start_byte, replaced.end_byte, (function_code + scope_text).encode())]
    if plan.after_class:
        outer_class = _top_level(target.classes[0])
        class_prefix = _line_prefix(data, outer_class)
        text = "".join("\n\n\n" + class_prefix + _node_text(prep, h, class_prefix, rows)
                       for h in plan.after_class)
        edits.append(_Edit(outer_class.end_byte, outer_class.end_byte, text.encode()))
    imports = _new_imports(plan, orig_root)
    if imports:
        at = _import_point(data, orig_root)
        lead = "\n" if at == len(data) and data and not data.endswith(b"\n") else ""
        edits.append(_Edit(at, at, (lead + "".join(i + "\n" for i in imports)).encode()))

    new = _apply(data, edits)
    start = _shifted(replaced.start_byte, [e for e in edits if e.start < replaced.start_byte])
    first_line = new[:start].count(b"\n") + 1
    lines = (first_line, first_line + function_code.count("\n"))
    new_source = new.decode("utf-8")
    helper_names = [_name(h) or ", ".join(_assigned_names(h) or []) for h in plan.in_scope + plan.after_class]
    common = dict(function_code=function_code, helper_names=helper_names, hoisted_imports=imports,
                  notes=notes)
    if _original_compiles(original_file_source, python):
        error = _compile_error(new_source, python)
        if error is not None:
            return SpliceResult(ok=False, error=SpliceErrorKind.SYNTAX, new_source=new_source,
                                message=f"spliced file does not compile: {error}", **common)
    else:
        notes.append("the original file does not compile on this host's Python: spliced file not checked")
    return SpliceResult(ok=True, new_source=new_source, function_lines=lines, **common)


def blank_body(original_file_source: str, qualname: str, *, lineno: int | None = None,
               statement: str = "raise NotImplementedError") -> str:
    """The file with the function's body replaced by `statement` (docstring kept).

    Used to check that a task's tests notice the function missing (and, with `pass`, that they look at
    what it returns).
    """
    data = original_file_source.encode("utf-8")
    target = _find_original(_parse(data), qualname, lineno)
    body = target.func.child_by_field_name("body")
    if body is None:
        raise TaskError(f"function {qualname!r} has no body")
    same_line = body.start_point[0] == target.func.start_point[0]   # def f(): return 1
    if same_line:
        indent = "\n" + _line_prefix(data, target.outer) + "    "
    else:
        indent = "\n" + data[data.rfind(b"\n", 0, body.start_byte) + 1:body.start_byte].decode()
    first = next((c for c in body.named_children if c.type != "comment"), None)
    keep = indent if same_line else ""
    if first is not None and first.type == "expression_statement" and _is_docstring_or_noise(first):
        keep += _text(first) + indent
    replacement = (keep + statement).encode()
    return (data[:body.start_byte] + replacement + data[body.end_byte:]).decode("utf-8")
