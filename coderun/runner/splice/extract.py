"""Preparing a sample: the code part of a model's answer, recovered, untabbed and parsed (steps 1-3 of the
splicer's docstring)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from tree_sitter import Node

from coderun.runner.fences import python_blocks
from coderun.runner.splice.nodes import Found, find_in_sample, multiline_string_rows, parse_tree
from coderun.runner.splice.pyparse import ast_defines, parses, syntax_message
from coderun.runner.splice.result import SampleSyntaxError, SpliceErrorKind

_CODE_START = re.compile(r"^(async\s+def\s|def\s|class\s|@|import\s|from\s|#)")


def fenced_blocks(text: str, name: str) -> list[str]:
    """Python blocks of a markdown answer, those that define `name` first."""
    blocks = python_blocks(text)
    pattern = _def_pattern(name)
    # a cheap pre-filter for the order; the definition is found by parsing later
    return sorted(blocks, key=lambda block: pattern.search(block) is None)


def extract_code(text: str, name: str, python: tuple[int, int] | None = None) -> tuple[str, list[str]]:
    """The code part of a model's answer, and notes on what was dropped.

    Code that parses as it is (fences inside a docstring included) is taken whole; otherwise the first
    markdown block that yields a definition of `name`; otherwise the text without the leading prose and
    trailing lines that do not parse. Raises SampleSyntaxError when nothing parses.
    """
    text = _dedent_first(text.replace("\r\n", "\n").replace("\r", "\n"))
    if not text.strip():
        raise SampleSyntaxError(SpliceErrorKind.SYNTAX, "sample is empty")
    tree = parses(text, python)
    if tree is not None and ast_defines(tree, name):
        return text, []
    copied = _indent_first_as_next(text)
    if copied is not None and (tree := parses(copied, python)) is not None and ast_defines(tree, name):
        return copied, ["indented the first line as the lines after it (a definition copied from its column)"]
    blocks = fenced_blocks(text, name)
    for block in blocks:
        try:
            code, notes = _recover(_dedent_first(block), name, python)
        except SampleSyntaxError:
            continue
        parsed = parses(code, python)
        if parsed is not None and ast_defines(parsed, name):
            return code, ["took the code from a fenced markdown block", *notes]
    if blocks and any(parses(_dedent_first(b), python) is not None for b in blocks):
        raise SampleSyntaxError(SpliceErrorKind.MISSING_DEFINITION,
                                f"no fenced code block defines {name!r}")
    return _recover(text, name, python)


def _dedent_first(code: str) -> str:
    """Dedent a sample whose first line is indented (a method copied out of its class)."""
    lines = code.split("\n")
    first = next((ln for ln in lines if ln.strip()), "")
    prefix = first[: len(first) - len(first.lstrip())]
    if not prefix:
        return code
    return "\n".join(ln[len(prefix):] if ln.startswith(prefix) else ln for ln in lines)


def _indent_first_as_next(code: str) -> str | None:
    """`@classmethod\n    @other\n    def f(cls):` -- a decorated method copied from the column where it
    starts, so that only its first line lost the indentation -- dedented as a whole; None when the
    first line is not like that."""
    lines = code.split("\n")
    rows = [i for i, ln in enumerate(lines) if ln.strip()]
    if len(rows) < 2 or lines[rows[0]][:1].isspace() or not lines[rows[1]][:1].isspace():
        return None
    second = lines[rows[1]]
    lines[rows[0]] = second[: len(second) - len(second.lstrip())] + lines[rows[0]]
    return _dedent_first("\n".join(lines))


def _line_starts(code: str, predicate) -> list[int]:
    offsets, pos = [], 0
    for line in code.split("\n"):
        if predicate(line):
            offsets.append(pos)
        pos += len(line) + 1
    return offsets


def _def_pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"^[ \t]*(async[ \t]+)?def[ \t]+{re.escape(name)}[ \t]*\(", re.MULTILINE)


def _recover(code: str, name: str, python: tuple[int, int] | None) -> tuple[str, list[str]]:
    """The largest part of `code` that parses and defines `name`: drop leading prose, trailing junk.

    Cuts are tried only at line starts: before the first `def name(` line (where code may start) and
    after it at column 0 (where a top-level statement may start), so the function itself is never cut.
    """
    tree = parses(code, python)
    if tree is not None:
        return code, []
    failure = SampleSyntaxError(SpliceErrorKind.SYNTAX,
                                f"sample does not parse: {syntax_message(code, python)}")
    first_def = _def_pattern(name).search(code)
    if first_def is None:
        raise failure
    starts = [0] + [s for s in _line_starts(code, lambda ln: bool(_CODE_START.match(ln.lstrip())))
                    if 0 < s <= first_def.start()]
    for start in starts:
        part = _dedent_first(code[start:])
        def_at = _def_pattern(name).search(part)
        ends = [len(part)] + sorted((e for e in _line_starts(part, lambda ln: bool(ln[:1].strip()))
                                     if def_at is not None and e > def_at.start()), reverse=True)
        for end in ends:
            tree = parses(part[:end], python)
            if tree is not None and ast_defines(tree, name):
                notes = []
                if start:
                    notes.append(f"dropped {code[:start].count(chr(10))} leading line(s) that do not parse")
                if end < len(part):
                    notes.append(f"dropped {part[end:].rstrip().count(chr(10)) + 1} trailing line(s) "
                                 "that do not parse")
                return part[:end].rstrip() + "\n", notes
    raise failure


def _expand_indent_tabs(code: str, tabsize: int) -> str:
    rows = multiline_string_rows(parse_tree(code.encode()))
    lines = code.split("\n")
    for i, line in enumerate(lines):
        if i in rows:
            continue
        body = line.lstrip(" \t")
        indent = line[: len(line) - len(body)]
        if "\t" in indent:
            lines[i] = indent.expandtabs(tabsize) + body
    return "\n".join(lines)


def _untab(code: str, tree: ast.Module, python: tuple[int, int] | None) -> str:
    """Spaces for tabs in indentation, keeping the syntax tree (4 per tab when possible, else 8)."""
    if "\t" not in code:
        return code
    reference = ast.dump(tree)
    for tabsize in (4, 8):
        candidate = _expand_indent_tabs(code, tabsize)
        parsed = parses(candidate, python)
        if parsed is not None and ast.dump(parsed) == reference:
            return candidate
    return code


@dataclass
class Prepared:
    code: bytes
    root: Node
    found: Found
    notes: list[str] = field(default_factory=list)


def prepare_sample(sample_code: str, qualname: str, python: tuple[int, int] | None = None) -> Prepared:
    """Extract, recover, normalise and parse a sample; raises SampleSyntaxError when it cannot be used."""
    name = qualname.split(".")[-1]
    code, notes = extract_code(sample_code, name, python)
    tree = parses(code, python)
    assert tree is not None  # extract_code returns parseable code
    code = _untab(code, tree, python)
    data = code.encode("utf-8")
    root = parse_tree(data)
    found = find_in_sample(root, qualname)
    if found is None:
        raise SampleSyntaxError(SpliceErrorKind.MISSING_DEFINITION,
                                f"sample has no definition of {name!r}", notes)
    return Prepared(data, root, found, notes)
