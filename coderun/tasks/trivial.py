"""Trivial bodies: statements that do no work, which a task's tests should tell from the original.

A body that does no work yet passes a task's tests shows what the tests do not check. Verification
(tasks/verify) runs the tests with the function's body replaced by each of these; a sample like one of them
is what pass+ (issue 23) must catch. Each has a stable name, used in stored tasks and reports:

- `raise`: `raise NotImplementedError`, the function missing (its passing makes a task `weak`);
- `none`: `return None` (the tests do not look at the result);
- `first_arg`: `return <first parameter>`, the receiver (self/cls) aside; a `*args` parameter returns the
  tuple; absent when there is no such parameter;
- `empty`: `return <empty value of the original's return type>` ([], (), {}, set(), '', b'', 0, 0.0, False,
  iter(()) for a generator): the type is the most common among the recorded return values that have an
  empty value, else read from the return annotation; absent when neither says;
- `constant`: `return <repr>` of the most common recorded return value that is a literal (int, finite
  float, str, bytes, bool; repr under 80 characters), None aside; absent otherwise.

A body whose statement is already another's (a function that always returned '') is left out: the same
run would decide it. Everything here is pure: the recorded calls come in as obs (see rigor-common's
formats: {"outcome": "return", "value": <canonical form>, ...}), the signature as text.
"""

from __future__ import annotations

import ast
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping

from coderun.records import Task

RAISE, NONE, FIRST_ARG, EMPTY, CONSTANT = "raise", "none", "first_arg", "empty", "constant"
NAMES = (RAISE, NONE, FIRST_ARG, EMPTY, CONSTANT)
RAISE_STATEMENT = "raise NotImplementedError"
RECEIVERS = ("self", "cls")
MAX_CONSTANT_REPR = 80

# The empty value of a type, by the type a canonical form has (coderun_values) or an annotation names.
EMPTY_VALUES = {"list": "[]", "tuple": "()", "dict": "{}", "set": "set()", "str": "''", "bytes": "b''",
                "int": "0", "float": "0.0", "bool": "False", "gen": "iter(())"}
_ANNOTATED = {
    "list": ("list", "List", "Sequence", "MutableSequence", "Iterable", "Collection"),
    "tuple": ("tuple", "Tuple"),
    "dict": ("dict", "Dict", "Mapping", "MutableMapping", "OrderedDict", "DefaultDict", "defaultdict"),
    "set": ("set", "Set", "frozenset", "FrozenSet", "AbstractSet", "MutableSet"),
    "str": ("str", "Text"), "bytes": ("bytes",), "int": ("int",), "float": ("float",), "bool": ("bool",),
    "gen": ("Iterator", "Generator"),
}
_BY_ANNOTATION = {name: kind for kind, names in _ANNOTATED.items() for name in names}
_FORM_TAGS = ("float", "int", "str", "bytes", "list", "tuple", "set", "dict", "gen")
_ROOT_PLACEHOLDER = re.compile(r"<root\d+>")   # a path coderun_values replaced: not the value returned


def trivial_bodies(params: list[str], is_method: bool, returns_annotation: str | None,
                   recorded: Iterable[Mapping] = ()) -> list[tuple[str, str]]:
    """(name, statement) of every trivial body that can be built, in the order of NAMES.

    `params`: the parameter names in order (positional, *args, keyword-only, **kwargs), without stars;
    `is_method`: the first is the receiver; `recorded`: obs of the original's recorded calls."""
    returns = [o.get("value") for o in recorded if o.get("outcome") == "return"]
    first = first_parameter(params, is_method)
    empty = empty_value(returns, returns_annotation)
    constant = recorded_constant(returns)
    candidates = [(RAISE, RAISE_STATEMENT), (NONE, "return None"),
                  (FIRST_ARG, first and f"return {first}"), (EMPTY, empty and f"return {empty}"),
                  (CONSTANT, constant and f"return {constant}")]
    out: list[tuple[str, str]] = []
    for name, statement in candidates:
        if statement and statement not in {s for _, s in out}:
            out.append((name, statement))
    return out


def first_parameter(params: list[str], is_method: bool) -> str | None:
    """The first parameter that is not the receiver (a method's first, or one named self/cls)."""
    rest = params[1:] if is_method else params
    return next((p for p in rest if p not in RECEIVERS), None)


def empty_value(returns: list, returns_annotation: str | None) -> str | None:
    """The empty value of the recorded returns' most common type, else of the annotation's."""
    kinds = Counter(k for k in map(form_type, returns) if k in EMPTY_VALUES)
    if kinds:
        return EMPTY_VALUES[kinds.most_common(1)[0][0]]
    kind = annotation_type(returns_annotation) if returns_annotation else None
    return EMPTY_VALUES.get(kind) if kind else None


def form_type(form) -> str | None:
    """The type a canonical form (coderun_values.canonical) stands for: "int", "list", ...; None for None,
    objects, references, and what the form does not tell."""
    if isinstance(form, bool):
        return "bool"
    if isinstance(form, int):
        return "int"
    if isinstance(form, str):
        return "str"
    if isinstance(form, list) and form and form[0] in _FORM_TAGS:
        return form[0]
    return None


def annotation_type(annotation: str) -> str | None:
    """The type a return annotation names, as a key of EMPTY_VALUES ("List[int]" -> "list"); Optional[X]
    and X | None are X; None for anything else (other unions, Any, classes)."""
    try:
        node = ast.parse(annotation.strip(), mode="eval").body
    except SyntaxError:
        return None
    return _annotated(node)


def _annotated(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a forward reference
        return annotation_type(node.value)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _union([node.left, node.right])
    if isinstance(node, ast.Subscript):
        base = _last_name(node.value)
        if base == "Optional":
            return _annotated(node.slice)
        if base == "Union":
            return _union(list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice])
        return _BY_ANNOTATION.get(base or "")
    return _BY_ANNOTATION.get(_last_name(node) or "")


def _union(members: list[ast.expr]) -> str | None:
    rest = [m for m in members if not (isinstance(m, ast.Constant) and m.value is None)
            and _last_name(m) != "None"]
    return _annotated(rest[0]) if len(rest) == 1 else None


def _last_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def recorded_constant(returns: list) -> str | None:
    """The repr of the most common literal among the recorded return values (ties: the first recorded)."""
    literals = Counter(r for r in map(literal_repr, returns) if r is not None)
    return literals.most_common(1)[0][0] if literals else None


def literal_repr(form) -> str | None:
    """Python source for a canonical form that is a short literal (not None); None otherwise."""
    text = _literal(form)
    return text if text is not None and len(text) < MAX_CONSTANT_REPR else None


def _literal(form) -> str | None:
    if isinstance(form, (bool, int)):
        return repr(form)
    if isinstance(form, str):
        return None if _ROOT_PLACEHOLDER.search(form) else repr(form)
    if not (isinstance(form, list) and len(form) == 2 and isinstance(form[1], str)):
        return None
    tag, text = form
    if tag == "int" and re.fullmatch(r"-?\d+", text):
        return text
    if tag == "float":
        try:
            value = float(text)
        except ValueError:
            return None
        return repr(value) if math.isfinite(value) else None
    if tag == "bytes":
        try:
            return repr(bytes.fromhex(text))
        except ValueError:
            return None
    return None


def signature_parts(signature: str) -> tuple[list[str], str | None]:
    """(parameter names in order, return annotation text) of a `def` header as the analyzer keeps it
    (`def f(a, *b, c, **d) -> X:`); ([], None) when this Python cannot parse it."""
    text = signature.strip()
    try:
        tree = ast.parse(text + "\n    pass\n" if text.endswith(":") else text)
    except SyntaxError:
        return [], None
    fn = tree.body[0] if tree.body else None
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return [], None
    a = fn.args
    params = [p.arg for p in [*a.posonlyargs, *a.args]]
    params += [a.vararg.arg] if a.vararg else []
    params += [p.arg for p in a.kwonlyargs] + ([a.kwarg.arg] if a.kwarg else [])
    returns = ast.get_source_segment(text, fn.returns) if fn.returns is not None else None
    return params, returns


def is_method(class_name: str | None, decorators: Iterable[str]) -> bool:
    """Whether a function's first parameter is its receiver: defined in a class, not a staticmethod."""
    static = any(d.lstrip("@").strip() in ("staticmethod", "builtins.staticmethod") for d in decorators)
    return class_name is not None and not static


def bodies_for(signature: str, class_name: str | None, decorators: Iterable[str],
               recorded: Iterable[Mapping] = ()) -> list[tuple[str, str]]:
    """trivial_bodies of a function as the analyzer describes it."""
    params, returns = signature_parts(signature)
    return trivial_bodies(params, is_method(class_name, decorators), returns, recorded)


def task_bodies(task: Task, recorded: Iterable[Mapping] = ()) -> dict[str, str]:
    """A stored task's trivial bodies by name (bodies_for, its decorators read from its source)."""
    decorators = [line.strip() for line in task.source.splitlines() if line.strip().startswith("@")]
    return dict(bodies_for(task.signature, task.class_name, decorators, recorded))
