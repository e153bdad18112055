"""A method's receiver, when the sample's signature leaves it out.

CoderEval's prompts give some methods without `self` (`def get_pattern(pattern, strip=True):` for
`Search.get_pattern(self, pattern, strip=True)`, `def gaussian(x):` for a test class's `gaussian(self, x)`).
Spliced as written, such a sample gets the instance as its first argument and fails whatever its body. When
the original is a method whose first parameter is `self` or `cls` (no `@staticmethod` on it or on the sample)
and the sample's parameters are exactly the original's others, the receiver is put back in front.
"""

from __future__ import annotations

import re

from tree_sitter import Node

from coderun.runner.splice.nodes import Found, Target, name_of, text_of

RECEIVERS = ("self", "cls")


def restore_receiver(function_code: str, target: Target, found: Found, notes: list[str]) -> str:
    """The spliced definition, with the receiver put back when the sample left it out (said in `notes`)."""
    receiver = missing_receiver(target, found)
    if not receiver:
        return function_code
    notes.append(f"added the receiver {receiver!r}: the sample's signature is the method's without it")
    return with_receiver(function_code, name_of(target.func) or "", receiver)


def missing_receiver(target: Target, found: Found) -> str | None:
    """The original's receiver when the sample's signature is the original's without it, else None."""
    if not target.classes or _static(target.outer) or _static(found.outer):
        return None
    original, sample = parameter_names(target.func), parameter_names(found.func)
    if original and original[0] in RECEIVERS and sample == original[1:]:
        return original[0]
    return None


def with_receiver(function_code: str, name: str, receiver: str) -> str:
    """`function_code` (the spliced definition) with `receiver` first in its parameter list."""
    match = re.search(rf"\bdef\s+{re.escape(name)}\s*\(", function_code)
    if match is None:
        return function_code
    rest = function_code[match.end():]
    sep = "" if rest.lstrip().startswith(")") else ", "
    return function_code[:match.end()] + receiver + sep + rest


def parameter_names(func: Node) -> list[str]:
    """The names in a def's parameter list, `*args` and `**kwargs` with their stars, `*` and `/` as such."""
    params = func.child_by_field_name("parameters")
    names = []
    for p in params.named_children if params is not None else ():
        if p.type == "comment":
            continue
        if p.type in ("default_parameter", "typed_default_parameter"):
            p = p.child_by_field_name("name") or p
        elif p.type == "typed_parameter" and p.named_children:
            p = p.named_children[0]
        names.append(text_of(p).replace(" ", ""))
    return names


def _static(outer: Node) -> bool:
    return outer.type == "decorated_definition" and any(
        "staticmethod" in text_of(d) for d in outer.named_children if d.type == "decorator")
