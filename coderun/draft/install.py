"""The draft's `install` section: the project itself (with the extras its tests use) or its dependencies, test
requirement files, requirements.txt, tox deps, tests_require, plugins, and the distributions of what the
package and its tests import that nothing declares. Pins coderun's harness cannot run with are replaced."""

from __future__ import annotations

import re

from coderun.draft.context import DraftContext
from coderun.draft.metadata import TEST_EXTRAS
from coderun.draft.requirements import (
    NOT_FOR_TESTS,
    dedupe,
    named_extras,
    read_requirements_file,
    test_requirement_files,
    tox_deps,
    valid_req,
)
from coderun.draft.testfiles import py_files
from coderun.draft.testsuite import Imports
from coderun.envs.pins import dist_key, harness_compatible
from coderun.envs.providers import distribution_for, normalize, provided_by

RENAME_PYTEST_SECTION = ("python -c \"import pathlib; p = pathlib.Path('setup.cfg'); "
                         "p.write_text(p.read_text().replace('[pytest]', '[tool:pytest]', 1))\"")


class InstallGuess(DraftContext):
    def install_section(self, plugins: list[str], imports: Imports, import_root: str, tests: dict) -> dict:
        install: dict[str, object] = {}
        meta = self.meta
        namespace = self._namespace(import_root)
        runtime = self._project_or_dependencies(install, namespace)
        files_kept, inline = self._test_requirements(install)
        inline += self._requirements_txt(install)
        tox = tox_deps(self.tree)
        if tox:
            self.note("install", "test dependencies from tox.ini [testenv] deps")
        if meta.tests_require:
            self.note("install", "test dependencies from tests_require")
        by_build = self._installed_by_build(install)
        from_files = [r for rel in [*files_kept, *install.get("requirements_files", []), *meta.read_files]  # type: ignore[misc]
                      for r in read_requirements_file(self.tree, rel)[0]]
        listed = [*runtime, *inline, *meta.tests_require, *tox, *plugins]
        installed = {dist_key(r) for r in [*by_build, *from_files, *listed]} | {"pytest"}
        imported = self._undeclared_imports(imports, installed, tests, import_root)
        reqs = dedupe([*listed, *imported], skip=[*by_build, *from_files, *(meta.name and [meta.name] or [])])
        reqs = [r for r in reqs if valid_req(r) and not NOT_FOR_TESTS.match(dist_key(r))]
        reqs = self._harness_pins(reqs)
        if namespace and any("pkg_resources" in (self.tree / p / "__init__.py").read_text(errors="replace")
                             for p in self.packages(import_root)[0] if (self.tree / p / "__init__.py").is_file()):
            # setuptools releases from 2024 on drop or deprecate pkg_resources, which such packages import.
            reqs = [r for r in reqs if dist_key(r) != "setuptools"] + ["setuptools<70"]
            self.note("install", "setuptools<70: the namespace packages import pkg_resources")
        if reqs:
            install["requirements"] = reqs
        return install

    def _namespace(self, import_root: str) -> bool:
        return self.meta.namespace or any(
            re.search(r"declare_namespace|extend_path", (self.tree / p / "__init__.py").read_text(errors="replace"))
            for p in self.packages(import_root)[0] if (self.tree / p / "__init__.py").is_file())

    def _project_or_dependencies(self, install: dict[str, object], namespace: bool) -> list[str]:
        """Install the project (and the extras its tests use) when its build can; else its dependencies,
        returned."""
        meta = self.meta
        runtime: list[str] = []
        vcs = meta.vcs_version and not (self.tree / "PKG-INFO").is_file()
        extras = self._test_extras()
        if meta.build and not vcs and not namespace:
            install["project"] = True
            self.note("install", f"project: the {meta.build} build installs the project's own dependencies")
            if extras:
                install["extras"] = extras
        else:
            if meta.build and namespace:
                self.note("install", "namespace packages: an installed copy would shadow the tree's, so the "
                          "dependencies are listed instead of installing the project")
            elif meta.build:
                self.note("install", f"the version comes from git tags, which a build copy lacks: the "
                          f"dependencies are listed instead of building {meta.build}")
            runtime = list(meta.dependencies or [])
            runtime += [r for e in extras for r in meta.extras.get(e, [])]
            if not meta.dependencies and (self.tree / "requirements.txt").is_file() and not meta.read_files:
                install["requirements_files"] = ["requirements.txt"]
                self.note("install", "requirements.txt holds the project's dependencies")
        return runtime

    def _test_extras(self) -> list[str]:
        """The extras the tests need: the first test extra, and those tox, nox or CI install with the project."""
        first = [e for e in TEST_EXTRAS if e in self.meta.extras][:1]
        named, where = named_extras(self.tree)
        named = [e for e in named if e in self.meta.extras and e not in first]
        if first:
            self.note("install", f"extras: the {first[0]!r} extra holds test dependencies")
        if named:
            self.note("install", f"extras: {', '.join(named)}, which {' and '.join(where)} install"
                      f"{'s' if len(where) == 1 else ''} for the tests")
        return first + named

    def _installed_by_build(self, install: dict[str, object]) -> list[str]:
        """What installing the project brings: its dependencies and the chosen extras' (not the others')."""
        if not install.get("project"):
            return []
        extras = install.get("extras", [])
        return [*(self.meta.dependencies or []), *[r for e in extras for r in self.meta.extras.get(e, [])]]  # type: ignore[union-attr]

    def _test_requirements(self, install: dict[str, object]) -> tuple[list[str], list[str]]:
        """(test requirement files kept as files, requirements taken inline from files with lines dropped or
        pins the harness cannot run with)."""
        files_kept: list[str] = []
        inline: list[str] = []
        for rel in test_requirement_files(self.tree):
            keep, dropped = read_requirements_file(self.tree, rel)
            if dropped or any(harness_compatible(r)[1] for r in keep):
                inline += keep
                if dropped:
                    self.note("install", f"from {rel}, without what tests do not need ({', '.join(dropped[:4])}"
                              f"{'…' if len(dropped) > 4 else ''})")
                else:
                    self.note("install", f"from {rel}, with the pins below")
            elif keep:
                files_kept.append(rel)
        if files_kept:
            install["requirements_files"] = [*install.get("requirements_files", []), *files_kept]  # type: ignore[list-item]
            self.note("install", f"test requirements from {', '.join(files_kept)}")
        return files_kept, inline

    def _requirements_txt(self, install: dict[str, object]) -> list[str]:
        """requirements.txt's entries that the build does not declare (an app's requirements.txt often lists
        more than setup.py)."""
        if "requirements.txt" in install.get("requirements_files", []) or "requirements.txt" in self.meta.read_files \
                or not (self.tree / "requirements.txt").is_file():  # type: ignore[operator]
            return []
        declared = {dist_key(r) for r in [*(self.meta.dependencies or []),
                                          *[r for v in self.meta.extras.values() for r in v]]}
        extra = [r for r in read_requirements_file(self.tree, "requirements.txt")[0] if dist_key(r) not in declared]
        if extra:
            self.note("install", f"requirements.txt also lists {', '.join(dist_key(r) for r in extra[:5])}"
                      f"{'…' if len(extra) > 5 else ''}")
        return extra

    def _harness_pins(self, reqs: list[str]) -> list[str]:
        out = []
        for r in reqs:
            fixed, why = harness_compatible(r)
            if why:
                self.note("install", f"{r} → {fixed}: {why}")
            out.append(fixed)
        return out

    def _undeclared_imports(self, imports: Imports, installed: set[str], tests: dict, import_root: str) -> list[str]:
        """The distributions of what the package and its tests import that nothing installs. Test files that
        import, when pytest collects them, what the index does not have are left out."""
        own = self.imports_of([f for p in [*self.packages(import_root)[0], *self.packages(import_root)[1]]
                               for f in py_files(self.tree / p)], import_root)
        declared = installed | {normalize(r) for v in self.meta.extras.values() for r in [dist_key(x) for x in v]}
        wanted = {**{m: ("the package", files) for m, files in own.anywhere.items()},
                  **{m: ("the tests", files) for m, files in imports.anywhere.items()}}
        added, missing = [], []
        for module, (who, _files) in wanted.items():
            if "." not in module and provided_by(module, installed):
                continue
            dist = module if "." in module else distribution_for(module, declared, self.probes.release_count)
            if dist_key(dist) in installed or dist_key(dist) in {dist_key(a) for a, _ in added}:
                continue
            if self.probes.on_index(dist):
                added.append((dist, who if dist_key(dist) == dist_key(module) else f"{who}, as {module}"))
            else:
                missing.append(module)
        if added:
            self.note("install", "imported and declared nowhere: " + ", ".join(f"{d} ({why})" for d, why in added))
        self._leave_out(missing, imports, tests)
        return [d for d, _ in added]

    def _leave_out(self, missing: list[str], imports: Imports, tests: dict) -> None:
        files = sorted({f for m in missing for f in imports.at_import.get(m, [])})
        if files:
            tests["args"] = [*tests.get("args", []), *[f"--ignore={f}" for f in files]]
            self.note("tests", f"{', '.join(files)} import{'s' if len(files) == 1 else ''} "
                      f"{', '.join(m for m in missing if m in imports.at_import)}, which nothing declares and the "
                      "package index does not have: left out")
        later = [m for m in missing if m not in imports.at_import]
        if later:
            self.note("install", f"{', '.join(later)}: imported inside functions, declared nowhere and not on the "
                      "package index; the tests that call them will fail")
