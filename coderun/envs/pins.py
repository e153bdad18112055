"""Requirement strings as an environment takes them: the distribution one names, and the pins coderun's harness
cannot run with, which a draft replaces (coderun.draft) and a failed build names (diagnose.py)."""

from __future__ import annotations

import re

from packaging.requirements import InvalidRequirement, Requirement


def dist_key(req: str) -> str:
    """The normalized distribution name of a requirement string ("" when it is not one)."""
    m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
    return re.sub(r"[-_.]+", "-", m.group(1)).lower() if m else ""


# What coderun's harness runs with (resolve.TOOLING): a pin that excludes every such release is
# replaced. Releases of each series that the check tries.
_HARNESS = {"pytest": ("pytest>=4.6", "coderun runs the tests with pytest 4.6 or later",
                       ("4.6.11", "5.4.3", "6.2.5", "7.4.4", "8.3.5")),
            "coverage": ("coverage>=5", "coderun maps tests to functions with coverage 5 or later",
                         ("5.5", "6.5.0", "7.6.1")),
            "pytest-cov": ("pytest-cov", "its old releases need a coverage older than coderun's", ())}


def harness_compatible(req: str) -> tuple[str, str | None]:
    """(`req`, None), or a requirement coderun's harness can run with and why `req` was replaced."""
    key = dist_key(req)
    if key not in _HARNESS:
        return req, None
    replacement, why, series = _HARNESS[key]
    try:
        spec = Requirement(req).specifier
    except InvalidRequirement:
        return req, None
    if not str(spec):
        return req, None
    if series and any(spec.contains(v) for v in series):
        return req, None
    return replacement, why
