"""The tests that run are the tests that were verified: the project's test code, checked from inside the test
process (coderun_reporter uses it, beside the harness's own integrity in coderun_integrity).

When collection ends, `take` snapshots the test code the selected items run: the function pytest calls for
each item and the functions of the fixtures it requests, with the functions they wrap (`__wrapped__`, closure
cells), the test classes' dicts and the globals of the test modules (the items' modules, the conftest files
and the other modules of the items' folders, the project's root folder and the sample's file aside). A
function is kept with its code, defaults, keyword defaults and closure cells' contents; a mapping with every
entry. Then:
- every kept function whose code comes from a file of the copy (the sample's aside) is compared with the code
  compiled from the file's text (as read when the session started, for the test files; with and without
  pytest's assertion rewriting, as pytest may load it either way): a test changed before the snapshot, at
  import or through a bytecode cache, is not the code of its file; and the function pytest calls for an item
  must be the project's code (its tests, a base class's test method) or wrap it, never the sample's;
- `changes` compares everything with the snapshot, by identity, after every test and at the end, and (Python
  3.8+) an audit hook sees any `__code__`, `__defaults__` or `__kwdefaults__` set on a kept function at any
  moment and from any thread, even when it is put back before the next check.
What tests do themselves is told apart by rule: a global the module's own code assigns (`global NAME`), and a
class attribute that is not a function, method, property or class (setUpClass keeps its state there).
Standalone (stdlib and pytest, Python 3.7).
"""

from __future__ import annotations

import ast
import hashlib
import itertools
import operator
import os
import sys
import time
import types

_FunctionType, _CodeType, _id, _is_type = types.FunctionType, types.CodeType, id, isinstance
# Bound at import, before any sample's code runs (the fast path of `changes` is made of them).
_all, _map, _list, _len, _is, _dict_get = all, map, list, len, operator.is_, dict.get
_chain, _values = itertools.chain.from_iterable, operator.methodcaller("values")
_get_code, _get_defaults = operator.attrgetter("__code__"), operator.attrgetter("__defaults__")
_get_kwdefaults = operator.attrgetter("__kwdefaults__")
_get_contents, _get_func = operator.attrgetter("cell_contents"), operator.attrgetter("__func__")
_METHODS = (types.FunctionType, staticmethod, classmethod, property)
_STORES = ("STORE_GLOBAL", "DELETE_GLOBAL")
_state: dict[str, object] = {"texts": {}, "functions": [], "mappings": [], "owners": [], "events": []}
cost = {"tests_snapshot_ms": 0.0, "tests_verify_ms": 0.0}
_COMPILED: dict[tuple[str, str], dict] = {}   # (path, sha256 of the text) -> {(name, line): codes}
_clock = time.perf_counter


# -- the files' own code ------------------------------------------------------------------------

def precompile(path: str, text: bytes) -> None:
    """Compile a test file ahead (coderun's worker does, from the pristine tree, before it forks the samples'
    processes), so that a sample's snapshot only looks its code up."""
    _index(path, text)


def _index(path: str, text: bytes) -> dict:
    key = (path, hashlib.sha256(text).hexdigest())
    found = _COMPILED.get(key)
    if found is None:
        found = _COMPILED[key] = {}
        for tree in _trees(path, text):
            for code in _codes(compile(tree, path, "exec", dont_inherit=True)):
                found.setdefault((code.co_name, code.co_firstlineno), []).append(code)
    return found


def _trees(path: str, text: bytes) -> list:
    """The file's tree as written and as pytest's assertion rewriting makes it."""
    try:
        plain = ast.parse(text, path)
    except SyntaxError:
        return []
    out = [plain]
    try:
        from _pytest.assertion.rewrite import rewrite_asserts

        tree = ast.parse(text, path)
        try:
            rewrite_asserts(tree, text, path, None)
        except TypeError:  # pytest before 5: no `source` argument, and the path is a py.path (`.strpath`)
            import py

            tree = ast.parse(text, path)
            rewrite_asserts(tree, py.path.local(path), None)
        out.append(tree)
    except Exception:  # noqa: BLE001  (a pytest without it: the plain code is the only reference)
        pass
    return out


def _codes(code):
    yield code
    for const in code.co_consts:
        if _is_type(const, _CodeType):
            yield from _codes(const)


def read_sources(files: list[str]) -> None:
    """Keep the text of these files now (the session's start, before any sample's code runs)."""
    texts = _state["texts"]
    for path in files:
        if path not in texts:
            try:
                with open(path, "rb") as f:
                    texts[path] = f.read()
            except OSError:
                texts[path] = None


def _source(path: str):
    read_sources([path])
    return _state["texts"].get(path)


# -- what to watch ------------------------------------------------------------------------------

def _unwrap(obj):
    return getattr(obj, "__func__", None) or obj


def _reached(func, depth: int = 3) -> list:
    """`func` and the functions it wraps (`__wrapped__`, closure cells), a few levels deep."""
    out, todo = [], [(func, 0)]
    while todo:
        f, level = todo.pop()
        f = _unwrap(f)
        if not _is_type(f, _FunctionType) or any(f is g for g in out):
            continue
        out.append(f)
        if level < depth:
            inner = [vars(f).get("__wrapped__")] + [_cell(c) for c in f.__closure__ or ()]
            todo += [(g, level + 1) for g in inner if g is not None]
    return out


def _cell(cell):
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return None


def _test_modules(items: list, root: str, sample: str) -> dict[str, types.ModuleType]:
    """The modules of the items, the conftest files, and the other modules of the items' folders when those
    are test folders (their path says test: a package's folder also holds project modules, whose state is the
    project's), never the sample's file."""
    files = {_file_of(i) for i in items} - {None}
    folders = {f for f in map(os.path.dirname, files) if f != root and "test" in os.path.relpath(f, root).lower()}
    inside = (root + os.sep, os.path.abspath(os.getcwd()) + os.sep)
    out = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if not isinstance(path, str) or not path.endswith(".py") or not path.startswith(inside):
            continue  # most modules: a string test, no system call
        path = os.path.realpath(path)
        if path == sample:
            continue
        if path in files or os.path.basename(path) == "conftest.py" or os.path.dirname(path) in folders:
            out[path] = module
    return out


def _file_of(item) -> str | None:
    path = getattr(item, "path", None) or getattr(item, "fspath", None)
    return os.path.realpath(str(path)) if path is not None else None


def _item_function(item):
    return _unwrap(getattr(item, "obj", None)) if hasattr(item, "obj") else None


def _fixture_functions(item) -> list:
    info = getattr(item, "_fixtureinfo", None)
    out = []
    for defs in (getattr(info, "name2fixturedefs", None) or {}).values():
        out += [(d, getattr(d, "func", None)) for d in defs or ()]
    return out


def _assigned(namespace: dict) -> set[str]:
    """Names a module's own code (its globals as snapshotted) rebinds as globals (`global` in a function)."""
    names: set[str] = set()
    for value in list(namespace.values()):
        for func in _bodies_of(value):
            for code in _codes(func.__code__):
                names.update(_stored_globals(code))
    return names


def _set_through(module) -> set[str]:
    """Names the tests' code sets on `module` through its name (rdflib's test_testsuite.py does
    `runner.DEFAULT_PARSER_VERSION = 1.0`): an attribute stored on a global that, in the storing module's
    globals as snapshotted, is `module`."""
    import dis

    names: set[str] = set()
    for _label, _mapping, _held_now, other, first in _state["mappings"]:
        if other is None:
            continue
        holders = {k for k, v in first.items() if v is module}
        if not holders:
            continue
        for value in list(first.values()):
            for func in _bodies_of(value):
                for code in _codes(func.__code__):
                    before = None
                    for ins in dis.get_instructions(code):
                        if ins.opname in ("STORE_ATTR", "DELETE_ATTR") and before in holders:
                            names.add(ins.argval)
                        before = ins.argval if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") else None
    return names


def _stored_globals(code) -> set[str]:
    import dis

    return {i.argval for i in dis.get_instructions(code) if i.opname in _STORES}


def _bodies_of(value) -> list:
    """The functions whose code a module's value runs, decorated ones included: pytest wraps a fixture's body
    in a function of its own (before 8.4) or a FixtureFunctionDefinition (8.4 on), both with `__wrapped__`."""
    if not _is_type(value, (type, _FunctionType)):
        try:
            value = object.__getattribute__(value, "__dict__").get("__wrapped__")
        except (AttributeError, TypeError):
            return []
    return [g for f in _methods_of(value) for g in _reached(f)] if value is not None else []


def _methods_of(value) -> list:
    if _is_type(value, type):
        return [_unwrap(v) for v in vars(value).values() if _is_type(_unwrap(v), _FunctionType)]
    return [value] if _is_type(value, _FunctionType) else []


# -- the snapshot -------------------------------------------------------------------------------

def take(items: list, root: str, sample: str) -> list[str]:
    """Snapshot the items' test code (see the module docstring); returns what is not the code of its file.
    The snapshot is held and the audit hook installed before anything is checked: a thread the sample started
    that swaps a test's code mid-check is then seen either by the checks (before the snapshot) or by
    `changes` (after it), never in between."""
    started = _clock()
    root, sample = os.path.realpath(root), os.path.realpath(os.path.join(root, sample)) if sample else ""
    _state.update(root=root, sample=sample)
    modules = _test_modules(items, root, sample)
    checks = _watch(items, modules, root)
    _install_audit()
    problems = [p for check in checks for p in check()]
    cost["tests_snapshot_ms"] = (_clock() - started) * 1000
    return problems


def _watch(items: list, modules: dict, root: str) -> list:
    """Hold the snapshot; returns the checks to run on it (each a callable returning problems)."""
    functions, owners, checks, fixtures = [], [], [], set()
    sample = _state["sample"]
    for item in items:
        func = _item_function(item)
        if func is not None:
            owners.append((item, "obj", func, f"the test {item.nodeid}"))
            if _file_of(item) != sample:  # a task whose function is in a test file: its tests are the sample's
                checks.append(lambda item=item, func=func: _not_test_code(item, func))
            functions += [(f"{item.nodeid}", f) for f in _reached(func)]
        for fixturedef, fixture in _fixture_functions(item):
            if fixture is not None and _id(fixturedef) not in fixtures:  # a module's fixture: one for all its items
                fixtures.add(_id(fixturedef))
                owners.append((fixturedef, "func", fixture, f"the fixture {getattr(fixturedef, 'argname', '?')}"))
                functions += [(f"the fixture {getattr(fixturedef, 'argname', '?')}", f) for f in _reached(fixture)]
    mappings = []
    for path, module in modules.items():
        rel = os.path.relpath(path, root)
        mappings.append((rel, vars(module), module))
        for name, value in list(vars(module).items()):
            if _is_type(value, type) and getattr(value, "__module__", None) == module.__name__:
                mappings.append((f"{rel}::{value.__qualname__}", vars(value), None))
            functions += [(f"{rel}::{getattr(f, '__qualname__', name)}", f) for f in _methods_of(value)]
    kept = _dedupe(functions)
    _state.update(flat=None, functions=[(label, f, _held(f)) for label, f in kept], owners=owners,
                  mappings=[(label, m, dict(m), module, dict(m)) for label, m, module in mappings])
    checks += [lambda label=label, f=f: _not_its_file(label, f) for label, f in kept]
    return checks


def _dedupe(functions: list) -> list:
    seen, out = set(), []
    for label, f in functions:
        if _id(f) not in seen:
            seen.add(_id(f))
            out.append((label, f))
    return out


def _held(f) -> tuple:
    cells = tuple(_cell(c) for c in f.__closure__ or ())
    return f.__code__, f.__defaults__, f.__kwdefaults__, f.__closure__, cells


def _file_of_code(code) -> str:
    """The real path of the file `code` was compiled from; "" for generated code ("<string>": a dataclass's
    or namedtuple's methods; "<attrs generated init ...>"), which no file holds: resolved against the
    working directory, the name would read as a file of the copy."""
    name = code.co_filename
    return "" if name.startswith("<") and name.endswith(">") else os.path.realpath(name)


def _ours(path: str) -> bool:
    """A file of the copy other than the sample's: the project's tests and modules, as verified."""
    return path.startswith(_state["root"] + os.sep) and path != _state["sample"]


def _not_its_file(label: str, func) -> list[str]:
    """A function the tests run whose code comes from a file of the copy, but is not that file's code (compiled
    from its text); or whose code comes from the sample's file while it lives in a test module's globals (a
    helper of the tests given the sample's code before collection ended: no file's own function is that)."""
    path = _file_of_code(func.__code__)
    if path and path == _state["sample"] and _ours(_globals_file(func)):
        return [f"the code of {label} comes from the sample's file (changed before collection ended)"]
    if not _ours(path):
        return []
    text = _source(path)
    if text is None:
        return [f"the code of {label} comes from {os.path.basename(path)}, which cannot be read"]
    code, index = func.__code__, _index(path, text)
    if any(code == c for c in index.get((code.co_name, code.co_firstlineno), ())) or _impersonates(func, path, index):
        return []
    return [f"the code of {label} is not the code of {os.path.basename(path)} (changed before collection ended)"]


def _globals_file(func) -> str:
    own = func.__globals__.get("__file__")
    return os.path.realpath(own) if isinstance(own, str) else ""


def _impersonates(func, path: str, index: dict) -> bool:
    """A wrapper made elsewhere that names the file and line of the test it wraps (hypothesis's `@given` does,
    to hide its internals from pytest): its globals are not that file's module's, and among the functions it
    wraps is the file's own code at that line."""
    if _globals_file(func) == path:  # a function of the file itself: its code must be the file's
        return False
    line = func.__code__.co_firstlineno
    return any(c.co_firstlineno == line and _file_of_code(c) == path and any(c == k for k in index.get((c.co_name, line), ()))
               for c in (f.__code__ for f in _held_functions(func)))


def _held_functions(func) -> list:
    """The functions a wrapper holds: those it wraps, and those its attributes hold (hypothesis keeps the test
    in `.hypothesis.inner_test`)."""
    out = _reached(func)[1:]
    for value in vars(func).values():
        inner = vars(value).values() if hasattr(value, "__dict__") and not _is_type(value, (type, types.ModuleType)) else ()
        out += [v for v in (value, *inner) if _is_type(v, _FunctionType)]
    return out


def _not_test_code(item, func) -> list[str]:
    """The function an item runs is the project's code (its tests, a base class's test method, a helper), or
    a wrapper (a decorator's) of it, or a test method its class inherits from an installed library; never the
    sample's."""
    if any(_ours(_file_of_code(f.__code__)) for f in _reached(func)) or _inherited_from_installed(item, func):
        return []
    return [f"the test {item.nodeid} runs {getattr(func, '__qualname__', func)!r} from "
            f"{os.path.basename(func.__code__.co_filename)}, not test code"]


def _inherited_from_installed(item, func) -> bool:
    """rdiffweb's admin tests inherit `test_gc` from cherrypy's `CPWebCase`: the item's class does not define
    the method, the first base that does is that function, and its code is the code of its file, outside the
    copy (compiled from the file's text, so a function made elsewhere that names the library's file is not)."""
    cls, name = getattr(item, "cls", None), getattr(item, "originalname", None) or getattr(item, "name", "")
    if not _is_type(cls, type) or name in vars(cls):
        return False
    owner = next((c for c in cls.__mro__[1:] if name in vars(c)), None)
    if owner is None or _unwrap(vars(owner)[name]) is not func:
        return False
    path, code = _file_of_code(func.__code__), func.__code__
    if not path or path.startswith(_state["root"] + os.sep) or path == _state["sample"]:
        return False
    text = _source(path)
    return text is not None and any(code == c for c in _index(path, text).get((code.co_name, code.co_firstlineno), ()))


# -- checks -------------------------------------------------------------------------------------

def changes() -> list[str]:
    """What changed since the snapshot (or the last call), in words; [] when nothing did."""
    started = _clock()
    out = []
    if not _unchanged():  # something differs: the checks name it (or find it is the tests' own state)
        out = _function_changes() + _owner_changes() + _mapping_changes()
        _flatten()
    events = _state["events"]
    seen, n = list(events), len(events)
    del events[:n]  # the hook appends to this very list, from any thread
    out += [f"{what} of {label} was set (seen by the audit hook)" for what, label in dict.fromkeys(seen)]
    cost["tests_verify_ms"] += (_clock() - started) * 1000
    return out


def _unchanged() -> bool:
    """The fast path, run after every test: whether every kept function, owner and mapping holds exactly the
    objects the snapshot (or the last check) kept, identities compared in C over flat lists as
    coderun_integrity does (a suite of thousands of tests checked one by one in Python paid 8 ms a test).
    False sends `changes` through the checks that name what changed, which are exact."""
    flat = _state.get("flat")
    if not flat:
        return False
    try:
        functions, mappings, methods = flat["functions"], flat["mappings"], flat["methods"]
        # With the audit hook, a code or defaults set is an event already; reading them calls the hook too.
        # A function's closure cannot be set at all (a read-only attribute): only its cells' contents can.
        return ((_state.get("audit") or (
                    _all(_map(_is, _map(_get_code, functions), flat["codes"]))
                    and _all(_map(_is, _map(_get_defaults, functions), flat["defaults"]))
                    and _all(_map(_is, _map(_get_kwdefaults, functions), flat["kwdefaults"]))))
                and _all(_map(_is, _map(_get_contents, flat["cells"]), flat["contents"]))
                and _all([_cell(c) is None for c in flat["empty"]])
                and _all(_map(_is, _map(_dict_get, flat["slots"], flat["slot_keys"]), flat["slot_raw"]))
                and _all(_map(_is, _map(getattr, flat["owners"], flat["attrs"]), flat["raw"]))
                and _all(_map(_is, _map(_get_func, _map(getattr, methods, flat["method_attrs"])),
                              flat["method_funcs"]))
                and _list(_map(_len, mappings)) == flat["sizes"]
                and _all(_map(_is, _chain(mappings), flat["keys"]))
                and _all(_map(_is, _chain(_map(_values, mappings)), flat["values"])))
    except (AttributeError, ValueError):  # an attribute gone, a cell emptied: the checks say what
        return False


def _flatten() -> None:
    """What the checks kept (never what is there now: a change made meanwhile would be taken as the snapshot),
    as `_unchanged` reads it."""
    held = [h for _, _, h in _state["functions"]]
    cells = [(c, v) for h in held for c, v in zip(h[3] or (), h[4])]  # noqa: B905 (3.7)
    plain, methods, slots = [], [], []
    for owner, attr, func, _label in _state["owners"]:
        now = getattr(owner, attr, None)
        # An item's function is a method bound anew per test (unittest's TestCaseFunction): its function counts.
        if getattr(now, "__func__", None) is func:
            methods.append((owner, attr, now, func))
        elif _unwrap(now) is func and _pytest_slot(owner, attr, now):
            slots.append((vars(owner), "_obj", now))
        else:
            plain.append((owner, attr, now, func))
    mappings = _state["mappings"]
    _state["flat"] = {
        "functions": [f for _, f, _ in _state["functions"]], "codes": [h[0] for h in held],
        "defaults": [h[1] for h in held], "kwdefaults": [h[2] for h in held],
        "cells": [c for c, v in cells if v is not None], "contents": [v for _, v in cells if v is not None],
        "empty": [c for c, v in cells if v is None],
        "owners": [o for o, _, _, _ in plain], "attrs": [a for _, a, _, _ in plain],
        # A value that is not the kept function is never the same object again: the checks will say it changed.
        "raw": [now if _unwrap(now) is func else object() for _, _, now, func in plain],
        "slots": [d for d, _, _ in slots], "slot_keys": [k for _, k, _ in slots], "slot_raw": [v for _, _, v in slots],
        "methods": [o for o, _, _, _ in methods], "method_attrs": [a for _, a, _, _ in methods],
        "method_funcs": [f for _, _, _, f in methods],
        "mappings": [m for _, m, _, _, _ in mappings], "sizes": [_len(h) for _, _, h, _, _ in mappings],
        "keys": _list(_chain(h for _, _, h, _, _ in mappings)),
        "values": _list(_chain(_map(_values, (h for _, _, h, _, _ in mappings))))}


def _pytest_slot(owner, attr: str, now) -> bool:
    """Whether `owner.obj` is pytest's own property over the item's `_obj` (a Function item's test function,
    made once): then the fast path reads that entry of the item's dict, in C, not the property, in Python
    (half a suite of thousands of tests' check after every test). The property is pytest's, whose classes
    coderun_integrity watches; anything else is read through getattr."""
    prop = getattr(type(owner), attr, None) if attr == "obj" else None
    return (isinstance(prop, property) and str(getattr(prop.fget, "__module__", "")).startswith("_pytest.")
            and isinstance(getattr(owner, "__dict__", None), dict) and vars(owner).get("_obj") is now)


def _function_changes() -> list[str]:
    out, kept = [], _state["functions"]
    for i, (label, f, held) in enumerate(kept):
        now = _held(f)
        if now[0] is held[0] and now[1] is held[1] and now[2] is held[2] and now[3] is held[3] \
                and len(now[4]) == len(held[4]) and all(a is b for a, b in zip(now[4], held[4])):  # noqa: B905
            continue
        what = ("code", "defaults", "keyword defaults", "closure", "closure's values")
        changed = [what[k] for k in range(5) if k < 4 and now[k] is not held[k]] or [what[4]]
        out.append(f"the {' and '.join(changed)} of {label} changed")
        kept[i] = (label, f, now)
    return out


def _owner_changes() -> list[str]:
    """An item's or fixture's function replaced: by pytest or a plugin, it is the same code again (pytest's
    xunit fixtures are made anew from one code) or a wrapper of the function (pytest-asyncio wraps
    coroutine fixtures); else it is tampering."""
    out = []
    for i, (owner, attr, func, label) in enumerate(_state["owners"]):
        now = _unwrap(getattr(owner, attr, None))
        if now is func:
            continue
        if getattr(now, "__code__", None) is not func.__code__ and not any(f is func for f in _reached(now)):
            out.append(f"{label} is another function now")
        _state["owners"][i] = (owner, attr, now, label)
    return out


def _mapping_changes() -> list[str]:
    """A module's mapping (with its module and its first snapshot) or a class's (module None): the names the
    module's own code assigns are looked for only when something changed there, in its snapshotted code."""
    out = []
    for i, (label, mapping, held, module, first) in enumerate(_state["mappings"]):
        if len(mapping) == len(held) and all(mapping.get(k, held) is v for k, v in held.items()):
            # The same entries, maybe in another order (a key removed and set again): kept in this order,
            # or the fast path would never hold again.
            now = dict(mapping)
            if len(now) == len(held) and all(now.get(k, held) is v for k, v in held.items()):
                _state["mappings"][i] = (label, mapping, now, module, first)
            continue
        now = dict(mapping)
        allowed = _assigned(first) | _set_through(module) if module is not None else set()
        for key in set(now) | set(held):
            before, after = held.get(key, held), now.get(key, held)
            if before is after or key in allowed or key in _STATE_KEYS or _submodule(module, key, after):
                continue
            if module is None and not (_is_type(before, _METHODS) or _is_type(after, _METHODS)):
                continue  # a class's data: the tests' own state
            change = "added" if before is held else "removed" if after is held else "rebound"
            out.append(f"{label}: {key} was {change}")
        _state["mappings"][i] = (label, mapping, now, module, first)
    return out


def _submodule(module, key: str, value) -> bool:
    """A package's submodule imported while the tests ran (the import system sets it on the package)."""
    return module is not None and _is_type(value, types.ModuleType) and value.__name__ == f"{module.__name__}.{key}"


# Names the interpreter and pytest set on modules and classes by themselves (the warnings registry; pytest's
# assertion rewriting helpers; zope.interface's declaration caches on a class it is asked about).
_STATE_KEYS = frozenset({"__warningregistry__", "@py_builtins", "@pytest_ar", "__implemented__",
                         "__providedBy__", "__provides__"})


def _install_audit() -> None:
    """Python 3.8+: an audit hook that records a code, defaults or keyword defaults set on a kept function,
    whenever and from whichever thread (a change put back before the next check is seen too)."""
    add = getattr(sys, "addaudithook", None)
    watched = {_id(f): label for label, f, _ in _state["functions"]}
    _state["watched"] = watched
    if add is None or _state.get("audit"):
        return
    events, names = _state["events"], ("__code__", "__defaults__", "__kwdefaults__")

    def hook(event, args):
        if event == "object.__setattr__" and len(args) == 3 and args[1] in names:
            label = _state["watched"].get(_id(args[0]))
            if label is not None and args[0] is not None:
                events.append((args[1], label))

    add(hook)
    _state["audit"] = True
