"""Drafting a manifest (`coderun projects add`): fetch the source the user points at, then read its files,
never run them.

`make` fetches the source (the same checkout as any manifest's: coderun.envs.sources), dates it and asks
the machine what the tree cannot say (interpreters on PATH, the package index: `Probes`); then the parts
here read the tree. setup.py is parsed with `ast`, configuration files with their parsers. Each decision is
written into the draft as a comment naming the file it came from, so a user can check it before building an
environment. The parts, in the order a draft is made: `source` (what the user typed; whether the tree has
tests), `metadata` (the packaging files), `python` (which Python), `context` (the layout: import root,
packages), `testsuite` (the tests section), `install` (the install section, from `requirements`),
`render` (the YAML); `dating` reads the files that say when the source is from.
"""

from __future__ import annotations

from coderun.draft.configfiles import read_cfg
from coderun.draft.context import DraftContext, Probes
from coderun.draft.install import RENAME_PYTEST_SECTION, InstallGuess
from coderun.draft.metadata import Metadata, read_metadata
from coderun.draft.python import PY_MINORS, PythonGuess
from coderun.draft.render import render
from coderun.draft.source import no_tests_message, repository_url, resolve_source, sanitize_name
from coderun.draft.testfiles import has_tests
from coderun.draft.testsuite import TestsGuess

__all__ = ["PY_MINORS", "Builder", "DraftContext", "Metadata", "Probes", "has_tests", "no_tests_message",
           "read_metadata", "render", "repository_url", "resolve_source", "sanitize_name"]


class Builder(PythonGuess, TestsGuess, InstallGuess, DraftContext):
    """A draft's manifest fields from a tree: each section's guess is in its own module."""

    def build(self, *, name: str, source: dict) -> dict:
        """The manifest's fields; the notes on each are in `self.notes`."""
        data: dict[str, object] = {"name": name}
        if self.meta.summary and self.meta.summary.strip() not in ("", "UNKNOWN"):
            data["description"] = " ".join(self.meta.summary.split())
        data["source"] = source
        data["python"] = self.python_version()
        import_root = self.import_root()
        if import_root != ".":
            data["import_root"] = import_root
        tests, plugins, imported = self.tests_section(import_root)
        install = self.install_section(plugins, imported, import_root, tests)
        cfg = read_cfg(self.tree / "setup.cfg") if (self.tree / "setup.cfg").is_file() else None
        if cfg is not None and cfg.has_section("pytest") and not cfg.has_section("tool:pytest"):
            install["pre_install"] = [RENAME_PYTEST_SECTION]
            self.note("install", "pre_install: setup.cfg's [pytest] section is an error since pytest 4, which coderun "
                      "needs; it becomes [tool:pytest]")
        if self.as_of:
            install["resolve_as_of"] = self.as_of[0]
            self.note("install", self.as_of[1])
        if install:
            data["install"] = install
        data["tests"] = tests
        discover = self.discovery(import_root, tests.get("paths", []))
        if self.undocumented:
            discover["undocumented"] = True
            self.note("tasks", "undocumented: functions without a docstring are candidates too (--undocumented)")
        data["tasks"] = {"discover": discover}
        return data
