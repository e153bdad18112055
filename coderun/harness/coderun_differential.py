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

The formats (input, obs, target) are issue 23's; the forms are coderun_values'; explore's new inputs and
mutated bodies come from coderun_mutants. Each call gets a fresh copy
of its input and a time limit: SIGALRM raises CallTimeout (a BaseException), again every 50 ms until the
call is over, and a call during which it fired is a `timeout` even if the function caught it and returned.
(A loop that catches BaseException forever cannot be stopped from inside the process: the host's wall clock
ends it.) Standalone: stdlib only, Python 3.7.
"""

import contextlib
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

from coderun_mutants import build as _build_mutants
from coderun_mutants import candidates as _candidates
from coderun_values import MAX_GEN_ITEMS, canonical, load_call, set_roots

_REPEAT = 0.05                  # seconds between alarms once a call overran (see CallTimeout)
_MUTANT_LIMIT = 0.5             # seconds per call of an AST mutant, at most,
_MUTANT_FACTOR = 20             # and at most this many times the original's call on the same input,
_MUTANT_FLOOR = 0.05            # but never less: a mutant that loops was 0.5 s a candidate (boolean: 120 s)
_DEFAULT_BUDGET = 60.0
_perf, _monotonic = time.perf_counter, time.monotonic


class CallTimeout(BaseException):
    """Raised in a call that overran its limit; a BaseException so `except Exception` does not catch it."""


class TargetError(Exception):
    """The target could not be found as a callable function."""


# The target is called from a frame whose globals are a throwaway dict: a function that writes into its
# caller's globals (docopt-ng's "magic" sets `arguments` there) touches that, not this watched module.
_invoke = eval("lambda fn, args, kwargs: fn(*args, **kwargs)", {"__name__": "coderun_differential_call"})


def run(payload, root):
    """What the target did on the payload's inputs (see the module docstring)."""
    # The copy, the temporary folder and HOME differ between sandboxes (a worker's HOME is its own folder).
    set_roots([root, tempfile.gettempdir(), os.environ.get("HOME", "")])
    target = payload.get("target") or {}
    try:
        # A sample's def may sit on other lines than the original's (decorators added or dropped): checked,
        # only the file and the name must match; exploring the original, its lines must too.
        fn, method = resolve(target, root, lines=payload.get("mode") != "check")
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

def resolve(target, root, lines=True):
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
    fn = _unwrap(_accessor(raw, target) if isinstance(raw, property) else raw, name)
    if fn is None:
        raise TargetError(f"{qualname} is not a function named {name} once unwrapped ({type(raw).__name__})")
    code = fn.__code__
    first, lineno = int(target.get("first") or 0), int(target.get("lineno") or 0)
    if os.path.realpath(code.co_filename) != path or lines and not first <= code.co_firstlineno <= lineno:
        raise TargetError(f"{qualname} was found at {code.co_filename}:{code.co_firstlineno}, "
                          f"not at {target.get('file')}:{first}-{lineno}")
    return fn, isinstance(holder, type) and not isinstance(raw, staticmethod)


def _member(holder, part, qualname):
    found = vars(holder).get(part, _MISSING)
    if found is _MISSING and part.startswith("__") and not part.endswith("__") and isinstance(holder, type):
        found = vars(holder).get(f"_{holder.__name__.lstrip('_')}{part}", _MISSING)  # a private name, mangled
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


def _accessor(prop, target):
    """The getter, setter or deleter of a property that is the target: the one defined nearest its def line
    (a sample's lines may have moved a little, the accessors are apart by their bodies)."""
    lineno = int(target.get("lineno") or 0)
    found = [fn for fn in (prop.fget, prop.fset, prop.fdel) if hasattr(fn, "__code__")]
    return min(found, key=lambda fn: abs(fn.__code__.co_firstlineno - lineno)) if found else None


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
            value = _invoke(fn, args, kwargs)
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


# -- explore ------------------------------------------------------------------------

def _reads_clock(text):
    """Whether the input's objects hold a float that reads like this machine's clock (a TTL cache's expiry
    times): the original then behaves by when it is called, and such an input cannot be kept. Looks through
    containers, __dict__ and __slots__ (a repr would hide them), within bounds."""
    try:
        args, kwargs = load_call(text)
    except Exception:  # noqa: BLE001  (unloadable: the host drops it anyway)
        return False
    wall, mono = time.time(), time.monotonic()
    todo, seen = [(args, 0), (kwargs, 0)], set()
    while todo and len(seen) < 5000:
        value, depth = todo.pop()
        if isinstance(value, float):
            if abs(value - wall) < 30 * 86400 or (value > 1000 and abs(value - mono) < 6 * 3600):
                return True
            continue
        if id(value) in seen or depth > 8 or isinstance(value, (str, bytes, int, type(None))):
            continue
        seen.add(id(value))
        items = []
        if isinstance(value, dict):
            items = list(value.keys()) + list(value.values())
        elif isinstance(value, (list, tuple, set, frozenset)):
            items = list(value)
        else:
            items = list((getattr(value, "__dict__", None) or {}).values())
            for cls in type(value).__mro__:
                for name in getattr(cls, "__slots__", ()) or ():
                    if isinstance(name, str) and hasattr(value, name):
                        with contextlib.suppress(Exception):
                            items.append(getattr(value, name))
        todo.extend((v, depth + 1) for v in items)
    return False


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
                     "arcs": sorted([a, b] for a, b in arcs), "kills": [], "clock": _reads_clock(text)})
    mutants, about = _build_mutants(fn, target, root, rng, int(options.get("mutants", 20)))
    if stopped is None:
        stopped = _kills(mutants, kept, clock)
    out = {"mode": "explore", "mutants": len(mutants), "mutated": about["mutated"], "candidates": kept,
           "dropped": dropped}
    if about.get("skipped"):
        out["mutants_skipped"] = about["skipped"]
    if stopped is not None:
        out["stopped"] = stopped
    return out


def _kills(mutants, kept, clock):
    """Each candidate's `kills`: the mutants whose obs on it differs from the original's (seconds aside; a
    mutant that overruns its limit, a timeout, is told apart). Returns a `stopped` dict when the budget ran out."""
    for m, mutant in enumerate(mutants):
        for cand in kept:
            left = clock.left()
            if left <= 0:
                return clock.stopped(m, "mutants")
            obs = observe(mutant, cand["input"], min(mutant_limit(cand), clock.limit, left))
            if _essence(obs) != _essence(cand["obs"]):
                cand["kills"].append(m)
    return None


def mutant_limit(cand):
    """Seconds a mutant's call on this candidate may take: a small multiple of the original's on it."""
    took = max(float(cand["obs"].get("seconds") or 0.0), float(cand["again"].get("seconds") or 0.0))
    return min(_MUTANT_LIMIT, max(_MUTANT_FLOOR, _MUTANT_FACTOR * took))


def _essence(obs):
    return json.dumps([obs.get("outcome"), obs.get("value"), obs.get("args"), obs.get("kwargs")], sort_keys=True)
