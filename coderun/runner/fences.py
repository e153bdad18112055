"""Markdown code fences in a model's answer: the one extractor that generation and splicing share.

A fence opens with ``` or ~~~ (an info string such as `python` after it) and closes with the same
marker on a line of its own; an unterminated fence runs to the end of the text (a truncated answer).
"""

from __future__ import annotations

import re

_FENCE = re.compile(r"^[ \t]*(```|~~~)[ \t]*([\w+.-]*)[^\n]*\n(.*?)(?:^[ \t]*\1[ \t]*$|\Z)",
                    re.MULTILINE | re.DOTALL)

# Info strings taken for Python (an empty one too: most answers leave it out).
PYTHON_LANGS = frozenset({"", "python", "py", "python3", "py3", "pycon", "ipython"})


def code_blocks(text: str) -> list[tuple[str, str]]:
    """(language in lower case, body) of every fenced block, in order."""
    return [(m.group(2).lower(), m.group(3)) for m in _FENCE.finditer(text)]


def python_blocks(text: str) -> list[str]:
    """The bodies of the fenced blocks marked as Python (or unmarked), in order."""
    return [body for lang, body in code_blocks(text) if lang in PYTHON_LANGS]
