"""The integrity of coderun's test harness, checked from inside the test process (coderun_reporter uses it).

Taken once every plugin is loaded, verified after every test and at the end: the identity of every entry
of the module dicts and class dicts (methods, properties, descriptors) and the code object of every function
of pytest, _pytest, pluggy, unittest and coderun's reporter, of every builtin, and of the `sys` attributes
they call. Nothing is enumerated move by move: any change is named. The tools are bound here, at import,
before any sample's code runs; identities are compared, never names or values (a forged object's __eq__ is
never called). What the interpreter, pytest or a library legitimately change while tests run (caches,
lazy imports, pytest's per-test state) is told apart by rule, each with its reason (see _benign).
Standalone (stdlib only, Python 3.7).
"""

from __future__ import annotations

import builtins
import itertools
import operator
import sys
import time
import types
import unittest  # noqa: F401  (so unittest's classes are there to be watched)

_FAMILIES = ("pytest", "_pytest", "pluggy", "unittest", "coderun_reporter", "coderun_integrity", "coderun_values",
             "coderun_differential", "coderun_mutants", "coderun_testcode")
_SYS_NAMES = ("modules", "exc_info", "_getframe", "exit", "meta_path", "path_hooks", "settrace", "gettrace",
              "setprofile", "getrecursionlimit")
# Module globals that pytest itself sets while a test runs (the assertion plugin's per-test hooks): their
# value is state, not machinery. Measured on the built-in projects' tests.
_STATE = frozenset({("_pytest.assertion.util", "_reprcompare"), ("_pytest.assertion.util", "_assertion_pass"),
                    ("_pytest.assertion.util", "_config"),
                    # mock_open's lazily filled spec lists (None until a test first calls it: repoapi's do)
                    ("unittest.mock", "file_spec"), ("unittest.mock", "open_spec")})
# Names set on whatever they touch by pytest (on a node class the first time one is made: nodes.py, a
# warning shown once), by the interpreter (the warnings module's per-module registry) and by zope.interface
# (its declaration caches on a class it is asked about). Measured on the built-in projects' tests.
_STATE_KEYS = frozenset({"_pytest_diamond_inheritance_warning_shown", "__warningregistry__",
                         "__implemented__", "__providedBy__", "__provides__"})
_map, _list, _len, _sum, _all, _type, _isinstance, _callable = map, list, len, sum, all, type, isinstance, callable
_chain, _is = itertools.chain.from_iterable, operator.is_
_values, _code_of = operator.methodcaller("values"), operator.attrgetter("__code__")
_FunctionType, _BUILTINS, _SYS = types.FunctionType, vars(builtins), sys
_ModuleType = types.ModuleType
_integrity: dict[str, object] = {}
cost = {"snapshot_ms": 0.0, "verify_ms": 0.0, "verifies": 0}   # in the reporter's `finish` record
_clock = time.perf_counter


def _harness_modules() -> list[tuple[str, object]]:
    return sorted((name, mod) for name, mod in list(sys.modules.items())
                  if mod is not None and name.partition(".")[0] in _FAMILIES)


def prepare(modules: list[tuple[str, object]] | None = None) -> None:
    """Find what to watch ahead of the session: coderun's worker calls this in a task's template, before it
    forks a process per sample, so that each sample's session only takes the values (see _take)."""
    modules = _harness_modules() if modules is None else modules
    mappings: list[tuple[str, object]] = [("builtins", _BUILTINS)]
    functions: list[tuple[str, object]] = []
    seen: set[int] = set()
    for name, mod in modules:
        mappings.append((name, vars(mod)))
        for attr, value in list(vars(mod).items()):
            _collect(f"{name}.{attr}", value, mappings, functions, seen)
    _integrity.update(modules=[(name, id(mod)) for name, mod in modules], mappings=mappings, functions=functions,
                      function_objects=[f for _, f in functions], dicts={name: vars(mod) for name, mod in modules})


def _take() -> None:
    """Which mappings and functions to watch (found again unless found ahead for these very modules),
    then what they hold now."""
    modules = _harness_modules()
    cost["found_ahead"] = _integrity.get("modules") == [(name, id(mod)) for name, mod in modules]
    if not cost["found_ahead"]:
        prepare(modules)
    _rebase()


def _collect(label: str, value, mappings: list, functions: list, seen: set) -> None:
    if id(value) in seen:
        return
    if _isinstance(value, type) and str(getattr(value, "__module__", "")).partition(".")[0] in _FAMILIES:
        seen.add(id(value))
        label = f"{value.__module__}.{value.__qualname__}"
        mappings.append((label, vars(value)))
        for attr, member in list(vars(value).items()):
            inner = getattr(member, "__func__", None) or getattr(member, "fget", None) or member
            if _isinstance(inner, _FunctionType) and id(inner) not in seen:
                seen.add(id(inner))
                functions.append((f"{label}.{attr}", inner))
    elif _isinstance(value, _FunctionType) and str(value.__module__).partition(".")[0] in _FAMILIES:
        seen.add(id(value))
        functions.append((f"{value.__module__}.{value.__qualname__}", value))


def _rebase() -> None:
    """What the watched mappings, functions and sys attributes hold now, kept by reference (the objects
    themselves, so the fast path compares identities with `is` and never calls a value's __eq__)."""
    _integrity.update(copies=[dict(m) for _, m in _integrity["mappings"]],
                      codes=_list(_map(_code_of, _integrity["function_objects"])),
                      sys={n: getattr(_SYS, n, None) for n in _SYS_NAMES})
    _flatten()


def _flatten() -> None:
    """The copies as the fast path reads them: one flat list of keys and one of values; a mapping holding
    pytest's own per-test state (_STATE) is compared apart, without those entries."""
    plain, held, stateful = [], [], []
    for (label, mapping), copy in zip(_integrity["mappings"], _integrity["copies"]):  # noqa: B905 (3.7)
        state = [key for key in copy if (label, key) in _STATE]
        if state:
            stateful.append((mapping, state, {k: v for k, v in copy.items() if k not in state}))
        else:
            plain.append(mapping)
            held.append(copy)
    _integrity.update(plain=plain, stateful=stateful, size=_sum(_map(_len, held)), keys=_list(_chain(held)),
                      values=_list(_chain(_map(_values, held))))


def _changes() -> list[tuple[str, str, object]]:
    """(change, name, new value) of every change since the last rebase; [] fast when nothing changed."""
    if not _integrity.get("copies"):
        return []
    plain = _integrity["plain"]
    same = (_sum(_map(_len, plain)) == _integrity["size"]
            and _all(_map(_is, _chain(_map(_values, plain)), _integrity["values"]))
            and _all(_map(_is, _chain(plain), _integrity["keys"]))
            and _all(_map(_is, _map(_code_of, _integrity["function_objects"]), _integrity["codes"]))
            and _all([getattr(_SYS, n, None) is v for n, v in _integrity["sys"].items()])
            and _all([_same_but_state(*entry) for entry in _integrity["stateful"]]))
    return [] if same else _name_changes()


def _same_but_state(mapping, state: list, held: dict) -> bool:
    now = [(k, v) for k, v in list(mapping.items()) if k not in state]
    return _len(now) == _len(held) and _all([k in held and v is held[k] for k, v in now])


def _benign(change: str, label: str, key: str, before, now) -> bool:
    """Whether a change is what pytest, the interpreter or the import system do while tests run."""
    if (label, key) in _STATE or key in _STATE_KEYS:
        return True
    if label == "builtins":  # a new builtin (gettext's `_`, pybind11's internals) shadows nothing pytest
        # calls: its code names only what is defined. `_` is also the displayhook's last value, which each
        # doctest example that shows one sets again; gettext's `_` (a callable tests call) stays watched.
        return change == "added" or (change == "replaced" and key == "_" and not _callable(before))
    module = _SYS.modules.get(label)
    if module is None or vars(module) is not _integrity.get("dicts", {}).get(label):
        return False  # a class dict: an attribute added or replaced there is machinery
    home = _SYS.modules.get(str(getattr(now, "__module__", "")))
    if change == "added":  # a submodule imported, or a name a package's __getattr__ loads lazily
        return (_isinstance(now, _ModuleType) and now.__name__ == f"{label}.{key}") or (
            home is not None and getattr(now, "__name__", None) == key and vars(home).get(key) is now
            and now.__module__.partition(".")[0] in _FAMILIES)
    # pytest's lazy initialisation: a global that was None set to a class or function of that module
    return change == "replaced" and before is None and home is module and _isinstance(now, (type, _FunctionType))


def _name_changes() -> list[tuple[str, str, object]]:
    """The slow path, only when something differs: each change by name, pytest's own state left out;
    then the changed mappings and functions are taken as they are now, so each change is reported once."""
    out = []
    copies = _integrity["copies"]
    for i, (label, mapping) in enumerate(_integrity["mappings"]):
        before = copies[i]
        if _len(mapping) == _len(before) and _all(_map(_is, mapping.values(), before.values())) \
                and _all(_map(_is, mapping, before)):
            continue
        now = copies[i] = dict(mapping)
        changed = [k for k in before if k not in now]
        changed += [k for k in now if k not in before or now[k] is not before[k]]
        for key in changed:
            change = "removed" if key not in now else "added" if key not in before else "replaced"
            if not _benign(change, label, key, before.get(key), now.get(key)):
                out.append((change, f"{label}.{key}", now.get(key)))
    codes = _integrity["codes"]
    for i, (label, func) in enumerate(_integrity["functions"]):
        if func.__code__ is not codes[i]:
            out.append(("code", label, func))
            codes[i] = func.__code__
    for name, value in list(_integrity["sys"].items()):
        if getattr(_SYS, name, None) is not value:
            out.append(("replaced", f"sys.{name}", getattr(_SYS, name, None)))
            _integrity["sys"][name] = getattr(_SYS, name, None)
    _flatten()
    return out


def take() -> None:
    """The snapshot, timed (at the session's start)."""
    started = _clock()
    _take()
    cost["snapshot_ms"] = (_clock() - started) * 1000


def changes() -> list[tuple[str, str, object]]:
    """(change, name, new value) of every change since the last call, timed; [] when nothing changed."""
    started = _clock()
    out = _changes()
    cost["verify_ms"] += (_clock() - started) * 1000
    cost["verifies"] += 1
    return out
