"""The original's docstring in the spliced function, for tasks whose tests include the doctests of the target's
own docstring: those examples are the prompt's (CoderEval's prompt gives the docstring), so a sample that
writes a docstring of its own, or none, must not lose them."""

from __future__ import annotations

from tree_sitter import Node

from coderun.runner.splice.nodes import parse_tree, text_of

_STRINGS = ("string", "concatenated_string")


def docstring_node(func: Node) -> Node | None:
    """The expression statement that is a function's docstring (its first statement, comments aside)."""
    body = func.child_by_field_name("body")
    first = next((c for c in body.named_children if c.type != "comment"), None) if body is not None else None
    if (first is not None and first.type == "expression_statement" and first.named_child_count == 1
            and first.named_children[0].type in _STRINGS):
        return first
    return None


def keep_original_docstring(function_code: str, prefix: str, original: Node, notes: list[str]) -> str:
    """`function_code` with the docstring of `original` (the original's function node), noted in `notes`."""
    node = docstring_node(original)
    if node is None:
        return function_code
    notes.append("the original's docstring replaces the sample's: the task's tests include its doctests")
    return with_docstring(function_code, prefix, text_of(node))


def with_docstring(function_code: str, prefix: str, docstring: str) -> str:
    """`function_code` (a definition as spliced at depth `prefix`, its first line without the prefix) with
    `docstring` (the original's, as written at the same depth) in place of its own docstring, or first in
    its body when it has none."""
    # Inside `if 1:` the definition's lines sit at their real depth and parse as they are.
    wrapper = f"if 1:\n{prefix}" if prefix else ""
    data = (wrapper + function_code).encode("utf-8")
    func = _first_function(parse_tree(data))
    if func is None:
        return function_code
    doc = docstring_node(func)
    new = docstring.encode("utf-8")
    if doc is not None:
        data = data[:doc.start_byte] + new + data[doc.end_byte:]
    else:
        data = _insert_first(data, func, new, prefix)
    return data[len(wrapper.encode("utf-8")):].decode("utf-8")


def _insert_first(data: bytes, func: Node, docstring: bytes, prefix: str) -> bytes:
    body = func.child_by_field_name("body")
    first = next((c for c in body.named_children if c.type != "comment"), None) if body is not None else None
    if first is None:
        return data
    line_start = data.rfind(b"\n", 0, first.start_byte) + 1
    indent = data[line_start:first.start_byte]
    if indent.strip():   # `def f(): return x`: the body moves to lines of its own
        indent = f"{prefix}    ".encode()
        return data[:first.start_byte] + b"\n" + indent + docstring + b"\n" + indent + data[first.start_byte:]
    return data[:first.start_byte] + docstring + b"\n" + indent + data[first.start_byte:]


def _first_function(root: Node) -> Node | None:
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "function_definition":
            return node
        stack.extend(reversed(node.children))
    return None
