"""coderun_recorder: a pytest plugin that records the calls of target functions while the tests run.

Loaded with `-p coderun_recorder`; configured by the environment variable CODERUN_RECORD, the path of a JSON
spec (removed from os.environ at import, so the tests never see it):
    {"targets": [target...], "task_ids": [...same order...], "max_calls": 20, "max_bytes": 65536,
     "out": "/path/out.jsonl", "nodeids": [...the tests to keep after collection; optional]}
A target is {"file" (relative to pytest's cwd), "qualname", "name", "lineno", "first", "end_lineno"}; a code
object is the target's when its name is the target's, its first line is between `first` and `lineno` and its
file is the target's file.

A tracer (sys.settrace + threading.settrace) looks at every call once per code object and follows only the
targets' frames. At the call, the arguments are pickled (`dump_call`: a snapshot before the call); at the
return, what the call did is written down (`obs`: outcome, value, arguments after the call, seconds). At most
`max_calls` distinct inputs (told apart by the digest of their canonical form) are captured per task; what is
not captured is counted: unpicklable, too_large (over max_bytes), generator (generator and coroutine
functions), over_limit (calls after the limit), error (a value whose form could not be made).
A repeated input is compared with its first capture and written again when the call did something else, so
the host sees nondeterminism within one run too.

Output, JSON lines in `out`, written as calls return (a killed run leaves what it had) and at the end:
    {"task_id", "input", "key", "obs"}       per captured call (and per differing repeat)
    {"task_id", "counts": {"calls", "captured", "repeated", "unpicklable", "too_large", "generator",
                           "over_limit", "error"}}                                   per task, at the end
    {"error": text}                           when the tracer broke (it removes itself) or was replaced
The test run never fails because of the recorder.

Standalone: stdlib and pytest only, Python 3.7.
"""

import atexit
import dis
import inspect
import json
import os
import sys
import tempfile
import threading
import time
import traceback

import coderun_values as values

_SPEC_PATH = os.environ.pop("CODERUN_RECORD", None)
_NOT_PLAIN = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE
_RETURN_OPS = frozenset(dis.opmap[n] for n in ("RETURN_VALUE", "RETURN_CONST") if n in dis.opmap)
# Python 3.7 leaves a try/finally or with block through END_FINALLY whether it returns or raises.
_AMBIGUOUS_OPS = frozenset(dis.opmap[n] for n in ("END_FINALLY",) if n in dis.opmap)
_COUNTS = ("calls", "captured", "repeated", "unpicklable", "too_large", "generator", "over_limit", "error")
_MAX_REPEATS = 10           # repeats of a captured input compared with it, per captured input
_EXAMINED_PER_CALL = 50     # calls examined per task (a form made) per captured call allowed


class _Task:
    """What is recorded for one task: its counts and its captured inputs (key -> first obs)."""

    def __init__(self, task_id, max_calls):
        self.task_id = task_id
        self.max_calls = max_calls
        self.counts = dict.fromkeys(_COUNTS, 0)
        self.first_obs = {}         # key -> obs without seconds, of the first capture
        self.repeats = {}           # key -> repeats compared so far
        self.refused = {}           # key -> why it could not be captured (counted again at every call)
        self.gen_first = {}         # code -> smallest f_lasti seen at a call: a generator's first entry

    def full(self):
        return (len(self.first_obs) >= self.max_calls
                or self.counts["calls"] > _EXAMINED_PER_CALL * self.max_calls)


class _Call:
    """One followed frame: the argument objects taken at the call, its input and key, the last exception."""

    __slots__ = ("task", "args", "kwargs", "key", "text", "exc", "started")

    def __init__(self, task, args, kwargs, key, text):
        self.task = task
        self.args = args
        self.kwargs = kwargs
        self.key = key
        self.text = text            # the dump_call input, or None for a repeat
        self.exc = None
        self.started = time.perf_counter()


class Recorder:
    def __init__(self, spec):
        self.max_bytes = int(spec.get("max_bytes", 65536))
        max_calls = int(spec.get("max_calls", 20))
        self.tasks = [_Task(t, max_calls) for t in spec["task_ids"]]
        self.out_path = spec["out"]
        self.lock = threading.Lock()
        self.decisions = {}         # code -> _Task or None
        self.realpaths = {}         # co_filename -> realpath
        self.by_name = {}           # name -> [(realpath, first, lineno, _Task)]
        root = os.getcwd()
        for target, task in zip(spec["targets"], self.tasks):  # noqa: B905 (3.7)
            where = os.path.realpath(os.path.join(root, target["file"]))
            entry = (where, int(target.get("first", target["lineno"])), int(target["lineno"]), task)
            self.by_name.setdefault(target["name"], []).append(entry)
        self.out = open(self.out_path, "w", encoding="utf-8")  # noqa: SIM115  (open for the whole run)
        self.finished = False
        self.broken = False

    # -- the tracer ------------------------------------------------------------------------------

    def install(self):
        sys.settrace(self.on_call)
        threading.settrace(self.on_call)

    def remove(self):
        sys.settrace(None)
        threading.settrace(None)

    def on_call(self, frame, event, arg):
        if event != "call" or self.broken:
            return None
        try:
            code = frame.f_code
            task = self.decisions.get(code, False)
            if task is False:
                task = self.decisions[code] = self._task_of(code)
            if task is None:
                return None
            return self._enter(task, frame)
        except Exception:
            self._break("the recorder's tracer failed at a call")
            return None

    def _task_of(self, code):
        entries = self.by_name.get(code.co_name)
        if not entries:
            return None
        real = self.realpaths.get(code.co_filename)
        if real is None:
            real = self.realpaths[code.co_filename] = os.path.realpath(code.co_filename)
        for where, first, lineno, task in entries:
            if where == real and first <= code.co_firstlineno <= lineno:
                return task
        return None

    def _enter(self, task, frame):
        code = frame.f_code
        if code.co_flags & _NOT_PLAIN:
            # Each resumption is a 'call' too; the first entry has the smallest f_lasti of its code.
            low = task.gen_first.get(code)
            if low is None or frame.f_lasti <= low:
                task.gen_first[code] = frame.f_lasti
                task.counts["calls"] += 1
                task.counts["generator"] += 1
            return None
        task.counts["calls"] += 1
        if task.full():
            task.counts["over_limit"] += 1
            return None
        try:
            args, kwargs = values.frame_call(frame)
            key = values.digest(values.call_form(args, kwargs))
        except Exception:
            task.counts["error"] += 1
            return None
        if key in task.refused:
            task.counts[task.refused[key]] += 1
            return None
        text = None
        if key in task.first_obs:
            task.counts["repeated"] += 1
            if task.repeats.get(key, 0) >= _MAX_REPEATS:
                return None
            task.repeats[key] = task.repeats.get(key, 0) + 1
        else:
            try:
                text = values.dump_call(args, kwargs)
            except Exception:
                task.refused[key] = "unpicklable"
                task.counts["unpicklable"] += 1
                return None
            if len(text) > self.max_bytes:
                task.refused[key] = "too_large"
                task.counts["too_large"] += 1
                return None
        frame.f_trace_lines = False  # returns and exceptions are all the follower needs
        return _Follow(self, _Call(task, args, kwargs, key, text)).event

    def _leave(self, call, frame, arg):
        seconds = time.perf_counter() - call.started
        task = call.task
        obs = {"outcome": "return", "value": None}
        if self._raised(frame, arg, call):
            obs["outcome"] = "raise"
            obs["value"] = values._qualified(call.exc) if call.exc is not None else None
        else:
            obs["value"] = values.canonical(arg)
        obs["args"] = values.canonical(list(call.args))
        obs["kwargs"] = values.canonical(dict(call.kwargs))
        if call.text is None:  # a repeat: written again only when it did something else
            first = task.first_obs.get(call.key)
            if first is None or first == obs:
                return
            text = values.dump_call(call.args, call.kwargs)  # what it was called with is the same form
        else:
            if len(task.first_obs) >= task.max_calls:
                task.counts["over_limit"] += 1  # other calls filled the task while this one ran
                return
            task.first_obs[call.key] = dict(obs)
            task.counts["captured"] += 1
            text = call.text
        obs["seconds"] = round(seconds, 6)
        self._write({"task_id": task.task_id, "input": text, "key": call.key, "obs": obs})

    @staticmethod
    def _raised(frame, arg, call):
        """Whether the frame is left by an exception: its last instruction is not a return."""
        if arg is not None:
            return False
        op = frame.f_code.co_code[frame.f_lasti] if frame.f_lasti >= 0 else None
        if op in _RETURN_OPS:
            return False
        if op in _AMBIGUOUS_OPS:
            return call.exc is not None
        return True

    # -- output ----------------------------------------------------------------------------------

    def _write(self, record):
        line = json.dumps(record, sort_keys=True) + "\n"
        with self.lock:
            if not self.out.closed:
                self.out.write(line)
                self.out.flush()

    def _break(self, what):
        self.broken = True
        self.remove()
        self._write({"error": f"{what}; recording stopped:\n{traceback.format_exc()}"})

    def finish(self):
        if self.finished:
            return
        self.finished = True
        if sys.gettrace() is not None and getattr(sys.gettrace(), "__self__", None) is not self:
            self._write({"error": "the tests replaced the recorder's tracer (sys.settrace): calls after that "
                                  "were not seen"})
        self.remove()
        for task in self.tasks:
            self._write({"task_id": task.task_id, "counts": dict(task.counts)})
        with self.lock:
            self.out.close()


class _Follow:
    """The local tracer of one followed frame."""

    __slots__ = ("recorder", "call")

    def __init__(self, recorder, call):
        self.recorder = recorder
        self.call = call

    def event(self, frame, event, arg):
        try:
            if event == "exception":
                self.call.exc = arg[0]
            elif event == "return":
                self.recorder._leave(self.call, frame, arg)
        except Exception:
            self.call.task.counts["error"] += 1
        return self.event


_RECORDER = None
_WANTED = None  # the spec's "nodeids" (a set), when it names the tests to keep


def _start():
    global _RECORDER, _WANTED
    if _SPEC_PATH is None or _RECORDER is not None:
        return
    try:
        with open(_SPEC_PATH, encoding="utf-8") as fh:
            spec = json.load(fh)
        if spec.get("nodeids") is not None:
            _WANTED = set(spec["nodeids"])
        values.set_roots([os.getcwd(), tempfile.gettempdir()])
        _RECORDER = Recorder(spec)
    except Exception:
        sys.stderr.write("coderun_recorder: not recording:\n" + traceback.format_exc())
        return
    atexit.register(_finish)
    _RECORDER.install()


def _finish():
    if _RECORDER is not None:
        try:
            _RECORDER.finish()
        except Exception:
            sys.stderr.write("coderun_recorder: cannot write the counts:\n" + traceback.format_exc())


def pytest_configure(config):
    _start()


def pytest_collection_modifyitems(session, config, items):
    """Keep the wanted tests (a wanted id without parameters keeps every parametrization). An id that does
    not collect is only not run: on the command line it would stop pytest before any test ("not found")."""
    if _WANTED is None:
        return
    kept, dropped = [], []
    for item in items:
        wanted = item.nodeid in _WANTED or item.nodeid.split("[", 1)[0] in _WANTED
        (kept if wanted else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_sessionfinish(session, exitstatus):
    _finish()
