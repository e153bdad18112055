"""Python scopes over a tree-sitter syntax tree: what each scope binds and which names it uses.

One walk per file builds the scope tree (module, classes, functions, lambdas, comprehensions). A function's
free names are then the uses in its subtree that Python's rules (LEGB, class scopes skipped by nested
functions, `global`/`nonlocal`) do not bind inside it. Decorators, default values and annotations of a
definition are evaluated in the enclosing scope, so they are not part of its body.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tree_sitter import Node

_COMPREHENSIONS = {"list_comprehension", "set_comprehension", "dictionary_comprehension",
                   "generator_expression"}
_PATTERN_CONTAINERS = {"pattern_list", "tuple_pattern", "list_pattern", "tuple", "list",
                       "parenthesized_expression", "list_splat_pattern", "list_splat", "as_pattern_target"}


@dataclass(eq=False)
class Binding:
    name: str
    kind: str                   # param | self | assign | import | def | class | other
    node: Node
    target: str | None = None   # import: absolute dotted name bound; def/class: qualname in the module
    imported: str | None = None  # import: the module the statement imports ("a.b.c" for `import a.b.c`)
    is_module: bool = False     # import: the bound name is a module
    relative: bool = False      # import: a relative import (always the project)


@dataclass(eq=False)
class Use:
    name: str
    node: Node
    scope: Scope


@dataclass(eq=False)
class Scope:
    kind: str                   # module | class | function | lambda | comprehension
    node: Node
    parent: Scope | None
    qualname: str
    bindings: dict[str, list[Binding]] = field(default_factory=dict)
    globals: set[str] = field(default_factory=set)
    nonlocals: set[str] = field(default_factory=set)
    uses: list[Use] = field(default_factory=list)
    children: list[Scope] = field(default_factory=list)
    imports: list[Binding] = field(default_factory=list)
    star_imports: list[tuple[str, bool, int]] = field(default_factory=list)  # (module, relative, line)
    self_name: str | None = None     # methods: the first parameter (self/cls)
    instance_attrs: set[str] = field(default_factory=set)  # classes: self.x assigned in methods
    decorators: list[Node] = field(default_factory=list)
    default_uses: list[Use] = field(default_factory=list)  # names used by default parameter values

    def bind(self, b: Binding) -> None:
        scope = self
        if b.name in self.globals:  # `global x` then `x = ...`/`import x`: binds at module level
            while scope.parent is not None:
                scope = scope.parent
        scope.bindings.setdefault(b.name, []).append(b)

    def prefix(self) -> str:
        if self.kind == "module":
            return ""
        return self.qualname + (".<locals>." if self.kind in ("function", "lambda") else ".")

    def walk(self):
        yield self
        for c in self.children:
            yield from c.walk()

    @property
    def enclosing_function(self) -> Scope | None:
        s = self.parent
        while s and s.kind not in ("function", "lambda"):
            if s.kind == "module":
                return None
            s = s.parent
        return s


def text(node: Node) -> str:
    return node.text.decode("utf-8", "replace") if node.text is not None else ""


def dotted(node: Node) -> str | None:
    """`a.b.c` for an identifier/attribute chain, else None."""
    if node.type == "identifier":
        return text(node)
    if node.type == "attribute":
        obj, attr = node.child_by_field_name("object"), node.child_by_field_name("attribute")
        base = dotted(obj) if obj is not None else None
        return f"{base}.{text(attr)}" if base and attr is not None else None
    if node.type == "dotted_name":
        return text(node)
    return None


class ScopeBuilder:
    """Builds the scope tree of one module."""

    def __init__(self, module: str, package: str):
        self.module = module
        self.package = package

    def build(self, root: Node) -> Scope:
        scope = Scope("module", root, None, "")
        for child in root.named_children:
            self.visit(child, scope)
        return scope

    # -- dispatch ---------------------------------------------------------------------------------
    def visit(self, node: Node, scope: Scope) -> None:
        handler = getattr(self, "_v_" + node.type, None)
        if handler is not None:
            handler(node, scope)
            return
        if node.type in _COMPREHENSIONS:
            self._comprehension(node, scope)
            return
        for child in node.named_children:
            self.visit(child, scope)

    def _v_identifier(self, node: Node, scope: Scope) -> None:
        scope.uses.append(Use(text(node), node, scope))

    def _v_comment(self, node: Node, scope: Scope) -> None:
        return

    def _v_string(self, node: Node, scope: Scope) -> None:
        for child in node.named_children:
            if child.type == "interpolation":
                self.visit(child, scope)

    def _v_attribute(self, node: Node, scope: Scope) -> None:
        obj = node.child_by_field_name("object")
        if obj is not None:
            self.visit(obj, scope)

    def _v_keyword_argument(self, node: Node, scope: Scope) -> None:
        value = node.child_by_field_name("value")
        if value is not None:
            self.visit(value, scope)

    # -- definitions ------------------------------------------------------------------------------
    def _v_decorated_definition(self, node: Node, scope: Scope) -> None:
        decorators = [c for c in node.named_children if c.type == "decorator"]
        for d in decorators:
            self.visit(d, scope)
        definition = node.child_by_field_name("definition")
        if definition is not None:
            self._definition(definition, scope, decorators)

    def _v_function_definition(self, node: Node, scope: Scope) -> None:
        self._definition(node, scope, [])

    def _v_class_definition(self, node: Node, scope: Scope) -> None:
        self._definition(node, scope, [])

    def _definition(self, node: Node, scope: Scope, decorators: list[Node]) -> None:
        name_node = node.child_by_field_name("name")
        name = text(name_node) if name_node is not None else "<anonymous>"
        qual = scope.prefix() + name
        if node.type == "class_definition":
            scope.bind(Binding(name, "class", node, target=qual))
            supers = node.child_by_field_name("superclasses")
            if supers is not None:
                self.visit(supers, scope)
            inner = Scope("class", node, scope, qual, decorators=decorators)
        elif node.type == "function_definition":
            scope.bind(Binding(name, "def", node, target=qual))
            inner = Scope("function", node, scope, qual, decorators=decorators)
            self._parameters(node.child_by_field_name("parameters"), scope, inner)
            ret = node.child_by_field_name("return_type")
            if ret is not None:
                self.visit(ret, scope)
            if scope.kind == "class" and not _is_static(decorators):
                inner.self_name = _first_param(node)
                if inner.self_name:
                    inner.bindings[inner.self_name][0].kind = "self"
        else:
            self.visit(node, scope)
            return
        scope.children.append(inner)
        body = node.child_by_field_name("body")
        if body is not None:
            for child in body.named_children:
                self.visit(child, inner)

    def _parameters(self, params: Node | None, outer: Scope, inner: Scope) -> None:
        """Names bind in the new scope; defaults and annotations evaluate in the enclosing one."""
        if params is None:
            return
        for p in params.named_children:
            if p.type == "identifier":
                inner.bind(Binding(text(p), "param", p))
                continue
            name = p.child_by_field_name("name")
            for field_name in ("value", "type"):
                sub = p.child_by_field_name(field_name)
                if sub is not None:
                    before = len(outer.uses)
                    self.visit(sub, outer)
                    if field_name == "value":  # a default is needed to run the function: count it
                        inner.default_uses.extend(outer.uses[before:])
            if name is None:  # splat patterns, typed_parameter: the identifier is an unnamed child
                name = next((c for c in p.named_children if c.type == "identifier"), None)
                if name is None and p.named_children and p.named_children[0].type in (
                        "list_splat_pattern", "dictionary_splat_pattern"):
                    name = next((c for c in p.named_children[0].named_children if c.type == "identifier"),
                                None)
            if name is not None and name.type == "identifier":
                inner.bind(Binding(text(name), "param", name))
            elif name is not None:
                self._bind_target(name, inner)

    def _v_lambda(self, node: Node, scope: Scope) -> None:
        inner = Scope("lambda", node, scope, scope.prefix() + "<lambda>")
        scope.children.append(inner)
        self._parameters(node.child_by_field_name("parameters"), scope, inner)
        body = node.child_by_field_name("body")
        if body is not None:
            self.visit(body, inner)

    def _comprehension(self, node: Node, scope: Scope) -> None:
        inner = Scope("comprehension", node, scope, scope.prefix() + "<comprehension>")
        scope.children.append(inner)
        for child in node.named_children:
            if child.type == "for_in_clause":
                left, right = child.child_by_field_name("left"), child.child_by_field_name("right")
                if left is not None:
                    self._bind_target(left, inner)
                for r in child.children_by_field_name("right") or ([right] if right else []):
                    self.visit(r, inner)
            else:
                self.visit(child, inner)

    # -- binding statements ----------------------------------------------------------------------
    def _bind_target(self, node: Node, scope: Scope, kind: str = "assign") -> None:
        if node.type == "identifier":
            scope.bind(Binding(text(node), kind, node))
        elif node.type in _PATTERN_CONTAINERS:
            for c in node.named_children:
                self._bind_target(c, scope, kind)
        elif node.type == "attribute":
            self._note_instance_attr(node, scope)
            self.visit(node, scope)
        else:
            self.visit(node, scope)

    def _note_instance_attr(self, node: Node, scope: Scope) -> None:
        """`self.x = ...` in a method makes x a member of the class."""
        obj = node.child_by_field_name("object")
        attr = node.child_by_field_name("attribute")
        fn = scope if scope.kind == "function" else scope.enclosing_function
        if fn is None or obj is None or attr is None or obj.type != "identifier":
            return
        if fn.self_name and text(obj) == fn.self_name and fn.parent and fn.parent.kind == "class":
            fn.parent.instance_attrs.add(text(attr))

    def _v_assignment(self, node: Node, scope: Scope) -> None:
        left, right, typ = (node.child_by_field_name(f) for f in ("left", "right", "type"))
        if typ is not None:
            self.visit(typ, scope)
        if right is not None:
            self.visit(right, scope)
        if left is not None and (right is not None or left.type != "identifier"):
            self._bind_target(left, scope)
        elif left is not None:  # bare annotation `x: int` binds x as local too
            scope.bind(Binding(text(left), "assign", left))

    def _v_augmented_assignment(self, node: Node, scope: Scope) -> None:
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        if right is not None:
            self.visit(right, scope)
        if left is not None:
            self.visit(left, scope)
            if left.type == "identifier":
                scope.bind(Binding(text(left), "assign", left))

    def _v_for_statement(self, node: Node, scope: Scope) -> None:
        for child in node.named_children:
            if child == node.child_by_field_name("left"):
                self._bind_target(child, scope)
            else:
                self.visit(child, scope)

    def _v_as_pattern(self, node: Node, scope: Scope) -> None:
        for child in node.named_children:
            if child.type == "as_pattern_target":
                self._bind_target(child, scope)
            elif node.parent is not None and node.parent.type == "case_pattern":
                self._pattern(child, scope)
            else:
                self.visit(child, scope)

    def _v_named_expression(self, node: Node, scope: Scope) -> None:
        value, name = node.child_by_field_name("value"), node.child_by_field_name("name")
        if value is not None:
            self.visit(value, scope)
        target = scope
        while target.kind == "comprehension" and target.parent is not None:
            target = target.parent
        if name is not None:
            target.bind(Binding(text(name), "assign", name))

    def _v_delete_statement(self, node: Node, scope: Scope) -> None:
        for child in node.named_children:
            self._bind_target(child, scope, "other")

    def _v_global_statement(self, node: Node, scope: Scope) -> None:
        scope.globals.update(text(c) for c in node.named_children if c.type == "identifier")

    def _v_nonlocal_statement(self, node: Node, scope: Scope) -> None:
        scope.nonlocals.update(text(c) for c in node.named_children if c.type == "identifier")

    def _v_case_pattern(self, node: Node, scope: Scope) -> None:
        self._pattern(node, scope)

    def _pattern(self, node: Node, scope: Scope) -> None:
        """Match patterns: bare names capture, dotted names and class patterns are uses."""
        if node.type == "identifier":
            if text(node) != "_":
                scope.bind(Binding(text(node), "assign", node))
            return
        if node.type == "dotted_name":
            first = node.named_children[0] if node.named_children else None
            if first is not None and len(node.named_children) == 1 and node.parent is not None \
                    and node.parent.type == "case_pattern":
                scope.bind(Binding(text(first), "assign", first))
            elif first is not None:
                scope.uses.append(Use(text(first), first, scope))
            return
        if node.type == "keyword_pattern":
            for c in node.named_children[1:]:
                self._pattern(c, scope)
            return
        if node.type in ("string", "integer", "float", "true", "false", "none"):
            return
        for c in node.named_children:
            self._pattern(c, scope)

    # -- imports -----------------------------------------------------------------------------------
    def _v_import_statement(self, node: Node, scope: Scope) -> None:
        for child in node.named_children:
            if child.type == "dotted_name":
                full = text(child)
                first = full.split(".")[0]
                b = Binding(first, "import", child, target=first, imported=full, is_module=True)
            elif child.type == "aliased_import":
                name, alias = child.child_by_field_name("name"), child.child_by_field_name("alias")
                full = text(name) if name is not None else ""
                b = Binding(text(alias) if alias is not None else full, "import", child, target=full,
                            imported=full, is_module=True)
            else:
                continue
            scope.bind(b)
            scope.imports.append(b)

    def _v_future_import_statement(self, node: Node, scope: Scope) -> None:
        return

    def _v_import_from_statement(self, node: Node, scope: Scope) -> None:
        mod_node = node.child_by_field_name("module_name")
        module, relative = self._absolute(mod_node)
        for child in node.named_children:
            if child == mod_node:
                continue
            if child.type == "wildcard_import":
                scope.star_imports.append((module, relative, node.start_point[0] + 1))
                scope.imports.append(Binding("*", "import", node, target=module, imported=module,
                                             relative=relative))
                continue
            if child.type == "dotted_name":
                name, alias = text(child), None
            elif child.type == "aliased_import":
                n, a = child.child_by_field_name("name"), child.child_by_field_name("alias")
                name, alias = (text(n) if n is not None else ""), (text(a) if a is not None else None)
            else:
                continue
            b = Binding(alias or name, "import", child, target=f"{module}.{name}" if module else name,
                        imported=module, relative=relative)
            scope.bind(b)
            scope.imports.append(b)

    def _absolute(self, mod_node: Node | None) -> tuple[str, bool]:
        """The absolute module of `from X import ...`; relative imports resolve against the package."""
        if mod_node is None:
            return "", False
        if mod_node.type != "relative_import":
            return text(mod_node), False
        prefix = next((c for c in mod_node.children if c.type == "import_prefix"), None)
        dots = len(text(prefix)) if prefix is not None else 1
        rest = next((c for c in mod_node.named_children if c.type == "dotted_name"), None)
        parts = self.package.split(".") if self.package else []
        base = parts[: max(len(parts) - (dots - 1), 0)]
        if rest is not None:
            base = [*base, *text(rest).split(".")]
        return ".".join(base), True


def _is_static(decorators: list[Node]) -> bool:
    return any(text(d).lstrip("@").strip() in ("staticmethod", "builtins.staticmethod") for d in decorators)


def _first_param(func: Node) -> str | None:
    params = func.child_by_field_name("parameters")
    if params is None:
        return None
    for p in params.named_children:
        if p.type == "identifier":
            return text(p)
        if p.type in ("typed_parameter", "default_parameter", "typed_default_parameter"):
            n = p.child_by_field_name("name") or next(
                (c for c in p.named_children if c.type == "identifier"), None)
            return text(n) if n is not None else None
        return None
    return None


def resolve(use: Use, inside: set[int]) -> tuple[Scope | None, list[Binding]]:
    """The scope binding `use` by Python's rules, and its bindings; (None, []) when nothing binds it.

    `inside` holds the ids of the analyzed function's scopes; it is only used by callers, the lookup
    itself follows Python: class scopes are invisible to the functions nested in them.
    """
    s: Scope | None = use.scope
    first = True
    name = use.name
    while s is not None:
        if s.kind == "class" and not first:
            s = s.parent
            continue
        if name in s.globals:
            while s.parent is not None:
                s = s.parent
            return (s, s.bindings[name]) if name in s.bindings else (None, [])
        if name in s.bindings and name not in s.nonlocals:
            return s, s.bindings[name]
        first = False
        s = s.parent
    return None, []
