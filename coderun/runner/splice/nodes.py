"""tree-sitter basics, and finding a definition by its qualified name: in the original file, in a sample."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass

import tree_sitter_python
from tree_sitter import Language, Node, Parser

from coderun.errors import TaskError

_LANGUAGE = Language(tree_sitter_python.language())
_local = threading.local()

DEFS = ("function_definition", "class_definition")
IMPORTS = ("import_statement", "import_from_statement")
_BLOCK_HOLDERS = ("if_statement", "try_statement", "elif_clause", "else_clause", "except_clause",
                  "finally_clause")


def _parser() -> Parser:
    # a Parser is not thread-safe; evaluation workers may be threads
    parser = getattr(_local, "parser", None)
    if parser is None:
        parser = _local.parser = Parser(_LANGUAGE)
    return parser


def parse_tree(data: bytes) -> Node:
    return _parser().parse(data).root_node


def text_of(node: Node) -> str:
    return node.text.decode("utf-8") if node.text is not None else ""


def unwrap(node: Node) -> Node:
    """The function or class inside a decorated_definition (or the node itself)."""
    if node.type == "decorated_definition":
        inner = node.child_by_field_name("definition")
        if inner is not None:
            return inner
    return node


def name_of(node: Node) -> str | None:
    name = unwrap(node).child_by_field_name("name")
    return text_of(name) if name is not None else None


def is_async(func: Node) -> bool:
    return any(child.type == "async" for child in func.children)


def body_children(node: Node) -> list[Node]:
    """Statements of a module or of a class/function body."""
    if node.type == "module":
        return list(node.named_children)
    body = unwrap(node).child_by_field_name("body")
    return list(body.named_children) if body is not None else []


def scope_statements(children: list[Node]) -> Iterator[Node]:
    """Statements of a scope, looking into if/try blocks (conditional definitions)."""
    for child in children:
        yield child
        if child.type in _BLOCK_HOLDERS:
            for sub in child.named_children:
                if sub.type == "block":
                    yield from scope_statements(list(sub.named_children))
                elif sub.type in _BLOCK_HOLDERS:
                    yield from scope_statements([sub])


def multiline_string_rows(root: Node) -> set[int]:
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


@dataclass(frozen=True)
class Target:
    outer: Node                  # decorated_definition or function_definition: the replaced range
    func: Node                   # the function_definition
    classes: tuple[Node, ...]    # enclosing class_definitions, outermost first


def find_original(root: Node, qualname: str, lineno: int | None) -> Target:
    parts = qualname.split(".")
    scope: Node = root
    classes: list[Node] = []
    for part in parts[:-1]:
        found = [s for s in scope_statements(body_children(scope))
                 if unwrap(s).type == "class_definition" and name_of(s) == part]
        if not found:
            raise TaskError(f"class {part!r} of {qualname!r} is not defined in the original file")
        scope = unwrap(found[0])
        classes.append(scope)
    matches = [s for s in scope_statements(body_children(scope))
               if unwrap(s).type == "function_definition" and name_of(s) == parts[-1]]
    if lineno is not None:
        matches = [m for m in matches if lineno in (m.start_point[0] + 1, unwrap(m).start_point[0] + 1)]
    if not matches:
        where = f" at line {lineno}" if lineno is not None else ""
        raise TaskError(f"function {qualname!r}{where} is not defined in the original file")
    return Target(outer=matches[0], func=unwrap(matches[0]), classes=tuple(classes))


@dataclass(frozen=True)
class Found:
    outer: Node
    func: Node
    from_class: Node | None      # the sample class the method was taken from


def find_in_sample(root: Node, qualname: str) -> Found | None:
    parts = qualname.split(".")
    name, class_path = parts[-1], parts[:-1]
    top = list(root.named_children)
    funcs = [s for s in top if unwrap(s).type == "function_definition" and name_of(s) == name]
    if funcs:
        return Found(funcs[-1], unwrap(funcs[-1]), None)
    if not class_path:
        return None
    for cls in _candidate_classes(top, class_path):
        methods = [s for s in body_children(cls)
                   if unwrap(s).type == "function_definition" and name_of(s) == name]
        if methods:
            return Found(methods[-1], unwrap(methods[-1]), cls)
    return None


def _candidate_classes(top: list[Node], class_path: list[str]) -> Iterator[Node]:
    """Sample classes that may hold the method: the full path, the innermost class's name, any class."""
    classes = [unwrap(s) for s in top if unwrap(s).type == "class_definition"]
    for cls in classes:               # exact nesting: class Outer: class Inner: def m
        node: Node | None = cls if name_of(cls) == class_path[0] else None
        for part in class_path[1:]:
            if node is None:
                break
            inner = [unwrap(s) for s in body_children(node)
                     if unwrap(s).type == "class_definition" and name_of(s) == part]
            node = inner[0] if inner else None
        if node is not None:
            yield node
    yield from (c for c in classes if name_of(c) == class_path[-1])
    yield from classes
