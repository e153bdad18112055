"""From a model's output to the function that replaces the original.

Chat answers mix prose and code: the code is taken from markdown fences (```python … ```, ~~~ … ~~~, an
unterminated fence at the end of a truncated answer: `coderun.runner.fences`, which the splicer uses too),
else from the first line that starts the target function (`def name`, `async def name`, or a decorator
right before it) to the end of the indented block.
The block is kept whole (dedented): imports and helpers beside the function are the splicer's to place.

Completions continue a prompt that ends with the function header: the continuation is cut where the body
ends (the first non-blank line indented at or left of the `def`) and glued to the header.
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass
from enum import Enum

from coderun.runner.fences import PYTHON_LANGS, code_blocks


class Extraction(str, Enum):
    FENCED = "fenced"          # from a markdown code block
    PROSE = "prose"            # from a def found in plain text
    WHOLE = "whole"            # the whole answer parsed as Python
    COMPLETION = "completion"  # header + continuation
    NONE = "none"              # nothing that looks like the function


@dataclass(frozen=True)
class Extracted:
    code: str
    how: Extraction


def extract_code(answer: str, name: str) -> Extracted:
    """The target function `name` as written in a chat answer (empty code when there is none)."""
    blocks = code_blocks(answer)
    candidates = [b for lang, b in blocks if lang in PYTHON_LANGS] or [b for _, b in blocks]
    if candidates:
        best = next((b for b in candidates if _defines(b, name)), candidates[0])
        return Extracted(_dedented(best), Extraction.FENCED)
    if _parses(answer) and _defines(answer, name):
        return Extracted(_dedented(answer), Extraction.WHOLE)
    found = _from_prose(answer, name)
    if found:
        return Extracted(found, Extraction.PROSE)
    return Extracted("", Extraction.NONE)


def _def_pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"^([ \t]*)(?:async[ \t]+)?def[ \t]+{re.escape(name)}[ \t]*\(", re.M)


def _defines(code: str, name: str) -> bool:
    return bool(_def_pattern(name).search(code))


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return True


def _from_prose(text: str, name: str) -> str:
    """The def of `name` (with decorators just above it) up to the end of its indented block."""
    m = _def_pattern(name).search(text)
    if not m:
        return ""
    lines = text[: m.start()].splitlines()
    start = len(lines)
    while start > 0 and lines[start - 1].strip().startswith("@"):
        start -= 1
    head = "\n".join(lines[start:])
    tail = text[m.start():].splitlines()
    body = [tail[0]]
    indent = len(m.group(1))
    for line in tail[1:]:
        if line.strip() and _indent(line) <= indent and not body[-1].rstrip().endswith(("(", ",", "\\")):
            break
        body.append(line)
    return textwrap.dedent(((head + "\n") if head else "") + "\n".join(body)).rstrip() + "\n"


def _dedented(code: str) -> str:
    return textwrap.dedent(code).strip("\n") + "\n"


def _indent(line: str) -> int:
    return len(line.expandtabs(4)) - len(line.expandtabs(4).lstrip())


def cut_completion(completion: str, def_indent: int) -> str:
    """The continuation up to where the function body ends (a line at or left of the def's indent)."""
    kept: list[str] = []
    for line in completion.split("\n"):
        if line.strip() and _indent(line) <= def_indent:
            break
        kept.append(line)
    return "\n".join(kept).rstrip() + "\n"


def assemble_solution(header: str, completion: str, def_indent: int) -> str:
    """Header + cut continuation, moved to column 0: a whole function, ready to splice."""
    body = cut_completion(completion, def_indent)
    text = header if header.endswith("\n") else header + "\n"
    lines = (text + body).split("\n")
    return "\n".join(line[def_indent:] if line[:def_indent].strip() == "" else line.lstrip()
                     for line in lines).rstrip() + "\n"
