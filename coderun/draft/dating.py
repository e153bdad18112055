"""What a tree says about its own date: the version it declares (so the index can tell when that release was
uploaded), the changelog's date of that version, and the newest exact pins among its requirements (it cannot
be older than what it pins). Asking the index and git is make.py's; this reads files only."""

from __future__ import annotations

import ast
import datetime as dt
import re
from dataclasses import dataclass
from pathlib import Path

from coderun.draft.configfiles import read_cfg, read_toml
from coderun.draft.metadata import Metadata
from coderun.draft.requirements import read_requirements_file, test_requirement_files


@dataclass(frozen=True)
class Dated:
    """A day and the evidence for it, as the draft's comment says it."""

    day: dt.date
    why: str


_VERSION_FILES = ("__init__.py", "_version.py", "version.py", "__about__.py", "__version__.py", "about.py")


def declared_versions(tree: Path, meta: Metadata, packages: list[str]) -> list[tuple[str, str]]:
    """(version, where it is written) for every static version the tree declares, best first."""
    found: list[tuple[str, str]] = []
    if meta.version:
        found.append((meta.version, "PKG-INFO"))
    project = read_toml(tree / "pyproject.toml")
    for table, where in ((project.get("project", {}), "pyproject.toml"),
                         (project.get("tool", {}).get("poetry", {}), "pyproject.toml [tool.poetry]")):
        if isinstance(table.get("version"), str):
            found.append((table["version"], where))
    cfg = read_cfg(tree / "setup.cfg") if (tree / "setup.cfg").is_file() else None
    cfg_version = cfg.get("metadata", "version", fallback="") if cfg is not None else ""
    if re.fullmatch(r"[\w.+!-]+", cfg_version or "-"):
        found.append((cfg_version, "setup.cfg"))
    setup = _assigned(tree / "setup.py", "version")
    if setup:
        found.append((setup, "setup.py"))
    for pkg in packages:
        for name in _VERSION_FILES:
            value = _assigned(tree / pkg / name, "__version__") or _assigned(tree / pkg / name, "version")
            if value:
                found.append((value, f"{pkg}/{name}"))
    return [(v, w) for v, w in dict.fromkeys(found) if re.match(r"^v?\d+(\.\d+)*", v)]


def _assigned(path: Path, name: str) -> str | None:
    """A string literal assigned to `name` at module level, or passed as setup(name=...)."""
    if not path.is_file():
        return None
    try:
        module = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(module):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets) \
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return node.value.value
        if isinstance(node, ast.keyword) and node.arg == name and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str) and path.name == "setup.py":
            return node.value.value
    return None


def tag_version(tag: str) -> str | None:
    """The version a release tag names: v1.2.3, 1.2.3, release-1.2.3, name-1.2.3."""
    m = re.search(r"(?:^|[-_/v])v?(\d+(?:\.\d+)+(?:[.-]?(?:a|b|rc|post|dev)\d*)?)$", tag)
    return m.group(1) if m else None


_MONTHS = {m: i for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct",
                                        "nov", "dec"), start=1)}
_ISO = re.compile(r"\b(19[89]\d|20\d\d)-(\d\d)-(\d\d)\b")
_WORDS = re.compile(r"\b([A-Z][a-z]{2})[a-z]*\.? (\d{1,2})(?:st|nd|rd|th)?,? (20\d\d)\b")
_CHANGELOGS = re.compile(r"^(change(s|log)|history|news|release[-_ ]?notes)(\.\w+)?$", re.I)


def _dates(line: str) -> list[dt.date]:
    out = []
    for y, m, d in _ISO.findall(line):
        out.append(_day(int(y), int(m), int(d)))
    for mon, d, y in _WORDS.findall(line):
        if mon.lower() in _MONTHS:
            out.append(_day(int(y), _MONTHS[mon.lower()], int(d)))
    return [d for d in out if d is not None]


def _day(y: int, m: int, d: int) -> dt.date | None:
    try:
        return dt.date(y, m, d)
    except ValueError:
        return None


def changelog_date(tree: Path, version: str | None) -> Dated | None:
    """The changelog's date for `version` (on its heading line or the two after), else its newest date."""
    for path in sorted(p for p in [*tree.iterdir(), *(tree / "docs").glob("*")] if p.is_file()
                       and _CHANGELOGS.match(p.name)) if tree.is_dir() else []:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        rel = path.relative_to(tree).as_posix()
        if version:
            pattern = re.compile(rf"(^|[^\d.]){re.escape(version.lstrip('v'))}([^\d.]|\.?$)")
            for i, line in enumerate(lines):
                if pattern.search(line):
                    days = [d for ln in lines[i:i + 3] for d in _dates(ln)]
                    if days:
                        return Dated(days[0], f"{rel} dates version {version} {days[0]}")
        days = [d for line in lines[:80] for d in _dates(line) if d <= dt.date.today()]
        if days:
            return Dated(max(days), f"the newest date in {rel} ({max(days)})")
    return None


def exact_pins(tree: Path, meta: Metadata) -> list[tuple[str, str]]:
    """(distribution, version) of every `name==version` requirement the project declares."""
    reqs = [*(meta.dependencies or []), *meta.tests_require, *[r for v in meta.extras.values() for r in v]]
    for rel in [*test_requirement_files(tree), *meta.read_files, "requirements.txt"]:
        reqs += read_requirements_file(tree, rel)[0]
    out = []
    for r in reqs:
        m = re.match(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*===?\s*([\w.+!-]+)\s*(;.*)?$", r)
        if m and "*" not in m.group(2):
            out.append((m.group(1), m.group(2)))
    return list(dict.fromkeys(out))
