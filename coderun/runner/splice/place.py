"""Re-indenting the sample's statements and planning where its helpers and imports go (steps 4-6)."""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass, field

from tree_sitter import Node

from coderun.runner.splice.extract import Prepared
from coderun.runner.splice.nodes import (
    DEFS,
    IMPORTS,
    Target,
    body_children,
    name_of,
    scope_statements,
    text_of,
    unwrap,
)
from coderun.runner.splice.pyparse import quiet_parse


def line_prefix(data: bytes, node: Node) -> str:
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


def statement_text(prep: Prepared, node: Node, prefix: str, string_rows: set[int],
               make_async: bool = False) -> str:
    raw = prep.code[node.start_byte:node.end_byte]
    if make_async:   # insert `async ` before `def`, after any decorators
        func_at = unwrap(node).start_byte - node.start_byte
        raw = raw[:func_at] + b"async " + raw[func_at:]
    return _reindent(raw.decode("utf-8"), node.start_point[0], node.start_point[1], string_rows, prefix)


def assigned_names(stmt: Node) -> list[str] | None:
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
        return [text_of(left)]
    if left.type in ("pattern_list", "tuple_pattern") and all(
            c.type == "identifier" for c in left.named_children):
        return [text_of(c) for c in left.named_children]
    return None


def _import_names(stmt: Node) -> list[str]:
    names = []
    for child in stmt.named_children:
        if stmt.type == "import_from_statement" and child == stmt.child_by_field_name("module_name"):
            continue
        if child.type == "aliased_import":
            alias = child.child_by_field_name("alias")
            names.append(text_of(alias) if alias is not None else "")
        elif child.type == "dotted_name":
            names.append(text_of(child).split(".")[0])
    return names


def _bound_names(stmt: Node) -> list[str]:
    if unwrap(stmt).type in DEFS:
        return [name_of(stmt) or ""]
    if stmt.type in IMPORTS:
        return _import_names(stmt)
    return assigned_names(stmt) or []


def _scope_names(children: list[Node]) -> set[str]:
    return {n for stmt in scope_statements(children) for n in _bound_names(stmt)}


def is_docstring_or_noise(stmt: Node) -> bool:
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
            if obj is not None and attr is not None and obj.type == "identifier" and text_of(obj) in owners:
                found.add(text_of(attr))
        stack.extend(node.children)
    return found


def top_level(node: Node) -> Node:
    while node.parent is not None and node.parent.type != "module":
        node = node.parent
    return node


@dataclass
class Plan:
    in_scope: list[Node] = field(default_factory=list)     # helpers placed right after the target
    after_class: list[Node] = field(default_factory=list)  # module-level helpers of a method target
    imports: list[Node] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def plan_helpers(prep: Prepared, target: Target, orig_root: Node) -> Plan:
    plan = Plan()
    name = name_of(target.func) or ""
    module_names = _scope_names(body_children(orig_root))
    class_names = _scope_names(body_children(target.classes[-1])) if target.classes else module_names
    reached = _self_attributes(prep.found.func, name_of(target.classes[-1]) or "") if target.classes else set()
    owner = top_level(prep.found.outer)
    members = []
    if prep.found.from_class is not None:
        members = [s for s in body_children(prep.found.from_class) if s != prep.found.outer]
    for stmt in members:   # the sample class's other members: into the class
        _place(plan, stmt, plan.in_scope, class_names | {name}, "class")
    for stmt in prep.root.named_children:
        if stmt == owner:
            continue
        if stmt.type in IMPORTS:
            plan.imports.append(stmt)
        elif stmt.type == "future_import_statement":
            plan.notes.append(f"dropped {text_of(stmt)!r}: it would change the whole module")
        elif not target.classes:
            _place(plan, stmt, plan.in_scope, module_names | {name}, "module")
        elif unwrap(stmt).type == "function_definition" and name_of(stmt) in reached:
            _place(plan, stmt, plan.in_scope, class_names | {name}, "class")
        else:
            _place(plan, stmt, plan.after_class, module_names, "module")
    return plan


def _place(plan: Plan, stmt: Node, dest: list[Node], taken: set[str], scope: str) -> None:
    if is_docstring_or_noise(stmt):
        return
    names = _bound_names(stmt) if (unwrap(stmt).type in DEFS or assigned_names(stmt)) else []
    line = stmt.start_point[0] + 1
    if not names:
        plan.notes.append(f"dropped the sample's top-level statement at line {line} ({stmt.type})")
    elif taken & set(names):
        plan.notes.append(f"dropped the sample's {', '.join(sorted(taken & set(names)))} (line {line}): "
                          f"the {scope} already defines it")
    else:
        dest.append(stmt)
        taken.update(names)


def import_point(data: bytes, root: Node) -> int:
    """Byte offset where hoisted imports go: after header comments, the docstring, `from __future__`."""
    end = 0
    first = True
    for stmt in root.named_children:
        if stmt.type == "comment":
            end = stmt.end_byte
            continue
        is_docstring = first and is_docstring_or_noise(stmt) and stmt.type == "expression_statement"
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
        return ast.dump(quiet_parse(text, None))
    except SyntaxError:
        return " ".join(text.split())


def new_imports(plan: Plan, orig_root: Node) -> list[str]:
    existing = {_import_key(text_of(s)) for s in orig_root.named_children if s.type in IMPORTS}
    out: list[str] = []
    for stmt in plan.imports:
        text = text_of(stmt)
        key = _import_key(text)
        if key not in existing:
            existing.add(key)
            out.append(text)
    return out
