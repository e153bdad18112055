"""Requirement strings and files: names, pip requirements files, tox deps, and what a test run does not need."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from coderun.manifests.draft.configfiles import cfg_lines, read_cfg

# Tools a test run does not need; old pins of them are the usual reason a requirements file will not install.
NOT_FOR_TESTS = re.compile(
    r"^(black|flake8.*|isort|mypy|pylint.*|ruff|pre-commit|tox|nox|twine|wheel|sphinx.*|codespell|bandit|"
    r"pydocstyle|pycodestyle|pep8.*|pyflakes|check-manifest|docutils|readme[-_]renderer|bump2?version|"
    r"types-.*|coveralls|codecov|ipython|ipdb|pdbpp|doc8|restructuredtext[-_]lint|autopep8|yapf|"
    r"setuptools[-_]scm|build|pip-tools|mccabe|typed[-_]ast|towncrier|zest\.releaser|sphinx_rtd_theme|furo|mkdocs.*|"
    r"pytest[-_](flake8.*|pylint|mypy.*|black|isort|pycodestyle|pep8|codestyle|pydocstyle|ruff|flakes))$", re.I)


def dist_key(req: str) -> str:
    """The normalized distribution name of a requirement string ("" when it is not one)."""
    m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
    return re.sub(r"[-_.]+", "-", m.group(1)).lower() if m else ""


def valid_req(req: str) -> bool:
    try:
        Requirement(req)
    except InvalidRequirement:
        return False
    return True


def read_requirements_file(tree: Path, rel: str, seen: set[str] | None = None) -> tuple[list[str], list[str]]:
    """(requirements, left out) of a pip requirements file, following -r includes inside the tree."""
    seen = seen if seen is not None else set()
    if rel in seen or not (tree / rel).is_file():
        return [], []
    seen.add(rel)
    keep, dropped = [], []
    for raw in (tree / rel).read_text(encoding="utf-8", errors="replace").splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        inc = re.match(r"^(-r|--requirement)\s*=?\s*(\S+)", line)
        if inc:
            sub = str((Path(rel).parent / inc.group(2)).as_posix()).removeprefix("./")
            k, d = read_requirements_file(tree, sub, seen)
            keep, dropped = keep + k, dropped + d
        elif line.startswith("-") or line in (".", "./") or line.startswith((".[", "./[")):
            dropped.append(line)  # options, constraints, the project itself (installed separately)
        elif NOT_FOR_TESTS.match(dist_key(line).replace("-", "[-_]")) or NOT_FOR_TESTS.match(dist_key(line)):
            dropped.append(line)
        elif valid_req(line):
            keep.append(line)
        else:
            dropped.append(line)
    return keep, dropped


def test_requirement_files(tree: Path) -> list[str]:
    pattern = re.compile(r"^(?:(?:requirements|reqs)[-_/.]?)?(?:test|tests|testing|dev|develop|ci)"
                         r"(?:[-_.]?(?:requirements|reqs))?\.txt$", re.I)
    found = [p for p in [*tree.glob("*.txt"), *tree.glob("requirements/*.txt"), *tree.glob("tests/requirements*.txt")]
             if pattern.match(p.relative_to(tree).as_posix().replace("requirements/", "requirements-"))
             or p.relative_to(tree).as_posix() in ("tests/requirements.txt",)]
    rels = sorted(p.relative_to(tree).as_posix() for p in found)
    tests = [r for r in rels if re.search(r"test", r, re.I)]
    return tests or [r for r in rels if re.search(r"dev|ci", r, re.I)][:1]


def tox_deps(tree: Path) -> list[str]:
    cfg = read_cfg(tree / "tox.ini") if (tree / "tox.ini").is_file() else None
    if cfg is None or not cfg.has_section("testenv"):
        return []
    out = []
    for line in cfg_lines(cfg.get("testenv", "deps", fallback="")):
        if "://" in line or "{" in line.split(":")[0] and ":" not in line:
            continue
        factor = re.match(r"^[\w{},.!-]+:\s*(.+)$", line)
        line = factor.group(1) if factor and not line.startswith("-") else line
        if line.startswith("-") or "{" in line:
            continue
        if valid_req(line) and not NOT_FOR_TESTS.match(dist_key(line)):
            out.append(line)
    return out


def dedupe(reqs: Iterable[str], skip: Iterable[str] = ()) -> list[str]:
    seen = {dist_key(s) for s in skip}
    out = []
    for r in reqs:
        k = dist_key(r)
        if k and k not in seen:
            seen.add(k)
            out.append(r)
    return out
