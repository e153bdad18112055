"""`coderun projects add`: draft a manifest for a repository a user points at.

The source is checked out like any manifest's (coderun.envs.sources), then read, never run: setup.py is
parsed with `ast`, configuration files with their parsers. Each decision is written into the draft as a
comment naming the file it came from, so a user can check it before building an environment.
"""

from __future__ import annotations

import ast
import configparser
import datetime as dt
import functools
import re
import shlex
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from email.parser import HeaderParser
from pathlib import Path

import git
import yaml
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet

from coderun.config import Settings
from coderun.envs.sources import Checkout, checkout, commit_date, download_sdist, pip_command
from coderun.errors import ManifestError, SourceError, UsageError
from coderun.manifests.schema import Manifest, parse_manifest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - python 3.10
    import tomli as tomllib

# Minor versions of Python 3 a draft may choose from, oldest first. coderun's harness (the reporter plugin and
# the worker inside the project's interpreter) needs 3.7 (`from __future__ import annotations`).
PY_MINORS = tuple(range(7, 14))
# The day each Python 3 minor release came out.
_PY_RELEASED = {6: dt.date(2016, 12, 23), 7: dt.date(2018, 6, 27), 8: dt.date(2019, 10, 14),
                9: dt.date(2020, 10, 5), 10: dt.date(2021, 10, 4), 11: dt.date(2022, 10, 24),
                12: dt.date(2023, 10, 2), 13: dt.date(2024, 10, 7)}
_PYPI_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9.+!_-]+")
_TEST_EXTRAS = ("test", "tests", "testing", "dev", "develop", "development")
# Tools a test run does not need; old pins of them are the usual reason a requirements file will not install.
_NOT_FOR_TESTS = re.compile(
    r"^(black|flake8.*|isort|mypy|pylint.*|ruff|pre-commit|tox|nox|twine|wheel|sphinx.*|codespell|bandit|"
    r"pydocstyle|pycodestyle|pep8.*|pyflakes|check-manifest|docutils|readme[-_]renderer|bump2?version|"
    r"types-.*|coveralls|codecov|ipython|ipdb|pdbpp|doc8|restructuredtext[-_]lint|autopep8|yapf|"
    r"setuptools[-_]scm|build|pip-tools|mccabe|typed[-_]ast|towncrier|zest\.releaser|sphinx_rtd_theme|furo|mkdocs.*|"
    r"pytest[-_](flake8.*|pylint|mypy.*|black|isort|pycodestyle|pep8|codestyle|pydocstyle|ruff|flakes))$", re.I)
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
# Import names whose distribution is named differently.
_DIST_OF = {"yaml": "PyYAML", "dateutil": "python-dateutil", "attr": "attrs", "PIL": "Pillow",
            "bs4": "beautifulsoup4", "sklearn": "scikit-learn", "cv2": "opencv-python", "jwt": "PyJWT",
            "Crypto": "pycryptodome", "dns": "dnspython", "magic": "python-magic", "serial": "pyserial",
            "zmq": "pyzmq", "git": "GitPython", "pkg_resources": "setuptools", "OpenSSL": "pyOpenSSL",
            "jose": "python-jose", "docx": "python-docx", "slugify": "python-slugify", "ruamel": "ruamel.yaml",
            "_pytest": "pytest", "google": "protobuf", "typing_extensions": "typing-extensions",
            "multipart": "python-multipart", "markdown": "Markdown", "jinja2": "Jinja2", "flask": "Flask",
            "werkzeug": "Werkzeug", "sqlalchemy": "SQLAlchemy", "MySQLdb": "mysqlclient", "psycopg2": "psycopg2-binary",
            "nacl": "PyNaCl", "factory": "factory_boy", "django": "Django", "rest_framework": "djangorestframework", "socks": "PySocks", "win32api": "pywin32", "tomli_w": "tomli-w"}
_RENAME_PYTEST_SECTION = ("python -c \"import pathlib; p = pathlib.Path('setup.cfg'); "
                          "p.write_text(p.read_text().replace('[pytest]', '[tool:pytest]', 1))\"")
# Test directories that need servers, a network or long timings (tox's `unit` environment leaves them out).
_SERVICE_SUITES = re.compile(r"(integration|integration_tests|functional|e2e|end_to_end|system|acceptance|"
                             r"perf|performance|benchmarks?|load|stress|live|smoke)(_tests?)?", re.I)
_NAMESPACES = {"zope", "backports", "jaraco", "sphinxcontrib", "azure"}
_NOT_PACKAGES = {"tests", "test", "testing", "docs", "doc", "examples", "example", "benchmarks", "scripts",
                 "build", "dist", "tools", "bin", "site-packages", "node_modules", "venv", ".venv"}


@dataclass(frozen=True)
class Draft:
    text: str          # the manifest, with comments
    manifest: Manifest  # what it validates to
    warnings: tuple[str, ...]


def draft_manifest(source: str, settings: Settings, name: str | None = None, rev: str | None = None) -> str:
    """Commented YAML of a manifest for `source` (git URL, directory, or "pkg==version"); it validates."""
    return make_draft(source, settings, name=name, rev=rev).text


def _checkout_trying_tags(name: str, src: dict, settings: Settings) -> Checkout:
    """The checkout of `src`; a release tag given as v1.2 or 1.2 is tried the other way too."""
    try:
        return checkout(Manifest(name=name, source=src, python="3.11"), settings)
    except SourceError:
        rev = src.get("git", {}).get("rev", "")
        other = rev[1:] if re.fullmatch(r"v\d[\w.]*", rev) else f"v{rev}" if re.fullmatch(r"\d[\w.]*", rev) else None
        if other is None:
            raise
        return checkout(Manifest(name=name, source={"git": {**src["git"], "rev": other}}, python="3.11"), settings)


def make_draft(source: str, settings: Settings, name: str | None = None, rev: str | None = None) -> Draft:
    src, provisional, warnings = resolve_source(source)
    if rev is not None:
        if not src.get("git"):
            raise UsageError(f"--rev {rev}: {source} is not a git source", hint="--rev is for git URLs and "
                             "repositories; pin a PyPI package as pkg==version")
        src = {"git": {"url": src["git"]["url"], "rev": rev}}
    co = _checkout_trying_tags(_sanitize(name or provisional), src, settings)
    if src.get("git"):  # record the commit that was read, so the draft is reproducible
        src = {"git": {"url": src["git"]["url"], "rev": co.commit}}
    meta = read_metadata(co.path)
    if not _has_tests(co.path):
        message, hint = _no_tests_message(source, src, meta)
        raise UsageError(message, hint=hint)
    b = _Builder(tree=co.path, meta=meta, warnings=list(warnings), as_of=source_date(src, co, settings))
    data = b.build(name=_sanitize(name or meta.name or provisional), source=src, co=co)
    text = render(data, b.notes, source=source, co=co, warnings=b.warnings)
    try:
        manifest = parse_manifest(text, Path(f"<draft for {source}>"))
    except ManifestError as e:  # a draft that does not validate is a bug here, not the user's fault
        raise ManifestError(f"the drafted manifest does not validate (please report this): {e.message}",
                            hint="write the manifest by hand from the README reference meanwhile") from None
    return Draft(text, manifest, tuple(b.warnings))


# ------------------------------------------------------------------------------------------- source


def resolve_source(source: str) -> tuple[dict, str, list[str]]:
    """(manifest `source` mapping, a provisional name, warnings) for what the user typed."""
    s = source.strip()
    if _PYPI_RE.fullmatch(s):
        return {"pypi": s}, s.partition("==")[0], []
    if "://" in s or re.match(r"^[\w.-]+@[\w.-]+:", s):
        stem = re.sub(r"\.git$", "", s.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1])
        return {"git": {"url": s, "rev": "HEAD"}}, stem or "project", []
    path = Path(s).expanduser()
    if path.is_dir():
        path = path.resolve()
        if (path / ".git").exists():
            return {"git": {"url": str(path), "rev": "HEAD"}}, path.name, _dirty_warning(path)
        return {"path": str(path)}, path.name, []
    if "/" in s or s.startswith((".", "~")):
        raise UsageError(f"{source}: no such directory", hint="give an existing directory, a git URL or "
                         '"pkg==version"')
    if "==" not in s and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", s):
        raise UsageError(f"{source!r} is neither a directory nor a pinned package",
                         hint=f'pin a PyPI package as "{s}==VERSION", or give a git URL or a directory')
    raise UsageError(f"cannot tell what {source!r} is",
                     hint='give a git URL (https://, ssh, file://), a local directory, or "pkg==version"')


def _has_tests(tree: Path) -> bool:
    """Any file pytest or unittest would collect tests from (test_*.py / *_test.py, or one defining tests)."""
    for f in tree.rglob("*.py"):
        rel = f.relative_to(tree).parts
        if any(p.startswith(".") or p in ("build", "dist", "node_modules") for p in rel[:-1]):
            continue
        named = _is_test_name(f.name) or f.stem in ("tests", "test") or f.parent.name in ("tests", "test", "testing")
        if named and _test_kind(f):
            return True
    return False


# Project URL labels that name the code's repository, best first (PEP 753 normalises to lowercase).
_REPO_LABELS = ("source", "sourcecode", "source code", "repository", "code", "github", "gitlab", "homepage",
                "home-page", "home")


def repository_url(meta: Metadata) -> str | None:
    """The project's repository from its metadata: a URL of the form https://host/owner/repo."""
    by_label = {k.strip().lower(): v.strip() for k, v in meta.urls.items()}
    for label in _REPO_LABELS:
        url = by_label.get(label)
        m = re.match(r"^(https://[^/\s]+/[\w.-]+/[\w.-]+?)(?:\.git)?/?$", url or "")
        if m:
            return m.group(1)
    return None


def _no_tests_message(source: str, src: dict, meta: Metadata) -> tuple[str, str]:
    kind = "sdist" if src.get("pypi") else "source"
    message = f"{source}: the {kind} has no tests (no test_*.py, *_test.py or tests/ module), so no task " \
              "could be verified"
    repo = None if src.get("git") else repository_url(meta)
    if repo is None:
        return message, "point `coderun projects add` at a checkout of the project's repository, which has the tests"
    version = src["pypi"].partition("==")[2] if src.get("pypi") else meta.version
    if not version:
        return f"{message}; its repository probably has them: {repo}", f"coderun projects add {repo} --rev TAG"
    return (f"{message}; its repository probably has them: {repo} (from the project's metadata)",
            f"coderun projects add {repo} --rev v{version}   (the release's tag; {version} is tried too)")


def source_date(src: dict, co: Checkout, settings: Settings) -> tuple[dt.date, str] | None:
    """The day the source is from, and how that is known: a git commit's date, or the time the sdist was
    made (its PKG-INFO's timestamp in the archive). A directory has none."""
    if src.get("git"):
        return commit_date(co), "resolve_as_of: the commit's date; dependencies are resolved among the releases up to then"
    if not src.get("pypi"):
        return None
    archive = download_sdist(src["pypi"], settings)  # cached by the checkout just made
    stamp = _pkg_info_mtime(archive)
    if stamp is None:
        return None
    return stamp, ("resolve_as_of: the day the sdist was made (its PKG-INFO's timestamp); dependencies are "
                   "resolved among the releases up to then")


def _pkg_info_mtime(archive: Path) -> dt.date | None:
    """The PKG-INFO timestamp of an sdist, unless it is a fixed reproducible-build one (0, 1980, hatch's)."""
    try:
        if archive.name.endswith(".zip"):
            with zipfile.ZipFile(archive) as z:
                info = next((i for i in z.infolist() if i.filename.count("/") <= 1
                             and i.filename.endswith("PKG-INFO")), None)
                stamp = dt.datetime(*info.date_time, tzinfo=dt.timezone.utc) if info else None
        else:
            with tarfile.open(archive) as t:
                member = next((m for m in t.getmembers() if m.name.count("/") <= 1
                               and m.name.endswith("PKG-INFO")), None)
                stamp = dt.datetime.fromtimestamp(member.mtime, dt.timezone.utc) if member else None
    except (OSError, tarfile.TarError, zipfile.BadZipFile):
        return None
    if stamp is None or stamp.year < 2000 or stamp.date() == dt.date(2020, 2, 2) \
            or stamp.date() > dt.date.today():
        return None
    return stamp.date()


def _dirty_warning(path: Path) -> list[str]:
    try:
        repo = git.Repo(path)
        if repo.head.is_valid() and repo.is_dirty(untracked_files=False):
            return [f"{path} has uncommitted changes; the draft uses the last commit, which does not have them"]
        if not repo.head.is_valid():
            return []
    except (git.InvalidGitRepositoryError, git.GitCommandError, ValueError):
        return []
    return []


def _sanitize(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-._") or "project"


# ----------------------------------------------------------------------------------------- metadata


@dataclass
class Metadata:
    """What the packaging files declare (pyproject [project] > setup.cfg > setup.py > PKG-INFO)."""
    name: str | None = None
    version: str | None = None  # an sdist's PKG-INFO Version
    summary: str | None = None
    requires_python: list[tuple[str, str]] = field(default_factory=list)  # (specifier, from file)
    classifiers: list[str] = field(default_factory=list)
    dependencies: list[str] | None = None  # None: not statically known
    extras: dict[str, list[str]] = field(default_factory=dict)
    tests_require: list[str] = field(default_factory=list)
    build: str | None = None       # the file that builds the project, if any
    vcs_version: bool = False      # the version comes from git tags (the build copy has no .git)
    namespace: bool = False        # setup.py declares namespace_packages
    package_dir: str | None = None  # e.g. "src"
    test_suite: str | None = None
    read_files: list[str] = field(default_factory=list)  # requirement files setup.py reads
    py_modules: list[str] | None = None  # top-level modules the build ships, when declared
    urls: dict[str, str] = field(default_factory=dict)  # project URLs by label (Source, Homepage, …)
    sources: list[str] = field(default_factory=list)


def _toml(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return {}


def _cfg(path: Path) -> configparser.ConfigParser | None:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, configparser.Error):
        return None
    return parser


def _lines(value: str | None) -> list[str]:
    out = []
    for line in (value or "").splitlines():
        line = line.split(" #", 1)[0].strip()
        if line and not line.startswith("#"):
            out.append(line)
    return out


def read_metadata(tree: Path) -> Metadata:
    meta = Metadata()
    _read_pkg_info(tree, meta)
    _read_setup_py(tree, meta)
    _read_setup_cfg(tree, meta)
    _read_pyproject(tree, meta)
    return meta


def _read_pyproject(tree: Path, meta: Metadata) -> None:
    data = _toml(tree / "pyproject.toml")
    if not data:
        return
    project, bs = data.get("project", {}), data.get("build-system", {})
    poetry = data.get("tool", {}).get("poetry", {})
    requires = " ".join(bs.get("requires", [])).lower()
    if bs.get("build-backend") or project or poetry.get("name"):
        meta.build = meta.build or "pyproject.toml"
    meta.vcs_version |= any(t in requires for t in ("setuptools_scm", "setuptools-scm", "hatch-vcs",
                                                   "versioningit", "dynamic-versioning", "pbr"))
    meta.name = project.get("name") or poetry.get("name") or meta.name
    meta.summary = project.get("description") or poetry.get("description") or meta.summary
    if project.get("requires-python"):
        meta.requires_python.insert(0, (project["requires-python"], "pyproject.toml requires-python"))
    py = poetry.get("dependencies", {}).get("python")
    if isinstance(py, str):
        meta.requires_python.insert(0, (_poetry_spec(py), "pyproject.toml [tool.poetry] python"))
    meta.classifiers = list(project.get("classifiers") or poetry.get("classifiers") or meta.classifiers)
    meta.urls.update({k: v for k, v in (project.get("urls") or {}).items() if isinstance(v, str)})
    meta.urls.update({k.capitalize(): poetry[k] for k in ("repository", "homepage") if isinstance(poetry.get(k), str)})
    if "dependencies" in project:
        meta.dependencies = list(project["dependencies"])
    elif "dependencies" in project.get("dynamic", []):
        meta.dependencies = None
    meta.extras.update({k: list(v) for k, v in project.get("optional-dependencies", {}).items()})
    for group in ("dev-dependencies",):  # poetry's dev dependencies are what its tests use
        meta.tests_require += [_poetry_req(k, v) for k, v in poetry.get(group, {}).items()]
    for gname, group in poetry.get("group", {}).items():
        if gname in _TEST_EXTRAS:
            meta.tests_require += [_poetry_req(k, v) for k, v in group.get("dependencies", {}).items()]
    where = data.get("tool", {}).get("setuptools", {}).get("packages", {})
    if isinstance(where, dict) and where.get("find", {}).get("where"):
        meta.package_dir = where["find"]["where"][0].strip("/")
    meta.sources.append("pyproject.toml")


def _poetry_spec(spec: str) -> str:
    """Poetry's ^X.Y / ~X.Y constraints as a PEP 440 lower bound (enough to choose a Python)."""
    parts = [p.strip() for p in spec.split(",")]
    return ",".join(re.sub(r"^[\^~](?!=)", ">=", p) if p not in ("*", "") else ">=3" for p in parts)


def _poetry_req(name: str, value: object) -> str:
    version = value.get("version", "*") if isinstance(value, dict) else str(value)
    spec = _poetry_spec(version) if version not in ("*", "") else ""
    return f"{name}{spec}" if not spec.startswith(">=3") or name != "python" else name


def _read_setup_cfg(tree: Path, meta: Metadata) -> None:
    cfg = _cfg(tree / "setup.cfg") if (tree / "setup.cfg").is_file() else None
    if cfg is None:
        return
    if cfg.has_section("metadata"):
        meta.name = cfg.get("metadata", "name", fallback=None) or meta.name
        meta.summary = cfg.get("metadata", "description", fallback=None) or meta.summary
        meta.classifiers = _lines(cfg.get("metadata", "classifiers", fallback="")) or meta.classifiers
    if cfg.has_section("options"):
        opts = dict(cfg.items("options"))
        if opts.get("python_requires"):
            meta.requires_python.insert(0, (opts["python_requires"], "setup.cfg python_requires"))
        if "install_requires" in opts:
            meta.dependencies = _lines(opts["install_requires"])
        meta.tests_require += _lines(opts.get("tests_require"))
        meta.test_suite = opts.get("test_suite") or meta.test_suite
        if opts.get("py_modules"):
            meta.py_modules = _lines(opts["py_modules"])
        pdir = re.search(r"=\s*([\w./-]+)", opts.get("package_dir", ""))
        if pdir:
            meta.package_dir = pdir.group(1).strip("/")
        meta.vcs_version |= "setuptools_scm" in opts.get("setup_requires", "")
    if cfg.has_section("options.extras_require"):
        meta.extras.update({k: _lines(v) for k, v in cfg.items("options.extras_require")})
    if cfg.has_section("metadata") or cfg.has_section("options"):
        meta.sources.append("setup.cfg")


def _read_pkg_info(tree: Path, meta: Metadata) -> None:
    """An sdist's PKG-INFO: the metadata setup.py computed when the sdist was made."""
    path = tree / "PKG-INFO"
    if not path.is_file():
        return
    msg = HeaderParser().parsestr(path.read_text(encoding="utf-8", errors="replace"))
    meta.name, meta.summary, meta.version = msg.get("Name"), msg.get("Summary"), msg.get("Version")
    if msg.get("Requires-Python"):
        meta.requires_python.append((msg["Requires-Python"], "PKG-INFO Requires-Python"))
    meta.classifiers = msg.get_all("Classifier") or []
    if msg.get("Home-page") and msg["Home-page"] != "UNKNOWN":
        meta.urls.setdefault("Homepage", msg["Home-page"])
    for entry in msg.get_all("Project-URL") or []:
        label, _, url = entry.partition(",")
        meta.urls.setdefault(label.strip(), url.strip())
    reqs = msg.get_all("Requires-Dist") or []
    if reqs:
        meta.dependencies = []
        for r in reqs:
            extra = re.search(r"""extra\s*==\s*['"]([^'"]+)['"]""", r)
            if extra:
                req = re.sub(r"""\s*;?\s*(and\s+)?extra\s*==\s*['"][^'"]+['"]""", "", r).rstrip("; ")
                meta.extras.setdefault(extra.group(1), []).append(req)
            else:
                meta.dependencies.append(r)
    meta.sources.append("PKG-INFO")


class _Unknown:
    pass


_UNKNOWN = _Unknown()


def _eval(node: ast.AST, env: dict[str, object]) -> object:
    """A literal value of `node`, following module-level names; _UNKNOWN for anything computed."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return env.get(node.id, _UNKNOWN)
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        items = [_eval(e, env) for e in node.elts]
        return _UNKNOWN if any(i is _UNKNOWN for i in items) else list(items)
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            return _UNKNOWN
        keys = [_eval(k, env) for k in node.keys]  # type: ignore[arg-type]
        vals = [_eval(v, env) for v in node.values]
        if any(x is _UNKNOWN for x in keys + vals):
            return _UNKNOWN
        return dict(zip(keys, vals, strict=True))  # type: ignore[arg-type]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _eval(node.left, env), _eval(node.right, env)
        if isinstance(left, list) and isinstance(right, list):
            return left + right
        if isinstance(left, str) and isinstance(right, str):
            return left + right
    return _UNKNOWN


def _setup_call(module: ast.Module) -> ast.Call | None:
    for node in ast.walk(module):
        if isinstance(node, ast.Call):
            f = node.func
            fname = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            if fname == "setup":
                return node
    return None


def _read_setup_py(tree: Path, meta: Metadata) -> None:
    path = tree / "setup.py"
    if not path.is_file():
        return
    meta.build = "setup.py"
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        module = ast.parse(text)
    except SyntaxError:
        return
    env: dict[str, object] = {}
    for stmt in module.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            env[stmt.targets[0].id] = _eval(stmt.value, env)
    call = _setup_call(module)
    kwargs: dict[str, object] = {}
    if call is not None:
        for kw in call.keywords:
            value = _eval(kw.value, env)
            if kw.arg is None and isinstance(value, dict):
                kwargs.update(value)
            elif kw.arg:
                kwargs[kw.arg] = value
            else:
                kwargs["**"] = _UNKNOWN  # setup(**computed): what it holds is not known
    _apply_setup_kwargs(kwargs, meta, complete=call is not None and "**" not in kwargs)
    meta.vcs_version |= "use_scm_version" in text or "pbr=True" in text.replace(" ", "")
    meta.read_files = sorted({m for m in re.findall(r"""['"]([\w./-]*requirements[\w./-]*\.(?:txt|in))['"]""",
                                                    text) if (tree / m).is_file()})
    meta.sources.append("setup.py")


def _apply_setup_kwargs(kwargs: dict[str, object], meta: Metadata, *, complete: bool) -> None:
    def strs(v: object) -> list[str] | None:
        if isinstance(v, str):
            return _lines(v)
        if isinstance(v, list) and all(isinstance(x, str) for x in v):
            return list(v)
        return None

    if isinstance(kwargs.get("name"), str):
        meta.name = kwargs["name"]  # type: ignore[assignment]
    if isinstance(kwargs.get("description"), str):
        meta.summary = kwargs["description"]  # type: ignore[assignment]
    if isinstance(kwargs.get("python_requires"), str):
        meta.requires_python.insert(0, (kwargs["python_requires"], "setup.py python_requires"))
    if strs(kwargs.get("classifiers")):
        meta.classifiers = strs(kwargs["classifiers"]) or []
    if strs(kwargs.get("install_requires")) is not None:
        meta.dependencies = strs(kwargs["install_requires"])
    elif "install_requires" not in kwargs and complete and meta.dependencies is None:
        meta.dependencies = []
    meta.tests_require += strs(kwargs.get("tests_require")) or []
    extras = kwargs.get("extras_require")
    if isinstance(extras, dict):
        meta.extras.update({k: strs(v) or [] for k, v in extras.items() if isinstance(k, str)})
    pdir = kwargs.get("package_dir")
    if isinstance(pdir, dict) and isinstance(pdir.get(""), str):
        meta.package_dir = pdir[""].strip("/")
    meta.namespace |= bool(kwargs.get("namespace_packages"))
    if isinstance(kwargs.get("test_suite"), str):
        meta.test_suite = kwargs["test_suite"]  # type: ignore[assignment]
    if strs(kwargs.get("py_modules")) is not None:
        meta.py_modules = strs(kwargs["py_modules"])
    if isinstance(kwargs.get("url"), str):
        meta.urls.setdefault("Homepage", kwargs["url"])  # type: ignore[arg-type]
    if isinstance(kwargs.get("project_urls"), dict):
        meta.urls.update({k: v for k, v in kwargs["project_urls"].items()  # type: ignore[union-attr]
                          if isinstance(k, str) and isinstance(v, str)})
    if "use_scm_version" in kwargs or "setuptools_scm" in str(kwargs.get("setup_requires", "")):
        meta.vcs_version = True


# ------------------------------------------------------------------------------------ requirements


def dist_key(req: str) -> str:
    """The normalized distribution name of a requirement string ("" when it is not one)."""
    m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
    return re.sub(r"[-_.]+", "-", m.group(1)).lower() if m else ""


def _valid_req(req: str) -> bool:
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
        elif _NOT_FOR_TESTS.match(dist_key(line).replace("-", "[-_]")) or _NOT_FOR_TESTS.match(dist_key(line)):
            dropped.append(line)
        elif _valid_req(line):
            keep.append(line)
        else:
            dropped.append(line)
    return keep, dropped


def _test_requirement_files(tree: Path) -> list[str]:
    pattern = re.compile(r"^(?:(?:requirements|reqs)[-_/.]?)?(?:test|tests|testing|dev|develop|ci)"
                         r"(?:[-_.]?(?:requirements|reqs))?\.txt$", re.I)
    found = [p for p in [*tree.glob("*.txt"), *tree.glob("requirements/*.txt"), *tree.glob("tests/requirements*.txt")]
             if pattern.match(p.relative_to(tree).as_posix().replace("requirements/", "requirements-"))
             or p.relative_to(tree).as_posix() in ("tests/requirements.txt",)]
    rels = sorted(p.relative_to(tree).as_posix() for p in found)
    tests = [r for r in rels if re.search(r"test", r, re.I)]
    return tests or [r for r in rels if re.search(r"dev|ci", r, re.I)][:1]


def _tox_deps(tree: Path) -> list[str]:
    cfg = _cfg(tree / "tox.ini") if (tree / "tox.ini").is_file() else None
    if cfg is None or not cfg.has_section("testenv"):
        return []
    out = []
    for line in _lines(cfg.get("testenv", "deps", fallback="")):
        if "://" in line or "{" in line.split(":")[0] and ":" not in line:
            continue
        factor = re.match(r"^[\w{},.!-]+:\s*(.+)$", line)
        line = factor.group(1) if factor and not line.startswith("-") else line
        if line.startswith("-") or "{" in line:
            continue
        if _valid_req(line) and not _NOT_FOR_TESTS.match(dist_key(line)):
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


# ---------------------------------------------------------------------------------------- builder


def _pytest_ini(tree: Path) -> tuple[dict[str, object], str | None]:
    """pytest's own configuration, from the file pytest would read first."""
    if (tree / "pytest.ini").is_file():
        cfg = _cfg(tree / "pytest.ini")
        if cfg and cfg.has_section("pytest"):
            return dict(cfg.items("pytest")), "pytest.ini"
    opts = _toml(tree / "pyproject.toml").get("tool", {}).get("pytest", {}).get("ini_options")
    if opts is not None:
        return dict(opts), "pyproject.toml [tool.pytest.ini_options]"
    for fname, section in (("tox.ini", "pytest"), ("setup.cfg", "tool:pytest"), ("setup.cfg", "pytest")):
        cfg = _cfg(tree / fname) if (tree / fname).is_file() else None
        if cfg and cfg.has_section(section):
            return dict(cfg.items(section)), f"{fname} [{section}]"
    return {}, None


def _words(value: object) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value]
    return str(value or "").split()


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
        for m in re.finditer(r"(?:^|[^\d.])(?:py|python:?)?3\.?(\d{1,2})(?![\d])", text):
            if key in ("image", "toxenv", "tox-env") and not re.search(r"py|python", text):
                continue
            found.add(int(m.group(1)))


@dataclass
class _Builder:
    tree: Path
    meta: Metadata
    warnings: list[str]
    as_of: tuple[dt.date, str] | None = None
    notes: dict[str, list[str]] = field(default_factory=dict)

    def note(self, section: str, text: str) -> None:
        self.notes.setdefault(section, []).append(text)

    def build(self, *, name: str, source: dict, co: Checkout) -> dict:
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
        cfg = _cfg(self.tree / "setup.cfg") if (self.tree / "setup.cfg").is_file() else None
        if cfg is not None and cfg.has_section("pytest") and not cfg.has_section("tool:pytest"):
            install["pre_install"] = [_RENAME_PYTEST_SECTION]
            self.note("install", "pre_install: setup.cfg's [pytest] section is an error since pytest 4, which coderun "
                      "needs; it becomes [tool:pytest]")
        if self.as_of:
            install["resolve_as_of"] = self.as_of[0]
            self.note("install", self.as_of[1])
        if install:
            data["install"] = install
        data["tests"] = tests
        data["tasks"] = {"discover": self.discovery(import_root, tests.get("paths", []))}
        return data

    # -- python ------------------------------------------------------------------------------------

    def python_version(self) -> str:
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
                chosen_from = sorted(m for m in chosen_from if _have_python(m))[:1] or chosen_from[:1]
        installed = next((m for m in sorted(chosen_from, reverse=True) if _have_python(m)), None)
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
        cfg = _cfg(self.tree / "tox.ini") if (self.tree / "tox.ini").is_file() else None
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

    # -- layout ------------------------------------------------------------------------------------

    def import_root(self) -> str:
        pdir = self.meta.package_dir
        if pdir and (self.tree / pdir).is_dir():
            self.note("import_root", f"the packages live in {pdir}/ (package_dir)")
            return pdir
        src = self.tree / "src"
        if src.is_dir() and any((d / "__init__.py").is_file() or d.suffix == ".py" for d in src.iterdir()):
            self.note("import_root", "src layout: the packages live in src/")
            return "src"
        return "."

    def packages(self, import_root: str) -> tuple[list[str], list[str]]:
        """(package directories, top-level modules) at the import root, relative to the tree."""
        root = self.tree / import_root
        pkgs, mods = [], []
        for p in sorted(root.iterdir()):
            rel = p.relative_to(self.tree).as_posix()
            if p.name.startswith((".", "_")) or p.name in _NOT_PACKAGES or p.name.endswith(".egg-info"):
                continue
            if p.is_dir() and ((p / "__init__.py").is_file() or (p.name in _NAMESPACES)):
                pkgs.append(rel)
            elif p.suffix == ".py" and p.name not in ("setup.py", "conftest.py", "noxfile.py", "fabfile.py",
                                                      "tasks.py", "conf.py", "versioneer.py") \
                    and not _is_test_name(p.name) \
                    and (self.meta.py_modules is None or p.stem in self.meta.py_modules):
                mods.append(rel)  # with py_modules declared, a root benchmark.py is not the project's
        return pkgs, mods

    # -- tests -------------------------------------------------------------------------------------

    def tests_section(self, import_root: str) -> tuple[dict, list[str], dict[str, list[str]]]:
        """(tests section, pytest plugins the configuration needs, distributions the tests import)."""
        ini, ini_file = _pytest_ini(self.tree)
        paths = self.test_paths(ini, ini_file, import_root)
        files = [f for p in paths for f in _py_files(self.tree / p)]
        kinds = {f: _test_kind(f) for f in files}
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
        needy = self.suites_needing_services(paths)
        if needy:
            args += [f"--ignore={d}" for d in needy]
            self.note("tests", f"{', '.join(needy)}: integration, functional or performance tests, which need "
                      "servers, a network or long timings that a sandbox does not have; left out")
            files = [f for f in files if not any(f.is_relative_to(self.tree / d) for d in needy)]
        if args:
            tests["args"] = args
        imported = self.test_imports(files, import_root)
        django = self.django_settings(ini, files, import_root)
        if django:
            tests["env"] = {"DJANGO_SETTINGS_MODULE": django}
            reqs.append("pytest-django")
        return tests, reqs, imported

    def test_paths(self, ini: dict, ini_file: str | None, import_root: str) -> list[str]:
        configured = [p.rstrip("/") for p in _words(ini.get("testpaths"))]
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
            if (self.tree / d).is_dir() and any(_test_kind(f) for f in _py_files(self.tree / d)):
                return [d]
        pkgs, _mods = self.packages(import_root)
        inner = [f"{p}/{d}" for p in pkgs for d in ("tests", "test") if (self.tree / p / d).is_dir()]
        inner += [f"{p}/{f}" for p in pkgs for f in ("tests.py", "test.py") if (self.tree / p / f).is_file()]
        if inner:
            return inner
        top = [p.name for p in sorted(self.tree.glob("*.py")) if _is_test_name(p.name) and _test_kind(p)]
        if top:
            return top
        # Tests spread through the package itself (zope style: pkg/tests/ deeper down).
        spread = sorted({f.parent.relative_to(self.tree).as_posix() for p in pkgs
                         for f in (self.tree / p).rglob("test*.py") if _test_kind(f)})
        return pkgs if spread else []

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
        cfg = _cfg(self.tree / "tox.ini") if (self.tree / "tox.ini").is_file() else None
        if cfg is None:
            return []
        # A `unit` environment runs the tests that need nothing more than the code: it comes first.
        sections = [sec for sec in cfg.sections() if re.fullmatch(r"testenv:.*\bunit\w*", sec)]
        sections += ["testenv"] if cfg.has_section("testenv") else []
        lines = [line for sec in sections for line in _lines(cfg.get(sec, "commands", fallback=""))]
        for line in lines:
            try:
                words = shlex.split(line)
            except ValueError:
                continue
            if not any(w in ("pytest", "py.test") or w.endswith("/pytest") for w in words[:3]):
                continue
            paths = [w.rstrip("/") for w in words[1:] if not w.startswith(("-", "{")) and w != "pytest"
                     and (self.tree / w).exists() and _holds_tests(self.tree / w)]
            if paths:
                return paths
        return []

    def pytest_args(self, ini: dict, ini_file: str | None, test_files: list[Path],
                    paths: list[str]) -> tuple[list[str], list[str]]:
        args: list[str] = []
        reqs: list[str] = []
        addopts = shlex.split(" ".join(_words(ini.get("addopts"))))
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
        reqs += _words(ini.get("required_plugins"))
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
        named = [f for f in test_files if not _is_test_name(f.name) and _defines_tests(f)
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
                m.split(".")[0] == "django" for f in files for m in _imports(f)):
            return None
        found = sorted((f for f in files if f.name in ("settings.py", "test_settings.py")),
                       key=lambda f: len(f.parts))
        if not found:
            return None
        module = found[0].relative_to(self.tree / import_root).with_suffix("").as_posix().replace("/", ".")
        self.note("tests", f"the tests use Django: settings module {module}, run with pytest-django")
        return module

    def test_imports(self, files: list[Path], import_root: str) -> dict[str, list[str]]:
        """Distributions the tests import unconditionally (the local ones left out), and the files that do."""
        # Importable without installing: what sits at the roots, and modules beside tests in plain directories
        # (pytest puts such a directory on sys.path).
        roots = {self.tree, self.tree / import_root} | {f.parent for f in files if not (f.parent / "__init__.py").is_file()}
        local = {p.stem if p.suffix == ".py" else p.name for r in roots for p in r.iterdir()}
        pkgs, mods = self.packages(import_root)
        own = {Path(p).name for p in pkgs} | {Path(m).stem for m in mods}
        stdlib = set(sys.stdlib_module_names) | {"__future__"}
        wanted: dict[str, list[str]] = {}
        for f in files:
            for mod in _imports(f):
                top = mod.split(".")[0]
                if top in stdlib or top in own or top in local or top.startswith("_") and top != "_pytest":
                    continue
                dist = ".".join(mod.split(".")[:2]) if top in _NAMESPACES and "." in mod else _DIST_OF.get(top, top)
                rel = f.relative_to(self.tree).as_posix()
                if rel not in wanted.setdefault(dist, []):
                    wanted[dist].append(rel)
        return wanted

    def on_index(self, requirement: str) -> bool:
        """Whether pip's package index (pip's own configuration) has a distribution of this name; an index
        that cannot be asked counts as having it."""
        try:  # offline, pip would retry for minutes: one short try, and an unanswered question is a yes
            proc = subprocess.run([*pip_command(), "index", "versions", "--disable-pip-version-check", "--retries",
                                   "1", "--timeout", "15", dist_key(requirement)], capture_output=True, text=True,
                                  stdin=subprocess.DEVNULL, timeout=60)
        except subprocess.TimeoutExpired:
            return True
        return proc.returncode == 0 or "No matching distribution" not in proc.stderr + proc.stdout

    # -- install -----------------------------------------------------------------------------------

    def install_section(self, plugins: list[str], imports: dict[str, list[str]], import_root: str,
                        tests: dict) -> dict:
        install: dict[str, object] = {}
        meta = self.meta
        runtime: list[str] = []
        namespace = meta.namespace or any(
            re.search(r"declare_namespace|extend_path", (self.tree / p / "__init__.py").read_text(errors="replace"))
            for p in self.packages(import_root)[0] if (self.tree / p / "__init__.py").is_file())
        vcs = meta.vcs_version and not (self.tree / "PKG-INFO").is_file()
        if meta.build and not vcs and not namespace:
            install["project"] = True
            self.note("install", f"project: the {meta.build} build installs the project's own dependencies")
            extras = [e for e in _TEST_EXTRAS if e in meta.extras][:1]
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
            extra = next((e for e in _TEST_EXTRAS if e in meta.extras), None)
            runtime += meta.extras.get(extra, []) if extra else []
            if not meta.dependencies and (self.tree / "requirements.txt").is_file() and not meta.read_files:
                install["requirements_files"] = ["requirements.txt"]
                self.note("install", "requirements.txt holds the project's dependencies")
        files_kept: list[str] = []
        inline: list[str] = []
        for rel in _test_requirement_files(self.tree):
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
        declared = [*(meta.dependencies or []), *[r for v in meta.extras.values() for r in v]]
        for rel in files_kept + list(install.get("requirements_files", [])) + meta.read_files:  # type: ignore[operator]
            declared += read_requirements_file(self.tree, rel)[0]
        tox = _tox_deps(self.tree)
        if tox:
            self.note("install", "test dependencies from tox.ini [testenv] deps")
        if meta.tests_require:
            self.note("install", "test dependencies from tests_require")
        known = {dist_key(d) for d in [*declared, *meta.tests_require, *tox, *inline, *plugins]} | {"pytest"}
        imported = [r for r in imports if dist_key(r) not in known]
        missing = [r for r in imported if not self.on_index(r)]
        if missing:
            files = sorted({f for r in missing for f in imports[r]})
            imported = [r for r in imported if r not in missing]
            tests["args"] = [*tests.get("args", []), *[f"--ignore={f}" for f in files]]
            self.note("tests", f"{', '.join(files)} import{'s' if len(files) == 1 else ''} "
                      f"{', '.join(missing)}, which nothing declares and the package index does not have: left out")
        reqs = dedupe([*runtime, *inline, *meta.tests_require, *tox, *plugins, *imported],
                      skip=[*([] if runtime else declared), *(meta.name and [meta.name] or [])])
        reqs = [r for r in reqs if _valid_req(r) and not _NOT_FOR_TESTS.match(dist_key(r))]
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

    # -- tasks -------------------------------------------------------------------------------------

    def discovery(self, import_root: str, test_paths: list[str]) -> dict:
        pkgs, mods = self.packages(import_root)
        include = [g for p in pkgs for g in (f"{p}/*.py", f"{p}/**/*.py")] or mods
        exclude = []
        for t in test_paths:
            if any(t == p or t.startswith(p + "/") for p in pkgs + mods):
                exclude += [t, f"{t}/**"] if (self.tree / t).is_dir() else [t]
        self.note("tasks", "functions are discovered in the project's own packages, not its tests")
        out: dict[str, object] = {"include": include}
        if exclude:
            out["exclude"] = exclude
        return out


@functools.cache
def _have_python(minor: int) -> bool:
    from coderun.envs.local import find_python

    return find_python(f"3.{minor}")[1]


def _warning_filters(ini: dict) -> list[str]:
    value = ini.get("filterwarnings")
    return [str(v) for v in value] if isinstance(value, list) else _lines(str(value or ""))


def _holds_tests(path: Path) -> bool:
    """A test directory, or a test module by its name (a benchmark script defining test_ functions is not)."""
    if path.is_dir():
        return any(_is_test_name(f.name) or f.parent.name in ("tests", "test") for f in _py_files(path)
                   if _test_kind(f))
    return _is_test_name(path.name) or path.parent.name in ("tests", "test")


def _is_test_name(name: str) -> bool:
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def _py_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path] if path.suffix == ".py" else []
    return sorted(p for p in path.rglob("*.py") if "__pycache__" not in p.parts) if path.is_dir() else []


def _parse(path: Path) -> ast.Module | None:
    try:
        return ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (SyntaxError, ValueError):
        return None


def _test_kind(path: Path) -> str | None:
    """"unittest" for TestCase suites only, "pytest" for anything pytest-specific, None for no tests."""
    module = _parse(path)
    if module is None:
        return None
    has_case = has_plain = False
    for node in ast.walk(module):
        if isinstance(node, ast.ClassDef):
            bases = [ast.unparse(b) for b in node.bases]
            if any(b.endswith("TestCase") or b.endswith("TestSuite") for b in bases):
                has_case = True
            elif node.name.startswith("Test") and any(isinstance(n, ast.FunctionDef) and n.name.startswith("test")
                                                      for n in node.body):
                has_plain = True
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(n.split(".")[0] == "pytest" for n in names):
                has_plain = True
    has_plain |= any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name.startswith("test")
                     for n in module.body)
    if has_plain:
        return "pytest"
    return "unittest" if has_case else None


def _defines_tests(path: Path) -> bool:
    """Whether a module defines test functions or test methods (not just fixtures or helpers)."""
    module = _parse(path)
    if module is None:
        return False
    for node in module.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            return True
        if isinstance(node, ast.ClassDef) and any(
                isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name.startswith("test")
                for n in node.body):
            return True
    return False


def _imports(path: Path) -> list[str]:
    """Modules imported unconditionally (imports under try/if are optional, so they are left out)."""
    module = _parse(path)
    if module is None:
        return []
    out: list[str] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Try, ast.If)) or (sys.version_info >= (3, 11) and
                                                         isinstance(child, getattr(ast, "TryStar", ast.Try))):
                continue
            if isinstance(child, ast.Import):
                out.extend(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                out.append(child.module)
            else:
                visit(child)

    visit(module)
    return out


# ----------------------------------------------------------------------------------------- render

_ORDER = ("name", "description", "source", "python", "import_root", "install", "tests", "tasks")


def render(data: dict, notes: dict[str, list[str]], *, source: str, co: Checkout, warnings: list[str]) -> str:
    head = [f"# Drafted by `coderun projects add {source}` from {co.kind} source at commit {co.commit[:12]}.",
            "# Every value below was read from the project's files; check them, then run",
            "# `coderun env build <this file>` and look at the baseline.",
            "# Reference of every field: README.md, section \"Project manifests\"."]
    head += [f"# WARNING: {w}" for w in warnings]
    out = ["\n".join(head), ""]
    for key in _ORDER:
        if key not in data:
            continue
        section = {"description": "name", "source": "name", "import_root": "import_root"}.get(key, key)
        for note in notes.get(key, []) if section == key else []:
            out.append(_comment(note))
        out.append(yaml.dump({key: data[key]}, Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                             width=110, allow_unicode=True).rstrip())
    return "\n".join(out) + "\n"


class _Dumper(yaml.SafeDumper):
    """Block style, except that a short list of plain strings stays on one line (as people write it)."""


def _represent_list(dumper: yaml.SafeDumper, value: list) -> yaml.Node:
    flow = all(isinstance(v, str) for v in value) and sum(len(v) + 4 for v in value) < 90
    return dumper.represent_sequence("tag:yaml.org,2002:seq", value, flow_style=flow)


_Dumper.add_representer(list, _represent_list)


def _comment(text: str) -> str:
    import textwrap

    return "\n".join("# " + line for line in textwrap.wrap(text, 106))
