"""The `oracle` variant: stubs of exactly the symbols the original body uses.

The names come from the task's `oracle_context` (the analyzer's classification of the body's references)
together with the names the body itself reads (locals and parameters excluded), so a task built without
an analyzer still gets its context. Each name is found where the body would find it: a member of the
enclosing class (`self.x`, `cls.x`, `Class.x`), a file-level definition, an import, and through a
project import the definition in the other project file (following one re-export per hop, three hops
at most). Builtins and names defined nowhere in the project are left out: the model knows the former
and nothing can be shown for the latter (third-party and standard-library names keep their import).
"""

from __future__ import annotations

import ast

from coderun.prompts.source import DefNode, FunctionNode, ImportBinding, SourceFile
from coderun.prompts.variants import BUILTIN_NAMES, ContextBlock, TaskView


def oracle_blocks(view: TaskView) -> list[ContextBlock]:
    chains = _used_chains(view)
    imports: dict[str, str] = {}
    members: dict[str, str] = {}
    file_level: dict[int, str] = {}
    project: dict[str, dict[int, str]] = {}
    cls = view.enclosing_class
    self_names = {"self", "cls", *([cls.name] if cls else [])}
    for chain in sorted(chains):
        root, *rest = chain.split(".")
        if root in self_names and cls is not None:
            if rest:  # the class itself is shown through its members, never whole (it holds the target)
                _member(view.file, cls, rest[0], members)
        elif root in view.file.top_level and root != view.node.name:
            node = view.file.top_level[root]
            file_level[node.lineno] = _show(view.file, node)
        elif root in view.file.imports:
            binding = view.file.imports[root]
            imports.setdefault(binding.line, binding.line)
            _project_symbol(view, binding, rest, project)
    blocks = []
    if imports:
        blocks.append(ContextBlock("oracle:imports", "imports the function relies on", "\n".join(imports)))
    if members and cls is not None:
        head = view.file.segment(view.file.start_line(cls), view.file.header_end(cls)).strip()
        blocks.append(ContextBlock("oracle:class", f"members of {view.task.class_name} the function uses",
                                   "\n".join([head, *members.values()])))
    if file_level:
        blocks.append(ContextBlock("oracle:file", f"names from {view.task.file} the function uses",
                                   "\n\n".join(v for _, v in sorted(file_level.items()))))
    for rel, stubs in project.items():
        blocks.append(ContextBlock("oracle:project", f"from {rel}",
                                   "\n\n".join(v for _, v in sorted(stubs.items()))))
    return blocks


def _used_chains(view: TaskView) -> set[str]:
    """Dotted names the body reads, from the analyzer's oracle_context and from the body itself."""
    chains = {t for t in view.task.oracle_context.tokens() if t}
    local = _locals(view.node)
    for node in ast.walk(ast.Module(body=view.node.body, type_ignores=[])):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in local:
            chains.add(node.id)
        elif isinstance(node, ast.Attribute):
            chain = _chain(node)
            if chain and chain.split(".")[0] not in local - {"self", "cls"}:
                chains.add(chain)
    for deco in view.node.decorator_list:
        chains.update(n.id for n in ast.walk(deco) if isinstance(n, ast.Name))
    return {c for c in chains if c.split(".")[0] not in BUILTIN_NAMES or c.split(".")[0] in
            view.file.top_level or c.split(".")[0] in view.file.imports}


def _chain(node: ast.Attribute) -> str | None:
    parts = [node.attr]
    value = node.value
    while isinstance(value, ast.Attribute):
        parts.append(value.attr)
        value = value.value
    if not isinstance(value, ast.Name):
        return None
    return ".".join([value.id, *reversed(parts)])


def _locals(fn: FunctionNode) -> set[str]:
    a = fn.args
    names = {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]}
    names |= {x.arg for x in (a.vararg, a.kwarg) if x}
    for node in ast.walk(ast.Module(body=fn.body, type_ignores=[])):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            names.add(node.id)
        elif isinstance(node, DefNode):
            names.add(node.name)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
    return names


def _show(f: SourceFile, node: ast.stmt, indent: str = "") -> str:
    """A stub for a definition, the statement itself for an assignment (first lines of a long one)."""
    if isinstance(node, DefNode):
        return f.stub(node, indent)
    text = f.segment(node.lineno, node.end_lineno or node.lineno).strip()
    lines = text.splitlines()
    short = "\n".join(lines[:6]) + ("\n" + indent + "...  # (continues)" if len(lines) > 6 else "")
    return "\n".join(indent + line if i == 0 else line for i, line in enumerate(short.splitlines()))


def _member(f: SourceFile, cls: ast.ClassDef, name: str, out: dict[str, str]) -> None:
    """A class member: a def or class attribute in the class (or a base in the same file), else the
    `self.name = ...` assignment that creates it."""
    for klass in _class_and_bases(f, cls):
        for child in klass.body:
            if isinstance(child, DefNode) and child.name == name:
                out.setdefault(name, f.stub(child, "    "))
                return
            if isinstance(child, ast.Assign | ast.AnnAssign) and name in _targets(child):
                out.setdefault(name, "    " + f.statement(child).strip())
                return
    for node in ast.walk(cls):
        if isinstance(node, ast.Assign | ast.AnnAssign) and any(
                isinstance(t, ast.Attribute) and t.attr == name and isinstance(t.value, ast.Name)
                and t.value.id == "self" for t in _assign_targets(node)):
            out.setdefault(name, f"    # {f.statement(node).strip().splitlines()[0]}  (instance attribute)")
            return


def _class_and_bases(f: SourceFile, cls: ast.ClassDef) -> list[ast.ClassDef]:
    out, todo = [], [cls]
    while todo and len(out) < 10:
        klass = todo.pop(0)
        out.append(klass)
        for base in klass.bases:
            node = f.top_level.get(base.id) if isinstance(base, ast.Name) else None
            if isinstance(node, ast.ClassDef) and node not in out:
                todo.append(node)
    return out


def _assign_targets(node: ast.Assign | ast.AnnAssign) -> list[ast.expr]:
    return list(node.targets) if isinstance(node, ast.Assign) else [node.target]


def _targets(node: ast.Assign | ast.AnnAssign) -> set[str]:
    return {n.id for t in _assign_targets(node) for n in ast.walk(t) if isinstance(n, ast.Name)}


def _project_symbol(view: TaskView, binding: ImportBinding, rest: list[str],
                    out: dict[str, dict[int, str]]) -> None:
    """The definition an import names, when it lives in the project."""
    src_file = view.task.file
    for _ in range(3):
        module = binding.module
        attr_path = ([binding.attr] if binding.attr else []) + rest
        rel = view.project.module_file(module, src_file, binding.level)
        if rel and binding.attr:  # `from pkg import mod` binds a module when pkg/mod.py exists
            sub = view.project.module_file(f"{module}.{binding.attr}".lstrip("."), src_file, binding.level)
            if sub and sub != rel:
                rel, attr_path = sub, rest
        target = view.project.file(rel) if rel else None
        if target is None or not attr_path:
            return
        name = attr_path[0]
        if name in target.top_level:
            node = target.top_level[name]
            out.setdefault(target.rel, {})[node.lineno] = _show(target, node)
            return
        if name not in target.imports:
            return
        binding, rest, src_file = target.imports[name], attr_path[1:], target.rel  # a re-export
