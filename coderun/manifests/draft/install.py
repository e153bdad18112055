"""The draft's `install` section: the project itself or its dependencies, test requirement files, tox deps,
plugins, and what the tests import that nothing declares."""

from __future__ import annotations

import re

from coderun.manifests.draft.context import DraftContext
from coderun.manifests.draft.metadata import TEST_EXTRAS
from coderun.manifests.draft.requirements import (
    NOT_FOR_TESTS,
    dedupe,
    dist_key,
    read_requirements_file,
    test_requirement_files,
    tox_deps,
    valid_req,
)

RENAME_PYTEST_SECTION = ("python -c \"import pathlib; p = pathlib.Path('setup.cfg'); "
                         "p.write_text(p.read_text().replace('[pytest]', '[tool:pytest]', 1))\"")


class InstallGuess(DraftContext):
    def install_section(self, plugins: list[str], imports: dict[str, list[str]], import_root: str,
                        tests: dict) -> dict:
        install: dict[str, object] = {}
        meta = self.meta
        namespace = meta.namespace or any(
            re.search(r"declare_namespace|extend_path", (self.tree / p / "__init__.py").read_text(errors="replace"))
            for p in self.packages(import_root)[0] if (self.tree / p / "__init__.py").is_file())
        runtime = self._project_or_dependencies(install, namespace)
        files_kept, inline = self._test_requirements(install)
        declared = [*(meta.dependencies or []), *[r for v in meta.extras.values() for r in v]]
        for rel in files_kept + list(install.get("requirements_files", [])) + meta.read_files:  # type: ignore[operator]
            declared += read_requirements_file(self.tree, rel)[0]
        tox = tox_deps(self.tree)
        if tox:
            self.note("install", "test dependencies from tox.ini [testenv] deps")
        if meta.tests_require:
            self.note("install", "test dependencies from tests_require")
        known = {dist_key(d) for d in [*declared, *meta.tests_require, *tox, *inline, *plugins]} | {"pytest"}
        imported = self._undeclared_imports(imports, known, tests)
        reqs = dedupe([*runtime, *inline, *meta.tests_require, *tox, *plugins, *imported],
                      skip=[*([] if runtime else declared), *(meta.name and [meta.name] or [])])
        reqs = [r for r in reqs if valid_req(r) and not NOT_FOR_TESTS.match(dist_key(r))]
        if namespace and any("pkg_resources" in (self.tree / p / "__init__.py").read_text(errors="replace")
                             for p in self.packages(import_root)[0] if (self.tree / p / "__init__.py").is_file()):
            # setuptools releases from 2024 on drop or deprecate pkg_resources, which such packages import.
            reqs = [r for r in reqs if dist_key(r) != "setuptools"] + ["setuptools<70"]
            self.note("install", "setuptools<70: the namespace packages import pkg_resources")
        if imported:
            self.note("install", f"imported by the tests and declared nowhere: {', '.join(imported)}")
        if reqs:
            install["requirements"] = reqs
        return install

    def _project_or_dependencies(self, install: dict[str, object], namespace: bool) -> list[str]:
        """Install the project (and its test extra) when its build can; else its dependencies, returned."""
        meta = self.meta
        runtime: list[str] = []
        vcs = meta.vcs_version and not (self.tree / "PKG-INFO").is_file()
        if meta.build and not vcs and not namespace:
            install["project"] = True
            self.note("install", f"project: the {meta.build} build installs the project's own dependencies")
            extras = [e for e in TEST_EXTRAS if e in meta.extras][:1]
            if extras:
                install["extras"] = extras
                self.note("install", f"extras: the {extras[0]!r} extra holds test dependencies")
        else:
            if meta.build and namespace:
                self.note("install", "namespace packages: an installed copy would shadow the tree's, so the "
                          "dependencies are listed instead of installing the project")
            elif meta.build:
                self.note("install", f"the version comes from git tags, which a build copy lacks: the "
                          f"dependencies are listed instead of building {meta.build}")
            runtime = list(meta.dependencies or [])
            extra = next((e for e in TEST_EXTRAS if e in meta.extras), None)
            runtime += meta.extras.get(extra, []) if extra else []
            if not meta.dependencies and (self.tree / "requirements.txt").is_file() and not meta.read_files:
                install["requirements_files"] = ["requirements.txt"]
                self.note("install", "requirements.txt holds the project's dependencies")
        return runtime

    def _test_requirements(self, install: dict[str, object]) -> tuple[list[str], list[str]]:
        """(test requirement files kept as files, requirements taken inline from files with lines dropped)."""
        files_kept: list[str] = []
        inline: list[str] = []
        for rel in test_requirement_files(self.tree):
            keep, dropped = read_requirements_file(self.tree, rel)
            if dropped:
                inline += keep
                self.note("install", f"from {rel}, without what tests do not need ({', '.join(dropped[:4])}"
                          f"{'…' if len(dropped) > 4 else ''})")
            elif keep:
                files_kept.append(rel)
        if files_kept:
            install["requirements_files"] = [*install.get("requirements_files", []), *files_kept]  # type: ignore[list-item]
            self.note("install", f"test requirements from {', '.join(files_kept)}")
        return files_kept, inline

    def _undeclared_imports(self, imports: dict[str, list[str]], known: set[str], tests: dict) -> list[str]:
        """What the tests import and nothing declares; test files importing what the index lacks are ignored."""
        imported = [r for r in imports if dist_key(r) not in known]
        missing = [r for r in imported if not self.probes.on_index(r)]
        if missing:
            files = sorted({f for r in missing for f in imports[r]})
            imported = [r for r in imported if r not in missing]
            tests["args"] = [*tests.get("args", []), *[f"--ignore={f}" for f in files]]
            self.note("tests", f"{', '.join(files)} import{'s' if len(files) == 1 else ''} "
                      f"{', '.join(missing)}, which nothing declares and the package index does not have: left out")
        return imported
