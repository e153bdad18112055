"""What the differential step explores with (issue 23): new inputs and changed bodies, both deterministic.

- `candidates`: the recorded inputs and type-aware mutants of them, as EvalPlus mutates inputs: one argument
  (never a method's receiver) or one element inside a list, tuple or dict argument is nudged: ints +-1, 0,
  -x, edges (2**31, -1); floats x*1.5, 0.0, -x; str/bytes emptied, doubled, last char dropped, a char added,
  case swapped; containers emptied, an element duplicated, dropped, two swapped, reversed; bools negated;
  anything -> None. Told apart by the digest of their call form.
- `build`: AST mutants of the target's body, one node changed each (binary operator swapped, comparison
  flipped, and/or swapped, an `if` test negated, an int constant +-1, `return X` made `return None`),
  compiled alone and executed in a copy of the function's globals.
coderun_differential calls them (explore mode). Standalone: stdlib only, Python 3.7.
"""

import ast
import copy
import os
import types

from coderun_values import call_form, digest, dump_call, load_call

# -- inputs -------------------------------------------------------------------------------------

def candidates(inputs, method, rng, per_input, max_candidates):
    """(input text, origin) pairs: the given inputs, then up to `per_input` mutated ones per input, told
    apart by the digest of their call form, `max_candidates` in all."""
    out, seen = [], set()
    for text in inputs:
        key = _key(text)
        if key not in seen or key is None:
            seen.add(key)
            out.append((text, "recorded"))
    for text in inputs:
        made = tries = 0
        while made < per_input and tries < per_input * 4 and len(out) < max_candidates:
            tries += 1
            mutated = _mutated_text(text, method, rng)
            key = _key(mutated) if mutated is not None else None
            if key is None or key in seen:
                continue
            seen.add(key)
            out.append((mutated, "mutated"))
            made += 1
    return out[:max_candidates]


def _key(text):
    try:
        return digest(call_form(*load_call(text)))
    except Exception:
        return None


def _mutated_text(text, method, rng):
    try:
        args, kwargs = load_call(text)
    except Exception:
        return None
    slots = [("arg", i) for i in range(1 if method else 0, len(args))] + [("kw", k) for k in sorted(kwargs)]
    if not slots:
        return None
    where, at = rng.choice(slots)
    holder = args if where == "arg" else kwargs
    holder[at] = _nudge_somewhere(holder[at], rng)
    try:
        return dump_call(args, kwargs)
    except Exception:
        return None


def _nudge_somewhere(value, rng):
    """The value nudged, or one element inside it (a list, tuple or dict) nudged, half the time."""
    if type(value) in (list, tuple) and value and rng.random() < 0.5:
        items = list(value)
        i = rng.randrange(len(items))
        items[i] = rng.choice(_nudges(items[i], rng))
        return type(value)(items)
    if type(value) is dict and value and rng.random() < 0.5:
        out = dict(value)
        k = rng.choice(sorted(out, key=repr))
        out[k] = rng.choice(_nudges(out[k], rng))
        return out
    return rng.choice(_nudges(value, rng))


def _nudges(value, rng):
    """What one value may become, as EvalPlus mutates inputs by type; None for anything."""
    if isinstance(value, bool):
        return [not value, None]
    if isinstance(value, int):
        return [value + 1, value - 1, 0, -value, 2 ** 31, -1, None]
    if isinstance(value, float):
        return [value * 1.5, 0.0, -value, None]
    if isinstance(value, (str, bytes)):
        extra = "a" if isinstance(value, str) else b"a"
        return [value[:0], value + value, value[:-1], value + extra, value.swapcase(), None]
    if type(value) in (list, tuple):
        return [type(value)(items) for items in _shuffles(list(value), rng)] + [None]
    if type(value) is dict:
        return [dict(items) for items in _shuffles(list(value.items()), rng, values_only=True)] + [None]
    if type(value) in (set, frozenset):
        items = sorted(value, key=repr)
        out = [type(value)()]
        if items:
            i = rng.randrange(len(items))
            out.append(type(value)(items[:i] + items[i + 1:]))
        return out + [None]
    return [None]


def _shuffles(items, rng, values_only=False):
    """A sequence emptied, an element duplicated, dropped, two swapped, reversed (a dict's items: no
    duplicate key, two values swapped)."""
    out = [[]]
    if not items:
        return out
    i, j = rng.randrange(len(items)), rng.randrange(len(items))
    out.append(items[:i] + items[i + 1:])
    if not values_only:
        out.append(items[:i] + [copy.copy(items[i])] + items[i:])
    swapped = list(items)
    if values_only:
        swapped[i], swapped[j] = (items[i][0], items[j][1]), (items[j][0], items[i][1])
    else:
        swapped[i], swapped[j] = items[j], items[i]
    out += [swapped, items[::-1]]
    return out


# -- bodies -----------------------------------------------------------------------

_BINOPS = {"Add": "Sub", "Sub": "Add", "Mult": "Div", "Div": "Mult", "FloorDiv": "Mult", "Mod": "FloorDiv",
           "Pow": "Mult", "BitAnd": "BitOr", "BitOr": "BitAnd", "BitXor": "BitOr", "LShift": "RShift",
           "RShift": "LShift"}
_CMPOPS = {"Lt": "LtE", "LtE": "Lt", "Gt": "GtE", "GtE": "Gt", "Eq": "NotEq", "NotEq": "Eq", "In": "NotIn",
           "NotIn": "In", "Is": "IsNot", "IsNot": "Is"}
_BOOLOPS = {"And": "Or", "Or": "And"}


def build(fn, target, root, rng, count):
    """Up to `count` mutants of fn (each one node changed), chosen deterministically by `rng`, and
    {"mutated": [[line, what], ...], "skipped": why} (why: none could be made)."""
    about = {"mutated": []}
    if fn.__code__.co_freevars:
        about["skipped"] = f"the function has free variables ({', '.join(fn.__code__.co_freevars)})"
        return [], about
    path = os.path.realpath(os.path.join(root, target.get("file") or ""))
    try:
        with open(path, "rb") as f:
            tree = ast.parse(f.read(), path)
    except (OSError, SyntaxError, ValueError) as e:
        about["skipped"] = f"the file could not be parsed ({type(e).__name__})"
        return [], about
    found = _find_def(tree, target)
    if found is None:
        about["skipped"] = f"no def of {target.get('name')} at line {target.get('lineno')}"
        return [], about
    if any(isinstance(n, ast.Name) and n.id in ("super", "__class__") for n in ast.walk(found)):
        about["skipped"] = "the function uses super() or __class__"
        return [], about
    sites = _sites(found)
    chosen = sorted(rng.sample(range(len(sites)), min(count, len(sites))))
    owner = _owner_class(str(target.get("qualname") or ""))
    mutants = []
    for n in chosen:
        index, field, what = sites[n]
        made = _compiled(found, index, field, what, owner, fn, path)
        if made is not None:
            mutants.append(made)
            about["mutated"].append([_line_of(found, index), _describe(field, what)])
    return mutants, about


def _find_def(tree, target):
    name = target.get("name")
    lines = {target.get("lineno"), target.get("first")}  # the def line (3.8+) or the first decorator's (3.7)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name and node.lineno in lines:
            return node
    return None


def _owner_class(qualname):
    """The class a method is defined in (its private names are mangled with it), or None."""
    parts = qualname.split(".")
    return parts[-2] if len(parts) > 1 else None


def _body_nodes(func):
    """The nodes of the function's body, in a fixed order (the same in a deep copy)."""
    return [n for stmt in func.body for n in ast.walk(stmt)]


def _sites(func):
    """(node index, field, replacement) of every one-node mutation of the body."""
    sites = []
    for i, node in enumerate(_body_nodes(func)):
        kind = type(node).__name__
        if kind in ("BinOp", "AugAssign") and type(node.op).__name__ in _BINOPS:
            sites.append((i, "op", _BINOPS[type(node.op).__name__]))
        elif kind == "Compare":
            sites += [(i, ("ops", k), _CMPOPS[type(op).__name__]) for k, op in enumerate(node.ops)
                      if type(op).__name__ in _CMPOPS]
        elif kind == "BoolOp":
            sites.append((i, "op", _BOOLOPS[type(node.op).__name__]))
        elif kind == "If":
            sites.append((i, "test", "not"))
        elif kind == "Return" and node.value is not None and not _is_none(node.value):
            sites.append((i, "value", "None"))
        elif _int_constant(node) is not None:
            sites += [(i, "int", 1), (i, "int", -1)]
    return sites


def _is_none(node):
    return type(node).__name__ in ("Constant", "NameConstant") and getattr(node, "value", 0) is None


def _int_constant(node):
    kind = type(node).__name__
    value = getattr(node, "value", None) if kind == "Constant" else getattr(node, "n", None) if kind == "Num" else None
    return value if type(value) is int else None


def _compiled(func, index, field, what, owner, fn, path):
    """The function with one node changed, compiled alone (inside a class of the owner's name, for the
    mangling of private names) and executed in a copy of fn's globals; None when it does not build."""
    mutant = copy.deepcopy(func)
    mutant.decorator_list = []
    node = _body_nodes(mutant)[index]
    if field == "op":
        node.op = getattr(ast, what)()
    elif field == "test":
        node.test = ast.UnaryOp(op=ast.Not(), operand=node.test)
    elif field == "value":
        node.value = None
    elif field == "int":
        if type(node).__name__ == "Constant":
            node.value += what
        else:
            node.n += what
    else:
        node.ops[field[1]] = getattr(ast, what)()
    module = ast.parse("")
    if owner:
        holder = ast.parse(f"class {owner}:\n    pass\n").body[0]
        holder.body = [mutant]
        module.body = [holder]
    else:
        module.body = [mutant]
    ast.fix_missing_locations(module)
    namespace = dict(fn.__globals__)
    try:
        exec(compile(module, path, "exec"), namespace)
        made = vars(namespace[owner])[func.name] if owner else namespace[func.name]
    except Exception:  # a default or annotation that needs the class body's names
        return None
    return made if isinstance(made, types.FunctionType) else None


def _line_of(func, index):
    return getattr(_body_nodes(func)[index], "lineno", func.lineno)


def _describe(field, what):
    if field == "test":
        return "if test negated"
    if field == "value":
        return "return None"
    if field == "int":
        return f"int constant {what:+d}"
    return f"operator -> {what}"
