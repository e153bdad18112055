"""Whether a sample did what the original did on one input: a pure comparison of two observations.

An observation (harness/coderun_values, written in the sandbox) says how one call ended (returned, raised,
ran out of time), the canonical form of what it returned or the type it raised, and the forms of its
arguments after the call (the receiver of a method is its first argument): a correct replacement must
match all of it. Forms compare exactly except floats: equal within a relative 1e-6 (and 1e-9 absolute),
NaN equal to NaN, infinities by sign. Time taken is never compared.
"""

from __future__ import annotations

import json
import math
from typing import Any

REL_TOL = 1e-6
ABS_TOL = 1e-9
_DIFF_CHARS = 160


def disagreement(expected: dict, actual: dict) -> str | None:
    """None when `actual` (the sample's observation) matches `expected` (the original's); else what differs,
    in one line a person can read."""
    if not isinstance(actual, dict):
        return "no observation of the sample's call"
    if expected.get("outcome") != actual.get("outcome"):
        return f"the original {_ended(expected)}, the sample {_ended(actual)}"
    if not same(expected.get("value"), actual.get("value")):
        if expected.get("outcome") == "raise":
            return f"raised {actual.get('value')}, the original {expected.get('value')}"
        return f"returned {_short(actual.get('value'))}, the original {_short(expected.get('value'))}"
    for key, what in (("args", "arguments"), ("kwargs", "keyword arguments")):
        if not same(expected.get(key), actual.get(key)):
            return (f"left its {what} (receiver first for a method) as {_short(actual.get(key))}, "
                    f"the original as {_short(expected.get(key))}")
    return None


def same(a: Any, b: Any) -> bool:
    """Two canonical forms are equal as `==` would find their values (numbers across int, bool and float;
    floats within tolerance)."""
    if _is_number(a) and _is_number(b):
        if not (_is_float(a) or _is_float(b)):
            return a == b
        return _close(_number(a), _number(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is not type(b):
        return False
    return a == b


def _is_number(form: Any) -> bool:
    return isinstance(form, (int, float)) or _is_float(form)


def _number(form: Any) -> float:
    return float(form[1]) if _is_float(form) else float(form)


def _is_float(form: Any) -> bool:
    return isinstance(form, list) and len(form) == 2 and form[0] == "float" and isinstance(form[1], str)


def _close(x: float, y: float) -> bool:
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    if math.isinf(x) or math.isinf(y):
        return x == y
    return math.isclose(x, y, rel_tol=REL_TOL, abs_tol=ABS_TOL)


def _ended(obs: dict) -> str:
    outcome = obs.get("outcome")
    if outcome == "return":
        return f"returned {_short(obs.get('value'))}"
    if outcome == "raise":
        return f"raised {obs.get('value')}"
    if outcome == "timeout":
        return "ran out of time"
    return f"could not be called ({outcome})"


def _short(form: Any) -> str:
    text = json.dumps(form, ensure_ascii=False)
    return text if len(text) <= _DIFF_CHARS else text[:_DIFF_CHARS - 1] + "…"
