"""The README stays a short tour whose links land, and every measured table in the docs says what made it.

The site itself (every link and anchor between the pages of docs/) is checked by `mkdocs build --strict`
in CI (.ci/run); these checks need no mkdocs."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub and MkDocs' default toc make it (for the headings these pages use)."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return re.sub(r"[\s]+", "-", text)


def _anchors(page: Path) -> set[str]:
    return {_slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", page.read_text(encoding="utf-8"), re.M)}


def test_readme_is_a_short_tour_with_the_quick_start_ci_runs():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250
    # .ci/run's awk: the indented lines of "## Quick start", up to the next heading
    quick, on = [], False
    for line in lines:
        if line.startswith("#"):
            on = line == "## Quick start"
        elif on and re.match(r"^    [^ ]", line):
            quick.append(line[4:])
    assert len(quick) == 2, quick


def test_every_link_from_the_readme_into_docs_lands():
    text = README.read_text(encoding="utf-8")
    links = re.findall(r"\]\((docs/[^)#]+)(?:#([^)]+))?\)", text)
    assert links
    for path, anchor in links:
        page = ROOT / path
        assert page.is_file(), path
        if anchor:
            assert anchor in _anchors(page), f"{path}#{anchor}"


def test_every_page_is_in_the_site_nav():
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert "strict: true" in nav
    for page in DOCS.glob("*.md"):
        assert f": {page.name}" in nav, page.name


def test_every_measured_table_names_the_command_that_made_it():
    """In docs/benchmarks.md every section with a table says, before it, what made it: a benchmarks/ script
    or a coderun command line."""
    sections = re.split(r"^## ", (DOCS / "benchmarks.md").read_text(encoding="utf-8"), flags=re.M)[1:]
    tables = 0
    for section in sections:
        table = re.search(r"^\|", section, re.M)
        if table is None:
            continue
        tables += 1
        made_by = re.search(r"\*\*Made by\*\*: `(python benchmarks/\w+\.py|coderun )", section[:table.start()])
        assert made_by, section.splitlines()[0]
    assert tables >= 5
