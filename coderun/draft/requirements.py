"""Requirement strings and files: pip requirements files, tox deps, and what a test run does not need (the
distribution a requirement names, and the pins the harness cannot run with: coderun.envs.pins)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import yaml
from packaging.requirements import InvalidRequirement, Requirement

from coderun.draft.configfiles import cfg_lines, read_cfg
from coderun.envs.pins import dist_key

# Tools a test run does not need; old pins of them are the usual reason a requirements file will not install.
NOT_FOR_TESTS = re.compile(
    r"^(black|flake8.*|isort|mypy|pylint.*|ruff|pre-commit|tox|nox|twine|wheel|sphinx.*|codespell|bandit|"
    r"pydocstyle|pycodestyle|pep8.*|pyflakes|check-manifest|docutils|readme[-_]renderer|bump2?version|"
    r"types-.*|coveralls|codecov|ipython|ipdb|pdbpp|doc8|restructuredtext[-_]lint|autopep8|yapf|"
    r"setuptools[-_]scm|build|pip-tools|mccabe|typed[-_]ast|towncrier|zest\.releaser|sphinx_rtd_theme|furo|mkdocs.*|"
    r"pytest[-_](flake8.*|pylint|mypy.*|black|isort|pycodestyle|pep8|codestyle|pydocstyle|ruff|flakes))$", re.I)


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


_EXTRAS_IN_COMMAND = re.compile(r"""(?:pip\s+install|session\.install\(|uv\s+pip\s+install)[^\n]*?["']?\.\[([\w,\s-]+)\]""")


def named_extras(tree: Path) -> tuple[list[str], list[str]]:
    """(extras, the files naming them) that tox (`extras =`), nox (`session.install(".[x]")`) or the CI
    configuration (`pip install .[x]`) install with the project for its tests."""
    found: dict[str, None] = {}
    where: list[str] = []
    cfg = read_cfg(tree / "tox.ini") if (tree / "tox.ini").is_file() else None
    if cfg is not None:
        names = [re.sub(r"^[\w{},.!-]+:\s*", "", x) for sec in cfg.sections() if sec == "testenv"
                 or sec.startswith("testenv:") and re.search(r"py|test|unit", sec)
                 for x in cfg_lines(cfg.get(sec, "extras", fallback="")) if "{" not in x]
        if names:
            found.update(dict.fromkeys(names))
            where.append("tox.ini")
    files = [tree / "noxfile.py", *sorted((tree / ".github" / "workflows").glob("*.y*ml")), tree / ".travis.yml"]
    for f in files:
        if not f.is_file():
            continue
        text = f.read_text(encoding="utf-8", errors="replace")
        if f.suffix != ".py":
            try:
                yaml.safe_load(text)
            except yaml.YAMLError:
                continue
        names = [e.strip() for m in _EXTRAS_IN_COMMAND.finditer(text) for e in m.group(1).split(",") if e.strip()]
        if names:
            found.update(dict.fromkeys(names))
            where.append(f.relative_to(tree).as_posix())
    return list(found), where
