"""The draft's `tests` section: runner, paths, pytest options and plugins, suites that need services, Django
settings, and the distributions the tests import."""

from __future__ import annotations

import datetime as dt
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from coderun.draft.configfiles import cfg_lines, pytest_ini, read_cfg, words
from coderun.draft.context import NAMESPACES, DraftContext
from coderun.draft.testfiles import (
    defines_tests,
    holds_tests,
    is_test_name,
    py_files,
    test_kind,
    unconditional_imports,
)

# addopts that load a linter or coverage: dropped, since they test something else and slow the run.
_DROP_OPTS = re.compile(r"^--(cov|no-cov|flake8|pep8|mypy|pylint|black|isort|codestyle|pycodestyle|"
                        r"pydocstyle|ruff)")
# Command-line options and ini keys that need a pytest plugin.
_PLUGIN_OPTS = {"-n": "pytest-xdist", "--numprocesses": "pytest-xdist", "--dist": "pytest-xdist",
                "--timeout": "pytest-timeout", "--benchmark": "pytest-benchmark", "--reruns": "pytest-rerunfailures",
                "--asyncio-mode": "pytest-asyncio", "--ds": "pytest-django", "--reuse-db": "pytest-django",
                "--randomly": "pytest-randomly", "--hypothesis": "hypothesis", "--mpl": "pytest-mpl",
                "--html": "pytest-html", "--snapshot": "syrupy", "--forked": "pytest-forked"}
_PLUGIN_INI = {"asyncio_mode": "pytest-asyncio", "django_settings_module": "pytest-django",
               "timeout": "pytest-timeout", "env": "pytest-env", "mock_use_standalone_module": "pytest-mock",
               "trio_mode": "pytest-trio", "mpl-baseline-path": "pytest-mpl"}
_PYTEST_7 = dt.date(2022, 2, 3)  # pytest 7.0: the `pythonpath` setting
# Test directories that need servers, a network or long timings (tox's `unit` environment leaves them out).
_SERVICE_SUITES = re.compile(r"(integration|integration_tests|functional|e2e|end_to_end|system|acceptance|"
                             r"perf|performance|benchmarks?|load|stress|live|smoke)(_tests?)?", re.I)


class TestsGuess(DraftContext):
    def tests_section(self, import_root: str) -> tuple[dict, list[str], Imports]:
        """(tests section, pytest plugins the configuration needs, third-party modules the tests import)."""
        ini, ini_file = pytest_ini(self.tree)
        paths = self.test_paths(ini, ini_file, import_root)
        files = [f for p in paths for f in py_files(self.tree / p)]
        kinds = {f: test_kind(f) for f in files}
        test_files = [f for f, k in kinds.items() if k and f.name != "conftest.py"]
        tests: dict[str, object] = {}
        runner = "pytest"
        if test_files and all(kinds[f] == "unittest" for f in test_files) and not any(
                f.name == "conftest.py" for f in files):
            runner = "unittest"
            self.note("tests", "the test modules are unittest.TestCase suites (run through pytest)")
        tests["runner"] = runner
        if paths:
            tests["paths"] = paths
        else:
            self.warnings.append("no test directory or test files found; set tests.paths by hand")
        args, reqs = self.pytest_args(ini, ini_file, test_files, paths)
        args += self.sibling_path(test_files, ini, reqs)
        needy = self.suites_needing_services(paths)
        if needy:
            args += [f"--ignore={d}" for d in needy]
            self.note("tests", f"{', '.join(needy)}: integration, functional or performance tests, which need "
                      "servers, a network or long timings that a sandbox does not have; left out")
            files = [f for f in files if not any(f.is_relative_to(self.tree / d) for d in needy)]
        if args:
            tests["args"] = args
        imported = self.imports_of(files, import_root)
        django = self.django_settings(ini, files, import_root)
        if django:
            tests["env"] = {"DJANGO_SETTINGS_MODULE": django}
            reqs.append("pytest-django")
        return tests, reqs, imported

    def test_paths(self, ini: dict, ini_file: str | None, import_root: str) -> list[str]:
        configured = [p.rstrip("/") for p in words(ini.get("testpaths"))]
        existing = [p for p in configured if (self.tree / p).exists()]
        if existing:
            self.note("tests", f"paths from testpaths in {ini_file}")
            return existing
        from_tox = self._tox_paths()
        if from_tox:
            self.note("tests", "paths from the test command in tox.ini")
            return from_tox
        # A tests/ or test/ suite comes before any other file a CI script mentions (a root benchmark.py).
        if self.meta.test_suite:
            cand = self.meta.test_suite.split(":")[0].replace(".", "/")
            for c in (cand, f"{cand}.py", f"{import_root}/{cand}", f"{import_root}/{cand}.py"):
                if (self.tree / c).exists():
                    self.note("tests", f"paths from test_suite={self.meta.test_suite!r} in setup")
                    return [Path(c).as_posix().removeprefix("./")]
        for d in ("tests", "test", "testing"):
            if (self.tree / d).is_dir() and any(test_kind(f) for f in py_files(self.tree / d)):
                return [d]
        pkgs, _mods = self.packages(import_root)
        inner = [f"{p}/{d}" for p in pkgs for d in ("tests", "test") if (self.tree / p / d).is_dir()]
        inner += [f"{p}/{f}" for p in pkgs for f in ("tests.py", "test.py") if (self.tree / p / f).is_file()]
        if inner:
            return inner
        top = [p.name for p in sorted(self.tree.glob("*.py"))  # a suite may be one test.py at the root
               if (is_test_name(p.name) or p.name in ("test.py", "tests.py")) and test_kind(p)]
        if top:
            return top
        # Tests spread through the package itself (zope style: pkg/tests/ deeper down).
        spread = sorted({f.parent.relative_to(self.tree).as_posix() for p in pkgs
                         for f in (self.tree / p).rglob("test*.py") if test_kind(f)})
        return pkgs if spread else []

    def sibling_path(self, test_files: list[Path], ini: dict, reqs: list[str]) -> list[str]:
        """pytest arguments that put test packages on sys.path whose modules import a sibling helper by its
        bare name (`from testlib import x`, as `python -m unittest` run in that folder finds it); pytest only
        puts a test directory there when it is not a package."""
        dirs = []
        for f in test_files:
            d = f.parent
            if not (d / "__init__.py").is_file() or d == self.tree:
                continue
            tops = {m.split(".")[0] for m in unconditional_imports(f, in_functions=False)}
            if any((d / f"{t}.py").is_file() or (d / t / "__init__.py").is_file() for t in tops) \
                    and d.relative_to(self.tree).as_posix() not in dirs:
                dirs.append(d.relative_to(self.tree).as_posix())
        if not dirs or ini.get("pythonpath"):
            return []
        if self.as_of is None or self.as_of[0] >= _PYTEST_7:
            self.note("tests", f"{', '.join(dirs)}: test modules import helpers beside them by bare name; pytest "
                      "puts the folder on sys.path (pythonpath, pytest 7)")
            return ["-o", f"pythonpath={' '.join(dirs)}"]
        reqs.append("pytest-pythonpath")
        self.note("tests", f"{', '.join(dirs)}: test modules import helpers beside them by bare name; the folder "
                  "goes on sys.path through pytest-pythonpath (the pytest of the project's time predates "
                  "pytest 7's pythonpath)")
        return ["-o", f"python_paths={' '.join(dirs)}"]

    def suites_needing_services(self, paths: list[str]) -> list[str]:
        """Directories under the test paths whose names say they need more than the code (a server, time)."""
        found = []
        for p in paths:
            base = self.tree / p
            if not base.is_dir():
                continue
            for d in sorted(base.rglob("*")):
                if d.is_dir() and _SERVICE_SUITES.fullmatch(d.name) and not any(
                        d.is_relative_to(self.tree / f) for f in found):
                    found.append(d.relative_to(self.tree).as_posix())
        return found

    def _tox_paths(self) -> list[str]:
        cfg = read_cfg(self.tree / "tox.ini") if (self.tree / "tox.ini").is_file() else None
        if cfg is None:
            return []
        # A `unit` environment runs the tests that need nothing more than the code: it comes first.
        sections = [sec for sec in cfg.sections() if re.fullmatch(r"testenv:.*\bunit\w*", sec)]
        sections += ["testenv"] if cfg.has_section("testenv") else []
        lines = [line for sec in sections for line in cfg_lines(cfg.get(sec, "commands", fallback=""))]
        for line in lines:
            try:
                words = shlex.split(line)
            except ValueError:
                continue
            if not any(w in ("pytest", "py.test") or w.endswith("/pytest") for w in words[:3]):
                continue
            paths = [w.rstrip("/") for w in words[1:] if not w.startswith(("-", "{")) and w != "pytest"
                     and (self.tree / w).exists() and holds_tests(self.tree / w)]
            if paths:
                return paths
        return []

    def pytest_args(self, ini: dict, ini_file: str | None, test_files: list[Path],
                    paths: list[str]) -> tuple[list[str], list[str]]:
        args: list[str] = []
        reqs: list[str] = []
        addopts = shlex.split(" ".join(words(ini.get("addopts"))))
        keep, dropped = [], []
        skip_next = False
        for i, opt in enumerate(addopts):
            if skip_next:
                skip_next = False
                continue
            if _DROP_OPTS.match(opt):
                dropped.append(opt)
                nxt = addopts[i + 1] if i + 1 < len(addopts) else ""
                if "=" not in opt and nxt and not nxt.startswith("-") and opt in ("--cov", "--cov-report",
                                                                                   "--cov-config"):
                    skip_next = True
                    dropped.append(nxt)
                continue
            keep.append(opt)
            plugin = _PLUGIN_OPTS.get(opt.split("=", 1)[0]) or next(
                (v for k, v in _PLUGIN_OPTS.items() if k.startswith("--") and opt.startswith(k)), None)
            if plugin:
                reqs.append(plugin)
        if dropped:
            args += ["-o", f"addopts={shlex.join(keep)}"]
            self.note("tests", f"addopts in {ini_file} load coverage or linters ({' '.join(dropped)}); "
                      "they are left out")
        for key, plugin in _PLUGIN_INI.items():
            if key in {k.lower() for k in ini}:
                reqs.append(plugin)
        reqs += words(ini.get("required_plugins"))
        if any(str(w).strip().startswith("error") for w in _warning_filters(ini)):
            args += ["-W", "ignore::DeprecationWarning", "-W", "ignore::PendingDeprecationWarning"]
            self.note("tests", f"{ini_file} turns warnings into errors; deprecation warnings from newer "
                      "dependencies are not what a benchmark measures")
        pattern = self.python_files(ini, test_files, paths)
        if pattern:
            args += ["-o", f"python_files={pattern}"]
        if reqs:
            self.note("install", f"pytest plugins the configuration in {ini_file} needs: {', '.join(reqs)}")
        return args, reqs

    def python_files(self, ini: dict, test_files: list[Path], paths: list[str]) -> str | None:
        if ini.get("python_files"):
            return None  # pytest reads it from the project's own configuration
        named = [f for f in test_files if not is_test_name(f.name) and defines_tests(f)
                 and f.relative_to(self.tree).as_posix() not in paths]  # explicit files are collected anyway
        if not named:
            return None
        stems = sorted({f.name for f in named})
        prefixes = {re.match(r"^([A-Za-z0-9]+_)", s).group(1) for s in stems if re.match(r"^[A-Za-z0-9]+_", s)}
        globs = [f"{p}*.py" for p in sorted(prefixes) if sum(s.startswith(p) for s in stems) > 1]
        globs += [s for s in stems if not any(s.startswith(g[:-4]) for g in globs)]
        self.note("tests", f"test modules not named test_*.py ({', '.join(stems[:3])}"
                  f"{'…' if len(stems) > 3 else ''}): python_files is widened")
        return " ".join(["test_*.py", "*_test.py", *globs])

    def django_settings(self, ini: dict, files: list[Path], import_root: str) -> str | None:
        """A Django settings module for tests that import django and configure none themselves."""
        if any(k.lower() == "django_settings_module" for k in ini) or not any(
                m.split(".")[0] == "django" for f in files for m in unconditional_imports(f)):
            return None
        found = sorted((f for f in files if f.name in ("settings.py", "test_settings.py")),
                       key=lambda f: len(f.parts))
        if not found:
            return None
        module = found[0].relative_to(self.tree / import_root).with_suffix("").as_posix().replace("/", ".")
        self.note("tests", f"the tests use Django: settings module {module}, run with pytest-django")
        return module

    def imports_of(self, files: list[Path], import_root: str) -> Imports:
        """Third-party modules `files` import unconditionally (the project's own and the local ones left out),
        and the files that do; namespace packages by their two first parts (`zope.interface`)."""
        # Importable without installing: what sits at the roots, and modules beside tests in plain directories
        # (pytest puts such a directory on sys.path).
        roots = {self.tree, self.tree / import_root} | {f.parent for f in files}  # helpers beside tests too
        local = {p.stem if p.suffix == ".py" else p.name for r in roots for p in r.iterdir()}
        pkgs, mods = self.packages(import_root)
        own = {Path(p).name for p in pkgs} | {Path(m).stem for m in mods}
        # The standard library, and what every venv's tooling brings (setuptools' pkg_resources, pip).
        stdlib = set(sys.stdlib_module_names) | {"__future__", "pkg_resources", "setuptools", "pip", "distutils"}
        found = Imports({}, {})
        for f in files:
            collected = set(unconditional_imports(f, in_functions=False))
            for mod in unconditional_imports(f):
                top = mod.split(".")[0]
                if top in stdlib or top in own or top in local or top.startswith("_") and top != "_pytest":
                    continue
                name = ".".join(mod.split(".")[:2]) if top in NAMESPACES and "." in mod else top
                rel = f.relative_to(self.tree).as_posix()
                for into in (found.anywhere, *([found.at_import] if mod in collected else [])):
                    if rel not in into.setdefault(name, []):
                        into[name].append(rel)
        return found


@dataclass(frozen=True)
class Imports:
    anywhere: dict[str, list[str]]   # module -> files importing it unconditionally, in functions too
    at_import: dict[str, list[str]]  # module -> files importing it when they are imported (pytest collects)


def _warning_filters(ini: dict) -> list[str]:
    value = ini.get("filterwarnings")
    return [str(v) for v in value] if isinstance(value, list) else cfg_lines(str(value or ""))
