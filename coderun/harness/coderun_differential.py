"""The differential step (issue 23): the target function called on given inputs, inside the test process.

coderun_reporter calls `run(payload, root)` at the end of a session whose tests all passed, and writes what
it returns as a `differential` record. The host compares; nothing here judges a sample.

    payload = {"mode": "check" | "explore", "target": {...}, "inputs": [input, ...],
               "limit": seconds per call, "budget": seconds for the whole step,
               "explore": {"seed": int, "per_input": 8, "max_candidates": 200, "mutants": 20}}

check:   {"mode": "check", "observations": [obs per input, in order]}
explore: {"mode": "explore", "mutants": n, "candidates": [{"input", "origin", "obs", "again", "arcs", "kills"}],
          "mutated": [[line, what changed] per mutant], "dropped": mutated inputs the original refused,
          "mutants_skipped": why no mutant could be made (when so)}
         (run at build time on the original: the recorded inputs plus type-aware mutants of them, each called
         twice; the arcs of the target's body each executed; which AST mutants of the body each tells apart)
Either may carry "stopped": {"at": i, "phase": ..., "why": ...} when the budget ran out: check (phase
"inputs"), inputs from i on are `timeout`; explore, candidate i and later were not tried (phase "candidates",
and no kills are computed) or mutant i and later were not run (phase "mutants"). A target that cannot be
found gives {"error": why} and nothing is called.

The formats (input, obs, target) are issue 23's; the forms are coderun_values'. Each call gets a fresh copy
of its input and a time limit: SIGALRM raises CallTimeout (a BaseException), again every 50 ms until the
call is over, and a call during which it fired is a `timeout` even if the function caught it and returned.
(A loop that catches BaseException forever cannot be stopped from inside the process: the host's wall clock
ends it.) Standalone: stdlib only, Python 3.7.
"""

import ast
import copy
import importlib
import itertools
import json
import os
import random
import signal
import sys
import tempfile
import threading
import time
import types

from coderun_values import MAX_GEN_ITEMS, call_form, canonical, digest, dump_call, load_call, set_roots

_REPEAT = 0.05                  # seconds between alarms once a call overran (see CallTimeout)
_MUTANT_LIMIT = 0.5             # seconds per call of an AST mutant, at most
_DEFAULT_BUDGET = 60.0
_perf, _monotonic = time.perf_counter, time.monotonic


class CallTimeout(BaseException):
    """Raised in a call that overran its limit; a BaseException so `except Exception` does not catch it."""


class TargetError(Exception):
    """The target could not be found as a callable function."""


def run(payload, root):
    """What the target did on the payload's inputs (see the module docstring)."""
    set_roots([root, tempfile.gettempdir()])
    target = payload.get("target") or {}
    try:
        fn, method = resolve(target, root)
    except TargetError as e:
        return {"error": str(e)}
    clock = _Budget(payload.get("budget"), float(payload.get("limit") or 1.0))
    inputs = list(payload.get("inputs") or [])
    mode = payload.get("mode")
    if mode == "check":
        return _check(fn, inputs, clock)
    if mode == "explore":
        return _explore(fn, method, target, root, inputs, dict(payload.get("explore") or {}), clock)
    return {"error": f"unknown mode {mode!r}"}


# -- the target ---------------------------------------------------------------------------------

def resolve(target, root):
    """(the raw function, whether its first argument is a receiver) of a target; raises TargetError."""
    path = os.path.realpath(os.path.join(root, target.get("file") or ""))
    name, qualname = target.get("name"), str(target.get("qualname") or "")
    parts = qualname.split(".")
    if "<locals>" in parts:
        raise TargetError(f"{qualname} is defined inside a function: it cannot be called alone")
    holder = _module_for(path, str(target.get("file") or ""))
    for part in parts[:-1]:
        holder = _member(holder, part, qualname)
        if not isinstance(holder, type):
            raise TargetError(f"{qualname}: {part} is not a class")
    raw = _member(holder, parts[-1], qualname)
    fn = _unwrap(raw, name)
    if fn is None:
        raise TargetError(f"{qualname} is not a function named {name} once unwrapped ({type(raw).__name__})")
    code = fn.__code__
    first, lineno = int(target.get("first") or 0), int(target.get("lineno") or 0)
    if os.path.realpath(code.co_filename) != path or not first <= code.co_firstlineno <= lineno:
        raise TargetError(f"{qualname} was found at {code.co_filename}:{code.co_firstlineno}, "
                          f"not at {target.get('file')}:{first}-{lineno}")
    return fn, isinstance(holder, type) and not isinstance(raw, staticmethod)


def _member(holder, part, qualname):
    found = vars(holder).get(part, _MISSING)
    if found is _MISSING:
        raise TargetError(f"{qualname}: {getattr(holder, '__name__', holder)} has no {part}")
    return found


_MISSING = object()


def _module_for(path, relfile):
    """The module loaded from `path`: already imported, else imported by the dotted names of the path's
    suffixes (src/pkg/mod.py: src.pkg.mod, pkg.mod, mod), keeping the one loaded from that very file."""
    for module in list(sys.modules.values()):
        if _file_of(module) == path:
            return module
    parts = relfile.replace(os.sep, "/")[:-len(".py")].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    tried = []
    for i in range(len(parts)):
        dotted = ".".join(parts[i:])
        try:
            module = importlib.import_module(dotted)
        except Exception as e:  # the import of a wrong guess may fail in any way
            tried.append(f"{dotted}: {type(e).__name__}")
            continue
        if _file_of(module) == path:
            return module
        tried.append(f"{dotted}: another file")
    raise TargetError(f"no module loaded from {relfile} ({', '.join(tried) or 'nothing to try'})")


def _file_of(module):
    file = getattr(module, "__dict__", {}).get("__file__") if isinstance(module, types.ModuleType) else None
    return os.path.realpath(file) if isinstance(file, str) else None


def _unwrap(obj, name):
    """The function whose code is named `name` under staticmethod/classmethod, property, cached_property
    and the __wrapped__ chain, or in one level of closure cells of the last wrapper; None when there is none."""
    seen = set()
    while obj is not None and id(obj) not in seen:
        seen.add(id(obj))
        if isinstance(obj, (staticmethod, classmethod)):
            obj = obj.__func__
        elif isinstance(obj, property):
            obj = obj.fget
        elif type(obj).__name__ == "cached_property" and isinstance(getattr(obj, "func", None), types.FunctionType):
            obj = obj.func
        elif isinstance(obj, types.FunctionType) and obj.__code__.co_name == name:
            return obj
        else:
            wrapped = getattr(obj, "__wrapped__", None)
            if wrapped is None:
                break
            obj = wrapped
    for cell in getattr(obj, "__closure__", None) or ():
        try:
            inner = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if isinstance(inner, types.FunctionType) and inner.__code__.co_name == name:
            return inner
    return None


# -- one call -----------------------------------------------------------------------------------

class _Budget:
    """The whole step's time and the per-call limit within it."""

    def __init__(self, budget, limit):
        budget = float(budget) if budget else _DEFAULT_BUDGET
        self.budget, self.limit = budget, limit
        self.deadline = _monotonic() + budget

    def left(self):
        return self.deadline - _monotonic()

    def stopped(self, at, phase="inputs"):
        return {"at": at, "phase": phase, "why": f"the budget of {self.budget:g} s was used up"}


def _obs(outcome, value=None, args=None, kwargs=None, seconds=0.0):
    return {"outcome": outcome, "value": value, "args": args, "kwargs": kwargs, "seconds": seconds}


def observe(fn, text, limit, arcs=None):
    """What one call of `fn` on a fresh copy of the input `text` did (an obs); `arcs` (a set) receives the
    (previous line, line) pairs executed in frames of fn's code (coverage.py's convention: entry from and
    exit to -co_firstlineno)."""
    try:
        args, kwargs = load_call(text)
    except Exception:  # unpicklable here (a class gone, a module missing): the input cannot be replayed
        return _obs("unloadable")
    return _limited(lambda: _call(fn, args, kwargs, arcs), limit)


def _call(fn, args, kwargs, arcs):
    tracer = _tracer(fn.__code__, arcs) if arcs is not None else None
    previous = sys.gettrace()
    started = _perf()
    try:
        if tracer is not None:
            sys.settrace(tracer)
        try:
            value = fn(*args, **kwargs)
            form = _drained(value) if isinstance(value, types.GeneratorType) else None
            outcome = "return"
        finally:
            if tracer is not None:
                sys.settrace(previous)
    except CallTimeout:
        raise
    except BaseException as e:  # SystemExit and pytest's outcomes too: what the function did
        outcome, form = "raise", _qualified(type(e))
    seconds = _perf() - started
    if outcome == "return" and form is None:
        form = _form(value)
    return _obs(outcome, form, _form(list(args)), _form(dict(kwargs)), round(seconds, 6))


def _drained(gen):
    """A generator's first items as the form ["gen", [item forms], more?] (its body runs here, in the limit)."""
    try:
        items = list(itertools.islice(gen, MAX_GEN_ITEMS + 1))
    finally:
        gen.close()
    form = ["gen", _form(items[:MAX_GEN_ITEMS])[1]]
    return form + [True] if len(items) > MAX_GEN_ITEMS else form


def _form(value):
    try:
        return canonical(value)
    except CallTimeout:
        raise
    except Exception as e:  # a value whose state cannot be read (a property raising): say so, by type
        return ["unformed", _qualified(type(e))]


def _qualified(t):
    module = getattr(t, "__module__", None) or ""
    name = getattr(t, "__qualname__", None) or getattr(t, "__name__", None) or repr(t)
    return f"{module}.{name}" if module and module != "builtins" else name


def _tracer(code, arcs):
    last = {}
    exit_line = -code.co_firstlineno

    def local(frame, event, arg):
        key = id(frame)
        if event == "line":
            arcs.add((last.get(key, exit_line), frame.f_lineno))
            last[key] = frame.f_lineno
        elif event == "return":
            arcs.add((last.pop(key, exit_line), exit_line))
        return local

    def calls(frame, event, arg):
        if frame.f_code is not code:
            return None
        last[id(frame)] = exit_line  # an entry (a generator's too, each time it resumes)
        return local

    return calls


def _limited(func, seconds):
    """func() under an alarm of `seconds`; a `timeout` obs when it overran (even if it swallowed the alarm).
    Without an alarm to use (not the main thread), func runs unlimited."""
    if seconds <= 0 or threading.current_thread() is not threading.main_thread():
        return func()
    fired, armed = [0], [True]

    def on_alarm(signum, frame):
        if armed[0]:
            fired[0] += 1
            raise CallTimeout()

    started = _monotonic()
    previous_handler = signal.signal(signal.SIGALRM, on_alarm)
    previous_timer = signal.setitimer(signal.ITIMER_REAL, seconds, _REPEAT)
    result = None
    try:
        try:
            result = func()
        finally:
            armed[0] = False
            signal.setitimer(signal.ITIMER_REAL, 0)
    except CallTimeout:
        armed[0] = False
    finally:
        armed[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous_handler)
        _rearm(previous_timer, _monotonic() - started)
    if fired[0] or result is None:
        return _obs("timeout", seconds=round(_monotonic() - started, 6))
    return result


def _rearm(previous, elapsed):
    delay, interval = previous
    if delay > 0:
        signal.setitimer(signal.ITIMER_REAL, max(delay - elapsed, 0.001), interval)


# -- check --------------------------------------------------------------------------------------

def _check(fn, inputs, clock):
    observations, stopped = [], None
    for i, text in enumerate(inputs):
        left = clock.left()
        if stopped is None and left <= 0:
            stopped = clock.stopped(i)
        if stopped is not None:
            observations.append(_obs("timeout"))
            continue
        obs = observe(fn, text, min(clock.limit, left))
        if obs["outcome"] == "timeout" and left < clock.limit:
            stopped = clock.stopped(i)
        observations.append(obs)
    out = {"mode": "check", "observations": observations}
    if stopped is not None:
        out["stopped"] = stopped
    return out


# -- explore: candidates ------------------------------------------------------------------------

def _explore(fn, method, target, root, inputs, options, clock):
    rng = random.Random(int(options.get("seed") or 0))
    candidates = _candidates(inputs, method, rng, int(options.get("per_input", 8)),
                             int(options.get("max_candidates", 200)))
    kept, dropped, stopped = [], 0, None
    for text, origin in candidates:
        left = clock.left()
        if left <= 0:
            stopped = clock.stopped(len(kept) + dropped, "candidates")
            break
        arcs = set()
        obs = observe(fn, text, min(clock.limit, left), arcs)
        if origin == "mutated" and obs["outcome"] != "return":
            dropped += 1  # an input the original refuses (or hangs on) is not a valid input
            continue
        again = observe(fn, text, min(clock.limit, max(clock.left(), 0.001)))
        kept.append({"input": text, "origin": origin, "obs": obs, "again": again,
                     "arcs": sorted([a, b] for a, b in arcs), "kills": []})
    mutants, about = build_mutants(fn, target, root, rng, int(options.get("mutants", 20)))
    if stopped is None:
        stopped = _kills(mutants, kept, clock)
    out = {"mode": "explore", "mutants": len(mutants), "mutated": about["mutated"], "candidates": kept,
           "dropped": dropped}
    if about.get("skipped"):
        out["mutants_skipped"] = about["skipped"]
    if stopped is not None:
        out["stopped"] = stopped
    return out


def _candidates(inputs, method, rng, per_input, max_candidates):
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


# -- explore: AST mutants -----------------------------------------------------------------------

_BINOPS = {"Add": "Sub", "Sub": "Add", "Mult": "Div", "Div": "Mult", "FloorDiv": "Mult", "Mod": "FloorDiv",
           "Pow": "Mult", "BitAnd": "BitOr", "BitOr": "BitAnd", "BitXor": "BitOr", "LShift": "RShift",
           "RShift": "LShift"}
_CMPOPS = {"Lt": "LtE", "LtE": "Lt", "Gt": "GtE", "GtE": "Gt", "Eq": "NotEq", "NotEq": "Eq", "In": "NotIn",
           "NotIn": "In", "Is": "IsNot", "IsNot": "Is"}
_BOOLOPS = {"And": "Or", "Or": "And"}


def build_mutants(fn, target, root, rng, count):
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


def _kills(mutants, kept, clock):
    """Each candidate's `kills`: the mutants whose obs on it differs from the original's (seconds aside).
    Returns a `stopped` dict when the budget ran out."""
    for m, mutant in enumerate(mutants):
        for cand in kept:
            left = clock.left()
            if left <= 0:
                return clock.stopped(m, "mutants")
            obs = observe(mutant, cand["input"], min(clock.limit, _MUTANT_LIMIT, left))
            if _essence(obs) != _essence(cand["obs"]):
                cand["kills"].append(m)
    return None


def _essence(obs):
    return json.dumps([obs.get("outcome"), obs.get("value"), obs.get("args"), obs.get("kwargs")], sort_keys=True)
