"""Per function: its free names, each classified (builtin … project), its level and its contexts.

Classification follows CoderEval's Table 1 and §3.2.3: a reference is
  builtin  a builtin of the project's Python (unless the file or function shadows it);
  stdlib   a module of that Python's standard library, or a name imported from one;
  plib     any other module that is not the project's (installed or not);
  class    a member of the enclosing class reached through self/cls/the class name/super(),
           own or inherited from a class of the same file; also a member whose owner is unknown;
  file     a module-level name defined in the same file (or a variable of an enclosing function);
  project  a name imported from another project module, or a member inherited from a class in
           another file.
The level is that of the highest reference. Imports inside the body count as references to the module.
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass

from tree_sitter import Node

from coderun.analyzers.index import ProjectIndex, SourceFile
from coderun.analyzers.jedi_resolver import JediResolver
from coderun.analyzers.model import ContextKind, FunctionInfo, Reference, RefKind
from coderun.analyzers.pyfacts import PythonFacts
from coderun.analyzers.scopes import Binding, Scope, Use, dotted, resolve, text
from coderun.records import ContextSet, Level

_MODULE_DUNDERS = {"__file__", "__name__", "__doc__", "__spec__", "__package__", "__loader__", "__path__",
                   "__builtins__", "__cached__", "__annotations__", "__dict__"}


@dataclass
class _Chain:
    parts: list[str]      # ["os", "path", "join"]
    called: bool          # the whole chain is called
    end: Node             # the outermost attribute node (or the identifier)


def _chain(node: Node) -> _Chain:
    parts, n = [text(node)], node
    while n.parent is not None and n.parent.type == "attribute" and n.parent.child_by_field_name("object") == n:
        n = n.parent
        attr = n.child_by_field_name("attribute")
        parts.append(text(attr) if attr is not None else "")
    p = n.parent
    called = p is not None and p.type == "call" and p.child_by_field_name("function") == n
    return _Chain(parts, called, n)


def _looks_like_class(name: str) -> bool:
    last = name.rsplit(".", 1)[-1].lstrip("_")
    return bool(last) and last[0].isupper() and not last.isupper()


class FileAnalyzer:
    """Analyzes every function of one parsed file."""

    def __init__(self, index: ProjectIndex, sf: SourceFile, facts: PythonFacts, jedi: JediResolver | None):
        self.index, self.sf, self.facts, self.jedi = index, sf, facts, jedi
        self._file_context: ContextSet | None = None
        self._members: dict[tuple[int, str, bool], tuple[RefKind, str, Binding | None]] = {}

    def functions(self) -> list[FunctionInfo]:
        out = []
        for scope in self.sf.scope.walk():
            if scope.kind == "function":
                out.append(self.analyze(scope))
        return out

    # -- one function -----------------------------------------------------------------------------------
    def analyze(self, fn: Scope) -> FunctionInfo:
        refs = _Refs()
        unresolved: list[str] = []
        inside = {id(s) for s in fn.walk()}
        for s in fn.walk():
            for b in s.imports:
                self._local_import(b, refs)
            for use in s.uses:
                self._classify_use(use, fn, inside, refs, unresolved)
        for use in fn.default_uses:  # evaluated in the enclosing scope, used by every call
            self._classify_use(use, fn, inside, refs, unresolved)
        references = refs.sorted()
        level = max((r.kind.level for r in references), key=lambda lv: lv.rank, default=Level.SELF_CONTAINED)
        return self._info(fn, references, level, sorted(set(unresolved)))

    def _classify_use(self, use: Use, fn: Scope, inside: set[int], refs: _Refs, unresolved: list[str]) -> None:
        scope, bindings = resolve(use, inside)
        chain = _chain(use.node)
        if scope is None:
            self._unbound(use, chain, fn, refs, unresolved)
            return
        b = next((x for x in bindings if x.kind == "import"), bindings[0])
        if b.kind == "self":
            self._member(use, chain, scope, refs)
        elif b.kind == "import":
            self._imported(use, chain, b, refs)
        elif id(scope) in inside:
            return
        elif scope.kind == "module":
            self._module_name(use, chain, b, fn, refs)
        elif scope.kind == "class":  # a default value naming a class attribute
            refs.add(use.name, RefKind.CLASS, ContextKind.APIS if chain.called else ContextKind.VARS,
                     f"{self.sf.module}.{scope.qualname}.{use.name}", use.node)
        else:  # a variable of an enclosing function: outside this function, inside the file
            refs.add(use.name, RefKind.FILE, ContextKind.APIS if chain.called else ContextKind.VARS,
                     f"{self.sf.module}.{scope.qualname}.{use.name}", use.node)

    # -- kinds of references ------------------------------------------------------------------------------
    def _module_kind(self, dotted_name: str, relative: bool) -> RefKind:
        top = dotted_name.split(".")[0]
        if relative:
            return RefKind.PROJECT
        prefix = self.index.project_prefix(dotted_name)
        if prefix is not None and not (prefix == top and self.facts.is_stdlib(top)):
            return RefKind.PROJECT
        if self.facts.is_stdlib(top):
            return RefKind.STDLIB
        return RefKind.PLIB

    def _local_import(self, b: Binding, refs: _Refs) -> None:
        """An import inside the body: a dependency on what it imports, used or not."""
        what = (b.imported if b.is_module else b.target) or b.name
        kind = self._module_kind(b.target or what, b.relative)
        if b.is_module or b.name == "*" or _looks_like_class(what):
            ctx = ContextKind.CLASSES
        else:
            ctx = ContextKind.VARS if b.name.isupper() else ContextKind.APIS
        refs.add(what, kind, ctx, what, b.node)

    def _imported(self, use: Use, chain: _Chain, b: Binding, refs: _Refs) -> None:
        full = ".".join([b.target or use.name, *chain.parts[1:]])
        kind = self._module_kind(full, b.relative)
        target = full
        ctx = ContextKind.APIS if chain.called else None
        if kind is RefKind.PROJECT:
            found = self.index.lookup(full)
            if found is not None:
                other, binding = found
                if binding is None:
                    ctx = ctx or ContextKind.CLASSES
                elif binding.target:
                    target = f"{other.module}.{binding.target}"
                    if ctx is None:
                        ctx = {"class": ContextKind.CLASSES, "def": ContextKind.APIS}.get(binding.kind)
        if b.is_module and len(chain.parts) > 1:
            refs.add(use.name, kind, ContextKind.CLASSES, b.target, use.node)
        if ctx is None:
            is_module = b.is_module and len(chain.parts) == 1
            ctx = ContextKind.CLASSES if is_module or _looks_like_class(full) else ContextKind.VARS
        refs.add(".".join(chain.parts), kind, ctx, target, use.node)

    def _module_name(self, use: Use, chain: _Chain, b: Binding, fn: Scope, refs: _Refs) -> None:
        if b.node == fn.node:  # recursion: the function is not a dependency of itself
            return
        target = f"{self.sf.module}.{b.target or use.name}"
        if b.kind == "class" and self._encloses(b.target or use.name, fn):
            name = ".".join(chain.parts[:2])
            ctx = ContextKind.APIS if chain.called and len(chain.parts) == 2 else (
                ContextKind.CLASSES if len(chain.parts) == 1 else ContextKind.VARS)
            refs.add(name, RefKind.CLASS, ctx, target + ("." + chain.parts[1] if len(chain.parts) > 1 else ""),
                     use.node)
            return
        ctx = {"class": ContextKind.CLASSES, "def": ContextKind.APIS}.get(b.kind)
        if ctx is None:
            ctx = ContextKind.APIS if chain.called else ContextKind.VARS
        refs.add(use.name, RefKind.FILE, ctx, target, use.node)

    def _encloses(self, class_qual: str, fn: Scope) -> bool:
        return fn.qualname.startswith(class_qual + ".")

    def _member(self, use: Use, chain: _Chain, method: Scope, refs: _Refs) -> None:
        if len(chain.parts) < 2 or method.parent is None or method.parent.kind != "class":
            return
        cls, member = method.parent, chain.parts[1]
        kind, target, binding = self._find_member(cls, member, chain.end, include_self=True)
        if binding is not None and binding.node == method.node and use.scope is method:
            return  # self.m() inside m: recursion
        name = f"{use.name}.{member}"
        if chain.called and len(chain.parts) == 2:
            ctx = ContextKind.APIS
        else:
            ctx = {"class": ContextKind.CLASSES, "def": ContextKind.APIS}.get(
                binding.kind if binding else "", ContextKind.VARS)
        refs.add(name, kind, ctx, target, use.node)

    def _find_member(self, cls: Scope, member: str, node: Node, include_self: bool
                     ) -> tuple[RefKind, str, Binding | None]:
        """Own or inherited member: class when defined in this file (or nowhere known), project when in
        another file of the project."""
        key = (id(cls), member, include_self)
        if key not in self._members:
            self._members[key] = self._find_member_uncached(cls, member, node, include_self)
        return self._members[key]

    def _find_member_uncached(self, cls: Scope, member: str, node: Node, include_self: bool
                              ) -> tuple[RefKind, str, Binding | None]:
        found = self._search(self.sf, cls, member, include_self, set())
        if found is not None:
            owner_file, owner, binding = found
            kind = RefKind.CLASS if owner_file is self.sf else RefKind.PROJECT
            return kind, f"{owner_file.module}.{owner.qualname}.{member}", binding
        hit = self._jedi_goto(node) if self.jedi and self._has_foreign_bases(cls) else None
        if hit is not None and hit.path is not None and self._in_project(hit.path) \
                and hit.path.resolve() != (self.index.root / self.sf.rel).resolve():
            return RefKind.PROJECT, f"{hit.module}.{member}", None
        return RefKind.CLASS, f"{self.sf.module}.{cls.qualname}.{member}", None

    def _search(self, sf: SourceFile, cls: Scope, member: str, include_self: bool, seen: set[int]
                ) -> tuple[SourceFile, Scope, Binding | None] | None:
        if id(cls) in seen or len(seen) > 30:
            return None
        seen.add(id(cls))
        if include_self:
            if member in cls.bindings:
                return sf, cls, cls.bindings[member][0]
            if member in cls.instance_attrs:
                return sf, cls, None
        for base in _bases(cls):
            resolved = self.index.resolve_class(sf, base)
            if resolved is not None:
                found = self._search(resolved[0], resolved[1], member, True, seen)
                if found is not None:
                    return found
        return None

    def _has_foreign_bases(self, cls: Scope) -> bool:
        """A base the index cannot follow (a star import, a re-export it cannot trace): only jedi can
        say whether it is the project's. Bases from the stdlib or third-party need no look-up."""
        for base in _bases(cls):
            root = base.split(".")[0]
            bindings = self.sf.scope.bindings.get(root)
            if not bindings:
                if root not in self.facts.builtins:
                    return True
                continue
            b = bindings[0]
            if b.kind == "import" and self._module_kind(b.target or root, b.relative) is RefKind.PROJECT \
                    and self.index.resolve_class(self.sf, base) is None:
                return True
        return False

    def _super(self, use: Use, chain: _Chain, fn: Scope, refs: _Refs) -> bool:
        """`super().m(...)`: the member m of a base class."""
        call = use.node.parent
        if call is None or call.type != "call" or call.parent is None or call.parent.type != "attribute":
            return False
        attr = call.parent.child_by_field_name("attribute")
        method = use.scope if use.scope.kind == "function" else use.scope.enclosing_function
        while method is not None and (method.parent is None or method.parent.kind != "class"):
            method = method.enclosing_function
        if attr is None or method is None or method.parent is None:
            return False
        member = text(attr)
        found = self._search(self.sf, method.parent, member, False, set())
        if found is None:
            return False
        owner_file, owner, binding = found
        kind = RefKind.CLASS if owner_file is self.sf else RefKind.PROJECT
        called = call.parent.parent is not None and call.parent.parent.type == "call"
        refs.add(f"super().{member}", kind, ContextKind.APIS if called else ContextKind.VARS,
                 f"{owner_file.module}.{owner.qualname}.{member}", use.node)
        return True

    def _unbound(self, use: Use, chain: _Chain, fn: Scope, refs: _Refs, unresolved: list[str]) -> None:
        name = use.name
        if name in self.facts.builtins or name in _MODULE_DUNDERS:
            if name == "super":
                self._super(use, chain, fn, refs)
            ctx = ContextKind.APIS if chain.called else (
                ContextKind.CLASSES if name in self.facts.builtin_types else ContextKind.VARS)
            refs.add(name, RefKind.BUILTIN, ctx, f"builtins.{name}", use.node)
            return
        for module, relative, _line in self.sf.scope.star_imports:
            if self._module_kind(module, relative) is RefKind.PROJECT:
                found = self.index.lookup(f"{module}.{name}")
                if found is not None and found[1] is not None:
                    ctx = {"class": ContextKind.CLASSES, "def": ContextKind.APIS}.get(found[1].kind,
                                                                                   ContextKind.VARS)
                    refs.add(name, RefKind.PROJECT, ctx, f"{found[0].module}.{found[1].target or name}",
                             use.node)
                    return
        hit = self._jedi_goto(use.node) if self.jedi else None
        if hit is not None:
            kind = self._hit_kind(hit)
            if kind is not None:
                ctx = ContextKind.APIS if chain.called or hit.type == "function" else (
                    ContextKind.CLASSES if hit.type in ("class", "module") else ContextKind.VARS)
                refs.add(name, kind, ctx, f"{hit.module}.{name}" if hit.module else name, use.node, via="jedi")
                return
        stars = self.sf.scope.star_imports
        if stars:  # without jedi's help, the first star import is the likeliest source
            module, relative, _ = stars[0]
            refs.add(name, self._module_kind(module, relative), ContextKind.APIS if chain.called
                     else ContextKind.VARS, f"{module}.{name}", use.node)
            return
        unresolved.append(name)

    # -- jedi ---------------------------------------------------------------------------------------------
    def _jedi_goto(self, node: Node):
        assert self.jedi is not None
        target = node.child_by_field_name("attribute") if node.type == "attribute" else node
        if target is None:
            return None
        row, col = target.start_point
        return self.jedi.goto(self.sf.rel, self.sf.text, row + 1, self.sf.char_column(row, col))

    def _in_project(self, path) -> bool:
        try:
            path.resolve().relative_to(self.index.root.resolve())
        except ValueError:
            return False
        return True

    def _hit_kind(self, hit) -> RefKind | None:
        if hit.builtin:  # jedi may run on another interpreter: its builtins are not the project's
            return None
        if hit.path is not None and self._in_project(hit.path):
            same = hit.path.resolve() == (self.index.root / self.sf.rel).resolve()
            return RefKind.FILE if same else RefKind.PROJECT
        if hit.module:
            return self._module_kind(hit.module, False)
        return None

    # -- the record -----------------------------------------------------------------------------------------
    def _info(self, fn: Scope, refs: list[Reference], level: Level, unresolved: list[str]) -> FunctionInfo:
        node = fn.node
        outer = node.parent if node.parent is not None and node.parent.type == "decorated_definition" else node
        body = node.child_by_field_name("body")
        colon = body.prev_sibling if body is not None else None
        data = self.sf.data
        header_end = colon.end_byte if colon is not None else node.end_byte
        doc_node, docstring = _docstring(body)
        cls = fn.parent if fn.parent is not None and fn.parent.kind == "class" else None
        name_node = node.child_by_field_name("name")
        return FunctionInfo(
            file=self.sf.rel, qualname=fn.qualname, name=text(name_node) if name_node is not None else "",
            lineno=node.start_point[0] + 1, start_lineno=outer.start_point[0] + 1,
            end_lineno=node.end_point[0] + 1, start_byte=outer.start_byte, end_byte=node.end_byte,
            def_start_byte=node.start_byte,
            body_start_byte=body.start_byte if body is not None else header_end,
            body_end_byte=body.end_byte if body is not None else node.end_byte,
            body_lineno=(body.start_point[0] + 1) if body is not None else node.start_point[0] + 1,
            body_end_lineno=(body.end_point[0] + 1) if body is not None else node.end_point[0] + 1,
            is_async=any(c.type == "async" for c in node.children),
            class_name=cls.qualname if cls is not None else None,
            signature=data[node.start_byte:header_end].decode("utf-8", "replace"),
            docstring=docstring, source=data[outer.start_byte:node.end_byte].decode("utf-8", "replace"),
            body_lines=_body_lines(body, doc_node),
            decorators=[text(d) for d in fn.decorators],
            level=level, oracle_context=_context(refs), all_context=self._all_context(cls),
            references=refs, unresolved=unresolved)

    def _all_context(self, cls: Scope | None) -> ContextSet:
        if self._file_context is None:
            self._file_context = self._file_all_context()
        if cls is None:
            return self._file_context
        extra = ContextSet()
        for name, bindings in cls.bindings.items():
            kind = bindings[0].kind
            getattr(extra, "apis" if kind == "def" else "classes" if kind == "class" else "vars").append(
                f"self.{name}")
        extra.vars.extend(f"self.{a}" for a in cls.instance_attrs if a not in cls.bindings)
        base = self._file_context
        return ContextSet(classes=sorted({*base.classes, *extra.classes}), apis=sorted({*base.apis, *extra.apis}),
                          vars=sorted({*base.vars, *extra.vars}))

    def _file_all_context(self) -> ContextSet:
        out: dict[str, set[str]] = {"classes": set(), "apis": set(), "vars": set()}
        for name, bindings in self.sf.scope.bindings.items():
            b = bindings[0]
            if b.kind == "import":
                out[self._import_context(b).value].add(name)
            else:
                out[{"def": "apis", "class": "classes"}.get(b.kind, "vars")].add(name)
        return ContextSet(**{k: sorted(v) for k, v in out.items()})

    def _import_context(self, b: Binding) -> ContextKind:
        if b.is_module:
            return ContextKind.CLASSES
        found = self.index.lookup(b.target or "") if (b.relative or self.index.project_prefix(b.target or "")) \
            else None
        if found is not None:
            if found[1] is None:
                return ContextKind.CLASSES
            return {"class": ContextKind.CLASSES, "def": ContextKind.APIS}.get(found[1].kind, ContextKind.VARS)
        if _looks_like_class(b.name):
            return ContextKind.CLASSES
        return ContextKind.VARS if b.name.isupper() else ContextKind.APIS


class _Refs:
    """References deduplicated by (name, kind), keeping the first use."""

    def __init__(self):
        self._by_key: dict[tuple[str, RefKind], Reference] = {}

    def add(self, name: str, kind: RefKind, ctx: ContextKind, target: str | None, node: Node,
            via: str = "syntax") -> None:
        key = (name, kind)
        line = node.start_point[0] + 1
        if key not in self._by_key or self._by_key[key].lineno > line:
            self._by_key[key] = Reference(name=name, kind=kind, context_kind=ctx, target=target, lineno=line,
                                          via=via)

    def sorted(self) -> list[Reference]:
        return sorted(self._by_key.values(), key=lambda r: (r.lineno, r.name))


def _bases(cls: Scope) -> list[str]:
    supers = cls.node.child_by_field_name("superclasses")
    if supers is None:
        return []
    return [d for c in supers.named_children if c.type in ("identifier", "attribute") and (d := dotted(c))]


def _context(refs: list[Reference]) -> ContextSet:
    out: dict[str, list[str]] = {"classes": [], "apis": [], "vars": []}
    for r in refs:
        bucket = out[r.context_kind.value]
        if r.name not in bucket:
            bucket.append(r.name)
    return ContextSet(**out)


def _docstring(body: Node | None) -> tuple[Node | None, str]:
    if body is None or not body.named_children:
        return None, ""
    first = body.named_children[0]
    if first.type != "expression_statement" or len(first.named_children) != 1 \
            or first.named_children[0].type not in ("string", "concatenated_string"):
        return None, ""
    try:
        value = ast.literal_eval(text(first.named_children[0]))
    except (ValueError, SyntaxError):
        return first, ""
    return first, inspect.cleandoc(value) if isinstance(value, str) else ""


def _body_lines(body: Node | None, doc: Node | None) -> int:
    if body is None:
        return 0
    skip = set(range(doc.start_point[0], doc.end_point[0] + 1)) if doc is not None else set()
    lines = text(body).split("\n")
    first_row = body.start_point[0]
    return sum(1 for i, line in enumerate(lines)
               if first_row + i not in skip and line.strip() and not line.strip().startswith("#"))
