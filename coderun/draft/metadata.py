"""What the packaging files declare: pyproject.toml, setup.cfg, setup.py (read with `ast`, never run), PKG-INFO."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from email.parser import HeaderParser
from pathlib import Path

from coderun.draft.configfiles import cfg_lines, read_cfg, read_toml

# Extras (and poetry groups) that hold test dependencies, best first.
TEST_EXTRAS = ("test", "tests", "testing", "dev", "develop", "development")


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


def read_metadata(tree: Path) -> Metadata:
    meta = Metadata()
    _read_pkg_info(tree, meta)
    _read_setup_py(tree, meta)
    _read_setup_cfg(tree, meta)
    _read_pyproject(tree, meta)
    return meta


def _read_pyproject(tree: Path, meta: Metadata) -> None:
    data = read_toml(tree / "pyproject.toml")
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
        if gname in TEST_EXTRAS:
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
    cfg = read_cfg(tree / "setup.cfg") if (tree / "setup.cfg").is_file() else None
    if cfg is None:
        return
    if cfg.has_section("metadata"):
        meta.name = cfg.get("metadata", "name", fallback=None) or meta.name
        meta.summary = cfg.get("metadata", "description", fallback=None) or meta.summary
        meta.classifiers = cfg_lines(cfg.get("metadata", "classifiers", fallback="")) or meta.classifiers
    if cfg.has_section("options"):
        opts = dict(cfg.items("options"))
        if opts.get("python_requires"):
            meta.requires_python.insert(0, (opts["python_requires"], "setup.cfg python_requires"))
        if "install_requires" in opts:
            meta.dependencies = cfg_lines(opts["install_requires"])
        meta.tests_require += cfg_lines(opts.get("tests_require"))
        meta.test_suite = opts.get("test_suite") or meta.test_suite
        if opts.get("py_modules"):
            meta.py_modules = cfg_lines(opts["py_modules"])
        pdir = re.search(r"=\s*([\w./-]+)", opts.get("package_dir", ""))
        if pdir:
            meta.package_dir = pdir.group(1).strip("/")
        meta.vcs_version |= "setuptools_scm" in opts.get("setup_requires", "")
    if cfg.has_section("options.extras_require"):
        meta.extras.update({k: cfg_lines(v) for k, v in cfg.items("options.extras_require")})
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
            return cfg_lines(v)
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
