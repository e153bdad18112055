"""Which Python a draft runs the tests with: requires-python, classifiers, tox and CI versions, the source's date
and the interpreters on PATH."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import yaml
from packaging.specifiers import InvalidSpecifier, SpecifierSet

from coderun.draft.configfiles import read_cfg
from coderun.draft.context import DraftContext

# Minor versions of Python 3 a draft may choose from, oldest first. coderun's harness (the reporter plugin and
# the worker inside the project's interpreter) needs 3.7 (`from __future__ import annotations`).
PY_MINORS = tuple(range(7, 14))
# The day each Python 3 minor release came out.
_PY_RELEASED = {6: dt.date(2016, 12, 23), 7: dt.date(2018, 6, 27), 8: dt.date(2019, 10, 14),
                9: dt.date(2020, 10, 5), 10: dt.date(2021, 10, 4), 11: dt.date(2022, 10, 24),
                12: dt.date(2023, 10, 2), 13: dt.date(2024, 10, 7)}


_PRERELEASE = re.compile(r"\d(\.\d+)*[-.]?(alpha|beta|rc|dev|a\d|b\d)", re.I)


def _braces(text: str) -> list[str]:
    """tox's {a,b} expansion of an envlist entry."""
    m = re.search(r"\{([^{}]*)\}", text)
    if not m:
        return [text]
    return [x for alt in m.group(1).split(",") for x in _braces(text[:m.start()] + alt.strip() + text[m.end():])]


def _ci_versions(tree: Path) -> tuple[set[int], list[str]]:
    found: set[int] = set()
    files = [*sorted((tree / ".github" / "workflows").glob("*.y*ml")), tree / ".travis.yml",
             tree / ".gitlab-ci.yml", tree / "azure-pipelines.yml", tree / "appveyor.yml"]
    used = []
    for f in files:
        if not f.is_file():
            continue
        try:
            data = yaml.safe_load(f.read_text(encoding="utf-8", errors="replace"))
        except yaml.YAMLError:
            continue
        before = set(found)
        _walk_ci(data, found, key="")
        if found - before:
            used.append(f.relative_to(tree).as_posix())
    return found, used


def _walk_ci(node: object, found: set[int], key: str) -> None:
    if isinstance(node, dict):
        for k, v in node.items():
            _walk_ci(v, found, str(k).lower())
    elif isinstance(node, list):
        for v in node:
            _walk_ci(v, found, key)
    elif key in ("python-version", "python_version", "python-versions", "python", "pythonversion", "image",
                 "toxenv", "tox-env", "version"):
        text = f"{node:.2f}".rstrip("0") if isinstance(node, float) else str(node)
        if _PRERELEASE.search(text):  # "3.12.0-alpha.1", "3.13-dev": not a version the project supports yet
            return
        for m in re.finditer(r"(?:^|[^\d.])(?:py|python:?)?3\.?(\d{1,2})(?![\d])", text):
            if key in ("image", "toxenv", "tox-env") and not re.search(r"py|python", text):
                continue
            found.add(int(m.group(1)))



class PythonGuess(DraftContext):
    def python_version(self) -> str:
        if self.python:
            self.note("python", f"{self.python}: given with --python")
            return self.python
        listed: set[int] = set()
        for c in self.meta.classifiers:
            m = re.fullmatch(r"Programming Language :: Python :: 3\.(\d+)", c.strip())
            if m:
                listed.add(int(m.group(1)))
        evidence = [f"classifiers list 3.{min(listed)}..3.{max(listed)}"] if listed else []
        tox = self._tox_versions()
        if tox:
            evidence.append(f"tox envlist has 3.{min(tox)}..3.{max(tox)}")
        ci, ci_files = _ci_versions(self.tree)
        if ci:
            evidence.append(f"{', '.join(ci_files)} test{'s' if len(ci_files) == 1 else ''} "
                            f"3.{min(ci)}..3.{max(ci)}")
        explicit = (listed | tox | ci) & set(PY_MINORS)
        candidates = [m for m in PY_MINORS if self._allowed(m)]
        if self.meta.requires_python:
            evidence.insert(0, f"{self.meta.requires_python[0][1]} {self.meta.requires_python[0][0]!r}")
        chosen_from = [m for m in candidates if m in explicit] or candidates or sorted(explicit) or [11]
        if not candidates and not explicit:
            self.warnings.append(f"the project declares no Python from 3.{PY_MINORS[0]} on, the oldest coderun can "
                                 f"run tests in; the draft says 3.{chosen_from[0]}, which it may not support")
        if self.as_of:  # a Python released after the source could not have been tested with it
            day = self.as_of[0]
            of_its_time = [m for m in chosen_from if _PY_RELEASED.get(m, dt.date.max) <= day]
            later = sorted(set(chosen_from) - set(of_its_time))
            if later and of_its_time:
                evidence.append(f"3.{later[0]} and later came out after the source's date ({day})")
                chosen_from = of_its_time
            elif later:  # older than every Python 3 here: the oldest is the nearest to its time
                evidence.append(f"every allowed version came out after the source's date ({day})")
                chosen_from = sorted(m for m in chosen_from if self.probes.has_python(m))[:1] or chosen_from[:1]
        installed = next((m for m in sorted(chosen_from, reverse=True) if self.probes.has_python(m)), None)
        pick = installed if installed is not None else max(chosen_from)
        why = "the highest of these with an interpreter on PATH" if installed is not None else \
            "the highest of these (no interpreter for any of them on PATH; the current one will be used)"
        self.note("python", (f"{'; '.join(evidence)}: " if evidence else "nothing declares a Python version: ")
                  + f"3.{pick} is {why}")
        return f"3.{pick}"

    def _allowed(self, minor: int) -> bool:
        for spec, _origin in self.meta.requires_python[:1]:
            try:
                s = SpecifierSet(spec.replace(" ", ""))
            except InvalidSpecifier:
                return True
            if not any(s.contains(f"3.{minor}{patch}", prereleases=True) for patch in ("", ".99")):
                return False
        return True

    def _tox_versions(self) -> set[int]:
        cfg = read_cfg(self.tree / "tox.ini") if (self.tree / "tox.ini").is_file() else None
        if cfg is None:
            return set()
        found = set()
        envlist = cfg.get("tox", "envlist", fallback="")
        for part in re.split(r"[\s,]+(?![^{]*\})", envlist):
            for env in _braces(part):
                for factor in env.split("-"):
                    m = re.fullmatch(r"py3\.?(\d{1,2})", factor.strip())
                    if m:
                        found.add(int(m.group(1)))
        return found
