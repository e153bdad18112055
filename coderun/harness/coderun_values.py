"""Values as coderun compares them across processes: the canonical form, and calls captured for replay.

The differential step (coderun_differential) runs a sample on inputs recorded from the original
(coderun_recorder) and the host compares what both did. The two never share a process, so what a call did is
written down here as JSON: the canonical form of a value. Equal values have equal forms: containers by
their items (sets and dicts whatever their order), floats by their repr (the host compares them with a
tolerance), objects with their own `__eq__` and `__repr__` by that repr (addresses removed), other objects
by their type and attribute state. Forms are bounded (depth, nodes, string length) so a huge value costs
a bounded amount: past a bound, a digest stands for the rest.

Forms are JSON: null, true/false, numbers and strings stand for themselves (ints past 2**53 and floats
are tagged so JSON keeps them exactly); everything else is a list whose first item is a tag:
    ["float", repr]  ["list"|"tuple"|"set", [items]]  ["dict", [[k, v], ...]]  ["bytes", hex]
    ["int", str]  ["str", length, digest, head]  ["exc", type, [args]]  ["ref", qualified name]
    ["gen", [items], more?]  ["repr", type, text]  ["obj", type, state]  ["cycle"]  ["deep"]  ["big", digest]

A call is captured as pickled (args, kwargs), from a frame's arguments when recording, so that it can be
called again later on a fresh copy (`load_call`). Standalone: stdlib only, Python 3.7.
"""

import base64
import contextlib
import hashlib
import inspect
import json
import os
import pickle
import re
import types

MAX_DEPTH = 8
MAX_NODES = 2000
MAX_STR = 2000
MAX_GEN_ITEMS = 1000
PICKLE_PROTOCOL = 2            # every Python coderun runs projects with reads it
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_SCALARS = (bool, int, str, type(None))
_ROOTS = []                    # (path, placeholder): paths that differ between copies of a project


def set_roots(paths):
    """Paths replaced by placeholders in every string form (the project copy, the temp folder): where a
    copy lives is not part of what a function did."""
    del _ROOTS[:]
    for i, path in enumerate(p for p in paths if p and len(os.path.realpath(p)) > 4):  # never "/" or "/tmp"
        real = os.path.realpath(path)
        for p in {path, real}:
            _ROOTS.append((p, f"<root{i}>"))
    _ROOTS.sort(key=lambda r: -len(r[0]))


def canonical(value):
    """The canonical form of `value` (see the module docstring)."""
    return _Walk().form(value, 0)


def digest(form):
    """A short stable digest of a form (the key of an input, the stand-in for a big value)."""
    return hashlib.sha256(json.dumps(form, sort_keys=True).encode("utf-8")).hexdigest()[:16]


class _Walk:
    def __init__(self):
        self.nodes = 0
        self.path = set()

    def form(self, value, depth):
        self.nodes += 1
        if isinstance(value, _SCALARS):
            return self._scalar(value)
        if isinstance(value, float):
            return ["float", repr(value)]
        if depth >= MAX_DEPTH or self.nodes > MAX_NODES:
            return ["deep"]
        if id(value) in self.path:
            return ["cycle"]
        self.path.add(id(value))
        try:
            return self._compound(value, depth + 1)
        finally:
            self.path.discard(id(value))

    def _scalar(self, value):
        if isinstance(value, bool) or value is None:
            return value
        if isinstance(value, int):
            return value if abs(value) < 2 ** 53 else ["int", str(value)]
        text = _unrooted(value)
        if len(text) <= MAX_STR:
            return text
        return ["str", len(text), hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:16],
                text[:200]]

    def _compound(self, value, depth):
        t = type(value)
        if isinstance(value, (list, tuple)):  # subclasses too (a namedtuple equals its plain tuple)
            return ["tuple" if isinstance(value, tuple) else "list", [self.form(v, depth) for v in value]]
        if isinstance(value, (set, frozenset)):
            return ["set", sorted((self.form(v, depth) for v in value), key=_order)]
        if isinstance(value, dict):
            items = [[self.form(k, depth), self.form(v, depth)] for k, v in list(value.items())]
            return ["dict", _sorted_items(items)]
        if isinstance(value, (bytes, bytearray)):
            raw = bytes(value)
            if len(raw) > MAX_STR:
                return ["big", hashlib.sha256(raw).hexdigest()[:16]]
            return ["bytes", raw.hex() if hasattr(raw, "hex") else base64.b16encode(raw).decode()]
        if isinstance(value, BaseException):
            return ["exc", _qualified(t), [self.form(a, depth) for a in value.args]]
        if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, type, types.ModuleType,
                              types.MethodType)):
            return ["ref", _qualified(value)]
        if isinstance(value, types.GeneratorType):
            return ["ref", "generator " + _qualified(t)]
        if _has_own(t, "__eq__") and _has_own(t, "__repr__"):
            return ["repr", _qualified(t), _unrooted(_ADDRESS.sub("", _safe_repr(value)))[:MAX_STR]]
        return ["obj", _qualified(t), self._state(value, depth)]

    def _state(self, value, depth):
        state = {}
        d = getattr(value, "__dict__", None)
        if isinstance(d, dict):
            state.update(d)
        for cls in type(value).__mro__:
            for name in getattr(cls, "__slots__", ()) or ():
                if isinstance(name, str) and name not in state and hasattr(value, name):
                    with contextlib.suppress(Exception):
                        state[name] = getattr(value, name)
        if not state:
            return None
        return [[k, self.form(state[k], depth)] for k in sorted(state, key=str)]


def _has_own(t, name):
    """Whether a class defines `name` itself rather than inheriting object's (or a builtin base's)."""
    for cls in t.__mro__:
        if cls is object or cls.__module__ == "builtins":
            return False
        if name in vars(cls):
            return True
    return False


def _safe_repr(value):
    try:
        return repr(value)
    except Exception as e:  # a broken __repr__ is part of what the object is
        return f"<repr raised {type(e).__name__}>"


def _qualified(obj):
    t = obj if isinstance(obj, (type, types.FunctionType, types.BuiltinFunctionType, types.ModuleType)) else type(obj)
    if isinstance(obj, types.ModuleType):
        return obj.__name__
    if isinstance(obj, types.MethodType):
        return _qualified(obj.__func__)
    module = getattr(t, "__module__", None) or ""
    name = getattr(t, "__qualname__", None) or getattr(t, "__name__", None) or repr(t)
    return f"{module}.{name}" if module and module != "builtins" else name


def _order(form):
    return json.dumps(form, sort_keys=True)


def _sorted_items(items):
    """`sorted(items, key=_order)` for a dict's [key, value] forms, by the keys' texts alone when no two are
    alike: an item's text is "[" + key's + ", " + value's + "]", and the only key text that can be a proper
    prefix of another is an int's (followed by a digit, which sorts after the ","). Dumping every value at
    every level of a nested dict was most of the recorder's time."""
    keys = [_order(k) for k, _ in items]
    if len(set(keys)) < len(keys):
        return sorted(items, key=_order)
    return [item for _, item in sorted(zip(keys, items), key=_first)]  # noqa: B905 (3.7)


def _first(pair):
    return pair[0]


def _unrooted(text):
    for path, placeholder in _ROOTS:
        if path in text:
            text = text.replace(path, placeholder)
    return text


# -- calls --------------------------------------------------------------------------------------

def frame_call(frame):
    """(args, kwargs) a function was called with, from its frame at the 'call' event: positional
    parameters by position, *args after them, keyword-only and **kwargs by name."""
    code = frame.f_code
    names = code.co_varnames
    n_pos = code.co_argcount
    n_kw = code.co_kwonlyargcount
    local = frame.f_locals
    args = [local[n] for n in names[:n_pos]]
    i = n_pos + n_kw
    kwargs = {n: local[n] for n in names[n_pos:i]}
    if code.co_flags & inspect.CO_VARARGS:
        args.extend(local[names[i]])
        i += 1
    if code.co_flags & inspect.CO_VARKEYWORDS:
        kwargs.update(local[names[i]])
    return args, kwargs


def dump_call(args, kwargs):
    """A call's arguments as text (base64 of a pickle); raises what pickle raises."""
    return base64.b64encode(pickle.dumps((list(args), dict(kwargs)), protocol=PICKLE_PROTOCOL)).decode("ascii")


def load_call(text):
    """A fresh copy of the arguments `dump_call` wrote."""
    args, kwargs = pickle.loads(base64.b64decode(text.encode("ascii")))
    return list(args), dict(kwargs)


def call_form(args, kwargs):
    """The canonical form of a call's arguments (what a call is told apart by)."""
    return [canonical(list(args)), canonical(dict(kwargs))]
