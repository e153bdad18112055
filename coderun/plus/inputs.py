"""The inputs of a task's differential step: what the sandbox is asked (payloads) and which inputs are kept.

At build time the original is run on its recorded calls and on inputs derived from them (`explore`); the
kept set is reduced, EvalPlus-style, to the inputs that add something: an arc of the original's body not
yet executed, a mutant of the original not yet told apart, or a result not yet seen (`reduce`). A second
run of the original on the kept inputs (`check`) confirms what it does on each; an input it does not
repeat is dropped.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from coderun.harness.coderun_values import digest
from coderun.plus.differential import disagreement
from coderun.records import Task

if TYPE_CHECKING:  # the analyzers (jedi) stay out of what `coderun eval` imports
    from coderun.analyzers.model import FunctionInfo

MAX_INPUTS = 25           # kept per task, after reduction
CALL_LIMIT = 1.0          # seconds per call of the original at build time
CHECK_BUDGET = 30.0       # seconds for the whole step when a sample is checked
EXPLORE_BUDGET = 120.0    # seconds for the whole step when the original is explored at build time
EXPLORE = {"per_input": 8, "max_candidates": 200, "mutants": 20}


def target(task: Task | FunctionInfo) -> dict[str, object]:
    """Where the function is, as the harness finds its code: the def line and the first decorator's."""
    lines = task.source.splitlines()
    at_def = next((i for i, line in enumerate(lines) if line.lstrip().startswith(("def ", "async def "))), 0)
    return {"file": task.file, "qualname": task.qualname, "name": task.name, "lineno": task.lineno,
            "first": task.lineno - at_def, "end_lineno": task.end_lineno}


def explore_payload(task_id: str, function: Task | FunctionInfo, recorded: Sequence[str]) -> str:
    seed = random.Random(task_id).randrange(2**31)  # stable per task: a rebuild derives the same inputs
    return json.dumps({"mode": "explore", "target": target(function), "inputs": list(recorded),
                       "limit": CALL_LIMIT, "budget": EXPLORE_BUDGET, "explore": {"seed": seed, **EXPLORE}})


def check_payload(target_: dict[str, object], inputs: Sequence[str], limit: float, budget: float) -> str:
    return json.dumps({"mode": "check", "target": target_, "inputs": list(inputs), "limit": limit,
                       "budget": budget})


def check_limit(expected: Sequence[dict]) -> float:
    """Seconds allowed per call of a sample: twenty times the original's slowest, within [0.5, 5]."""
    slowest = max((float(o.get("seconds") or 0.0) for o in expected), default=0.0)
    return round(min(5.0, max(0.5, 20 * slowest)), 3)


def usable(candidate: dict, clocks: tuple[float, float] | None = None) -> bool:
    """A candidate the original ended the same way on twice (a timeout or an unloadable input never is) and
    whose state holds no reading of a clock (`clocks`: this machine's wall and monotonic time now)."""
    obs, again = candidate.get("obs"), candidate.get("again")
    return (isinstance(obs, dict) and obs.get("outcome") in ("return", "raise")
            and isinstance(again, dict) and disagreement(obs, again) is None and not candidate.get("clock")
            and not holds_clock_reading(obs, clocks or (time.time(), time.monotonic())))


def holds_clock_reading(form: object, clocks: tuple[float, float]) -> bool:
    """Whether a form holds a float that reads like this machine's clock: within 30 days of the wall clock,
    or within 6 hours of the monotonic clock (and over 1000 s). Such a value (a TTL cache's expiry times, a
    timestamp) makes the input behave by when it is called: it passes twice in a row at build time and fails
    the original itself an hour later."""
    wall, mono = clocks
    if isinstance(form, list):
        if len(form) == 2 and form[0] == "float" and isinstance(form[1], str):
            try:
                v = float(form[1])
            except ValueError:
                return False
            return abs(v - wall) < 30 * 86400 or (v > 1000 and abs(v - mono) < 6 * 3600)
        return any(holds_clock_reading(x, clocks) for x in form)
    if isinstance(form, dict):
        return any(holds_clock_reading(x, clocks) for x in form.values())
    return False


def reduce(candidates: Sequence[dict], limit: int = MAX_INPUTS) -> list[int]:
    """Indexes of the candidates kept: greedily, the one adding most not yet covered (arcs of the original's
    body, mutants it kills, a result not yet seen), recorded inputs first on ties; at least one recorded
    input is kept when there is one (a call the tests really made)."""
    features = [_features(c) for c in candidates]
    covered: set[str] = set()
    kept: list[int] = []
    order = sorted(range(len(candidates)), key=lambda i: (candidates[i].get("origin") != "recorded",
                                                          len(str(candidates[i].get("input", "")))))
    while len(kept) < limit:
        best = max((i for i in order if i not in kept), key=lambda i: len(features[i] - covered), default=None)
        if best is None or not features[best] - covered:
            break
        kept.append(best)
        covered |= features[best]
    if not any(candidates[i].get("origin") == "recorded" for i in kept):
        first = next((i for i in order if candidates[i].get("origin") == "recorded"), None)
        if first is not None:
            kept = [first, *kept][:limit]
    return kept


def _features(c: dict) -> set[str]:
    obs = c.get("obs") or {}
    out = {f"arc:{a}:{b}" for a, b in (c.get("arcs") or [])}
    out |= {f"kill:{m}" for m in c.get("kills") or []}
    out.add(f"result:{obs.get('outcome')}:{digest(obs.get('value'))}")
    return out


def confirmed(expected: Sequence[dict], again: Sequence[dict] | None) -> list[bool]:
    """Per input: the confirming run of the original observed what exploring did."""
    if not again or len(again) != len(expected):
        return [False] * len(expected)
    return [disagreement(e, a) is None for e, a in zip(expected, again, strict=True)]

