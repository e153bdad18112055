"""Which distribution provides an import name: `yaml` is PyYAML's, `rest_framework_api_key`
djangorestframework-api-key's, `magic` python-magic's. A draft adds those of what a project imports and
nothing declares (coderun.draft.install); a build that fails on a missing module names the one to add
(diagnose.py).

The names come from pigar's database (BSD-3-Clause, refreshed with each pigar release): the top-level module
names of every distribution on PyPI, read from their files. Many distributions ship a module of the same name
(twenty ship a `magic`), so a name is resolved in this order: a distribution the project already declares;
the only one; else the one with the most releases on the package index (the project people use, not a fork
or a squatter: attrs over attr, PyJWT over jwt), among at most a dozen of those whose name holds the import
name (scancode-toolkit ships a vendored `attr` too). A name that only vendored copies ship (sixteen projects
ship a `pkg_resources`, setuptools is not among them) is left as it is: the index then says whether a
distribution of that name exists.
"""

from __future__ import annotations

import functools
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path

from pigar.db import Database

_MAX_RANKED = 12


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@functools.cache
def _connection() -> sqlite3.Connection | None:
    path = Path(Database._DB_PATH)
    if not path.is_file():
        return None
    return sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, check_same_thread=False)


@functools.cache
def providers(module: str) -> tuple[str, ...]:
    """Every distribution that ships top-level `module`, as the database names them."""
    conn = _connection()
    if conn is None:
        return ()
    rows = conn.execute("SELECT d.name FROM top_level_module_names t JOIN distributions d ON d.id = "
                        "t.distribution_id WHERE t.name = ?", (module,)).fetchall()
    return tuple(r[0] for r in rows)


def distribution_for(module: str, declared: set[str], release_count: Callable[[str], int]) -> str:
    """The distribution to install for top-level `module`; `declared` holds normalized names the project
    declares, `release_count` asks the index how many releases a distribution has."""
    found = providers(module)
    for name in (module, *found):
        if normalize(name) in declared:
            return name
    if not found:
        return module
    if len(found) == 1:
        return found[0]
    key = module.lower().replace("_", "")
    named = [n for n in found if key in re.sub(r"[-_.]", "", n.lower())]  # a vendored copy's name does not say it
    if not named:  # only copies: the real provider is not a PyPI project of its own (setuptools' pkg_resources)
        return module
    ranked = sorted(named, key=lambda n: (normalize(n) != normalize(module), len(n), n))[:_MAX_RANKED]
    return max(ranked, key=lambda n: (release_count(n), -ranked.index(n)))


def provided_by(module: str, distributions: set[str]) -> bool:
    """Whether one of `distributions` (normalized names) ships top-level `module`."""
    return normalize(module) in distributions or any(normalize(d) in distributions for d in providers(module))
