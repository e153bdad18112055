"""Context variants: what a prompt shows besides the function header.

Each variant is one function registered with `@variant(name)`, taking the task's view and returning
context blocks. Variants compose with `+` (`oracle+class`): their blocks are concatenated in order and
duplicate blocks dropped. An unknown name fails loudly. Built-in variants:

    none    nothing: signature + docstring only (CoderEval's setting)
    oracle  definitions (stubs) of exactly the symbols the original body uses: imports it relies on,
            members of its class, file-level names, and symbols of other project files
    class   the enclosing class's skeleton (attributes and method stubs, the target left out)
    file    the whole file, with the target's docstring and body replaced by `...`
    all     the file's all_context listing (every class, API and variable it defines or imports)

Each block has a priority: when the prompt exceeds its token budget, blocks are cut line by line from
their end, lowest priority first (see budget.py): all, file, oracle:project, oracle:file, oracle:imports,
class, oracle:class. The function header is never cut.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Callable
from dataclasses import dataclass

from coderun.errors import UsageError
from coderun.prompts.source import FunctionNode, ProjectSource, SourceFile
from coderun.records import Task

PRIORITY = {"all": 10, "file": 20, "oracle:project": 30, "oracle:file": 40, "oracle:imports": 50,
            "class": 60, "oracle:class": 70}


@dataclass(frozen=True)
class ContextBlock:
    kind: str        # a key of PRIORITY
    title: str       # one line saying what the block is
    text: str        # Python source (or comments), column 0

    @property
    def priority(self) -> int:
        return PRIORITY.get(self.kind, 0)


@dataclass(frozen=True)
class TaskView:
    """What a variant may look at: the task record, its parsed file and the project checkout."""

    task: Task
    file: SourceFile
    node: FunctionNode
    project: ProjectSource

    @property
    def enclosing_class(self) -> ast.ClassDef | None:
        return self.file.find_class(self.task.class_name) if self.task.class_name else None


VariantFn = Callable[[TaskView], list[ContextBlock]]
_VARIANTS: dict[str, VariantFn] = {}


def variant(name: str) -> Callable[[VariantFn], VariantFn]:
    def register(fn: VariantFn) -> VariantFn:
        if name in _VARIANTS or "+" in name or ":" in name:
            raise ValueError(f"context variant {name!r} is already registered or not a valid name")
        _VARIANTS[name] = fn
        return fn
    return register


def variant_names() -> list[str]:
    return list(_VARIANTS)


def parse_context(spec: str) -> list[str]:
    """`oracle+class` -> ["oracle", "class"], every part checked; `none` composes to nothing."""
    parts = [p.strip() for p in spec.split("+")]
    for p in parts:
        if p not in _VARIANTS:
            raise UsageError(f"unknown context variant {p!r} in {spec!r}; one of: {', '.join(_VARIANTS)} "
                             "(compose with +, e.g. oracle+class)")
    if len(parts) != len(set(parts)):
        raise UsageError(f"context variant {spec!r} names a part twice")
    return parts


def context_blocks(view: TaskView, spec: str) -> list[ContextBlock]:
    blocks: list[ContextBlock] = []
    for name in parse_context(spec):
        for block in _VARIANTS[name](view):
            if block.text.strip() and block not in blocks:
                blocks.append(block)
    return blocks


@variant("none")
def _none(view: TaskView) -> list[ContextBlock]:
    return []


@variant("oracle")
def _oracle(view: TaskView) -> list[ContextBlock]:
    from coderun.prompts.oracle import oracle_blocks

    return oracle_blocks(view)


@variant("class")
def _class(view: TaskView) -> list[ContextBlock]:
    cls = view.enclosing_class
    if cls is None:
        return []
    return [ContextBlock("class", f"the enclosing class {view.task.class_name} (without {view.task.name})",
                         view.file.stub(cls, skip=view.task.name))]


@variant("file")
def _file(view: TaskView) -> list[ContextBlock]:
    node, f = view.node, view.file
    body_indent = " " * (node.body[0].col_offset if node.body else node.col_offset + 4)
    lines = [*f.lines[: f.header_end(node)], f"{body_indent}...  # {view.task.name}: completed below",
             *f.lines[(node.end_lineno or node.lineno):]]
    return [ContextBlock("file", f"the file {view.task.file}", "\n".join(lines))]


@variant("all")
def _all(view: TaskView) -> list[ContextBlock]:
    ctx = view.task.all_context
    rows = [f"# {label}: {', '.join(names)}" for label, names in
            (("classes", ctx.classes), ("apis", ctx.apis), ("vars", ctx.vars)) if names]
    return [ContextBlock("all", f"names available in {view.task.file}", "\n".join(rows))] if rows else []


BUILTIN_NAMES = frozenset(dir(builtins))
