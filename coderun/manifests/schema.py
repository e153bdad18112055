"""Project manifests (`projects/*.yaml`): schema, loading with located errors, and lookup by name.

A manifest is converted once, here, into a frozen `Manifest`; every later stage takes only that.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from pathlib import Path, PurePosixPath
from typing import ClassVar, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from coderun.config import BUILTIN_PROJECTS_DIR, Settings
from coderun.errors import ManifestError, ProjectNotFound


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GitSource(_Strict):
    url: str = Field(description="clone URL, file:// URL or local path of a git repository")
    rev: str = Field(description="tag, branch or full commit; resolved and recorded as a commit sha")


class Source(_Strict):
    git: GitSource | None = None
    pypi: str | None = Field(None, description='"pkg==version": the sdist from the package index')
    path: str | None = Field(None, description="a directory, relative to the manifest file")

    @model_validator(mode="after")
    def _exactly_one(self) -> Source:
        given = [k for k in ("git", "pypi", "path") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                f"give exactly one of git, pypi, path (got {', '.join(given) if given else 'none'})")
        return self

    @field_validator("pypi")
    @classmethod
    def _pinned(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9.+!_-]+", v.strip()):
            raise ValueError(f'pypi source must be pinned as "name==version", got {v!r}')
        return v.strip() if v else v

    @property
    def kind(self) -> str:
        return "git" if self.git else "pypi" if self.pypi else "path"


class Install(_Strict):
    requirements: list[str] = Field(default_factory=list, description="pip requirement strings")
    requirements_files: list[str] = Field(default_factory=list, description="files in the repository")
    extras: list[str] = Field(default_factory=list, description="extras of the project to install")
    project: bool = Field(False, description="also pip-install the project itself (--no-deps) for its "
                          "metadata and entry points; its code is always imported from the sample's copy")
    pip_args: list[str] = Field(default_factory=list, description="extra arguments for pip install")
    apt: list[str] = Field(default_factory=list, description="Debian packages (docker backend only)")
    pre_install: list[str] = Field(default_factory=list, description="shell commands run in the "
                                   "source tree before pip")
    resolve_as_of: dt.date | Literal[False] | None = Field(
        None, description="resolve dependencies among the releases up to this day (default for git sources: "
        "the commit's date); false: today's releases")


    def key_data(self) -> dict:
        """The fields for build keys; an unset resolve_as_of is left out, so keys made before it existed hold."""
        data = self.model_dump(mode="json")
        if data.get("resolve_as_of") is None:
            data.pop("resolve_as_of", None)
        return data


class IgnoredTest(_Strict):
    test: str = Field(description="pytest node id or node id prefix")
    reason: str


class Configuration(_Strict):
    """One setting the tests run in, for functions whose behaviour depends on it (e.g. a C extension used
    or not): its variables go over tests.env, and `null` removes one."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    env: dict[str, str | None] = Field(default_factory=dict)


class Tests(_Strict):
    runner: Literal["pytest", "unittest"] = "pytest"
    paths: list[str] = Field(default_factory=list, description="test files or directories")
    args: list[str] = Field(default_factory=list, description="extra runner arguments")
    timeout_per_test: float = Field(60.0, gt=0, description="seconds one test may take")
    timeout: float = Field(1800.0, gt=0, description="seconds the whole run may take")
    env: dict[str, str] = Field(default_factory=dict)
    ignore: list[IgnoredTest] = Field(default_factory=list)
    services: list[Literal["postgresql", "redis", "etcd"]] = Field(
        default_factory=list, description="servers the tests need, started on loopback before every test run")
    supplementary: list[str] = Field(
        default_factory=list, description="test files (and files they read) written for this benchmark, kept "
        "in the folder named after the project beside the manifest (projects/<name>/tests/...) and copied into "
        "the tree at the same relative path before tests run; tasks they reach are marked")
    configurations: list[Configuration] = Field(
        default_factory=list, description="settings the tasks are verified and evaluated in, each on top of "
        "env; a sample passes only if it passes in every one (none: tests.env alone)")

    @field_validator("configurations")
    @classmethod
    def _distinct(cls, v: list[Configuration]) -> list[Configuration]:
        names = [c.name for c in v]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"configuration names must differ: {', '.join(twice)} given twice")
        return v

    # The baseline runs in tests.env alone, so its keys leave the configurations out (and keys made before
    # they existed still hold).
    BASELINE_EXCLUDE: ClassVar[set[str]] = {"configurations"}


class TaskTarget(_Strict):
    function: str = Field(description='"path/to/file.py::Qual.name"')
    human_docstring: str | None = None
    aliases: list[str] = Field(default_factory=list, description="other ids, e.g. a CoderEval _id")
    status_note: str | None = Field(None, description="why this task is not expected to verify (the function "
                                    "is absent, no test reaches it, a package is missing…); shown by tasks list")

    @field_validator("function")
    @classmethod
    def _form(cls, v: str) -> str:
        file, sep, qual = v.partition("::")
        if not sep or not file.endswith(".py") or not qual:
            raise ValueError(f'task function must look like "pkg/mod.py::Class.method", got {v!r}')
        return v

    @property
    def file(self) -> str:
        return self.function.partition("::")[0]

    @property
    def qualname(self) -> str:
        return self.function.partition("::")[2]


class Discovery(_Strict):
    enabled: bool = True
    min_body_lines: int = Field(4, ge=1, description="CoderEval: more than three lines of body")
    max_context_tokens: int | None = Field(None, ge=1)
    include: list[str] = Field(default_factory=list, description="file globs to search (default: all "
                               "non-test files)")
    exclude: list[str] = Field(default_factory=list, description="file globs to skip")
    limit: int | None = Field(None, ge=0, description="at most this many discovered tasks")
    undocumented: bool = Field(False, description="also functions without an English docstring (their prompt "
                               "has the signature and context only); CoderEval keeps documented ones only")


class TaskRules(_Strict):
    targets: list[TaskTarget] = Field(default_factory=list)
    discover: Discovery = Field(default_factory=Discovery)
    # No count cap by default: a task keeps every test that executes its body (what makes coderun stricter than
    # one hand-written test per task), and the published numbers were made that way; the time budget stops
    # the pathological tasks whose tests take minutes.
    max_tests_per_task: int | None = Field(None, ge=1, description="at most this many mapped tests per task "
                                           "(the slowest in the baseline are dropped first); none by default")
    max_seconds_per_task: float = Field(60.0, gt=0, description="at most this much baseline test time per "
                                        "task (slowest dropped first; the fastest test always stays)")


class Manifest(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    description: str = ""
    source: Source
    python: str = Field(pattern=r"^3\.\d+$", description='"3.9", "3.11"…')
    import_root: str = Field(".", description="directory put on sys.path (e.g. src)")
    install: Install = Field(default_factory=Install)
    tests: Tests = Field(default_factory=Tests)
    tasks: TaskRules = Field(default_factory=TaskRules)

    # Where the manifest was read from; not part of its content or its hash.
    origin: Path | None = Field(None, exclude=True)

    def spec_hash(self, *parts: str) -> str:
        """A short hash of the manifest content plus anything else that built an artefact."""
        payload = json.dumps(self.model_dump(mode="json"), sort_keys=True) + "|".join(parts)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    def install_hash(self, *parts: str) -> str:
        # Debian packages go into images only: a venv does not depend on them (an empty list, as keys had it).
        install = {**self.install.key_data(), "apt": []}
        payload = json.dumps({"python": self.python, "install": install}, sort_keys=True)
        return hashlib.sha256((payload + "|".join(parts)).encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------
# Loading with located errors


def _line_of(node: yaml.Node | None, loc: tuple) -> int | None:
    """Walk a composed YAML node along a pydantic error location to the line it points at."""
    line = None
    for key in loc:
        if node is None:
            break
        line = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            nxt = None
            for k, v in node.value:
                if k.value == key:
                    line, nxt = k.start_mark.line + 1, v
                    break
            node = nxt
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
        else:
            node = None
    if node is not None:
        line = node.start_mark.line + 1
    return line


def _format_errors(path: Path, root: yaml.Node | None, exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        loc = tuple(x for x in err["loc"] if not (isinstance(x, str) and x in ("function-after",)))
        field = ".".join(str(x) for x in loc) or "(top level)"
        where = _line_of(root, loc)
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key (check its spelling and indentation)"
        prefix = f"{path}:{where}" if where else str(path)
        lines.append(f"{prefix}: field '{field}': {msg}")
    return "\n".join(lines)


# libyaml's loader when PyYAML has it (10x the pure-Python one: every command that names a project reads
# every manifest, to find the one whose `name` it is); the same documents either way.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse_manifest(text: str, path: Path) -> Manifest:
    try:
        data = yaml.load(text, Loader=_LOADER)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 1}" if mark else ""
        raise ManifestError(f"{path}{where}: not valid YAML: {getattr(e, 'problem', e)}") from None
    if not isinstance(data, dict):
        raise ManifestError(f"{path}: a manifest is a YAML mapping with at least name, source, python")
    try:
        manifest = Manifest.model_validate({**data, "origin": path})
    except ValidationError as e:  # the node tree (line numbers) only for the message
        raise ManifestError(_format_errors(path, yaml.compose(text, Loader=_LOADER), e),
                            hint="see the manifest reference in docs/manifests.md") from None
    supplementary_files(manifest)  # a missing file is an error of the manifest, found when it is read
    return manifest


def supplementary_dir(manifest: Manifest) -> Path | None:
    """Where the manifest's supplementary test files live: the folder named after the project beside it."""
    return manifest.origin.parent / manifest.name if manifest.origin is not None else None


def supplementary_files(manifest: Manifest) -> dict[str, Path]:
    """`tests.supplementary`: each file's path in the project tree -> the file coderun ships."""
    rels = manifest.tests.supplementary
    if not rels:
        return {}
    folder = supplementary_dir(manifest)
    if folder is None:
        raise ManifestError(f"{manifest.name}: tests.supplementary needs a manifest read from a file (the files "
                            "are looked up beside it)")
    out: dict[str, Path] = {}
    for rel in rels:
        pure = PurePosixPath(rel)
        if pure.is_absolute() or ".." in pure.parts or not pure.parts:
            raise ManifestError(f"{manifest.origin}: tests.supplementary: {rel!r} must be a relative path inside "
                                "the project tree")
        path = folder / pure
        if not path.is_file():
            raise ManifestError(f"{manifest.origin}: tests.supplementary: {rel} is not at {path}",
                                hint=f"supplementary files live in {folder}/ at their path in the project tree")
        out[pure.as_posix()] = path
    return out


def load_manifest(path: Path) -> Manifest:
    """The manifest in `path`, parsed once per process while the file is unchanged (finding one project by
    name reads every manifest of its folder: a run did that 124 times)."""
    path = Path(path)
    try:
        stat, origin = path.stat(), path.resolve()
        key = (str(origin), stat.st_mtime_ns, stat.st_size)
        if key not in _parsed:
            _parsed[key] = parse_manifest(path.read_text(encoding="utf-8"), origin)
    except OSError as e:
        raise ManifestError(f"{path}: cannot read manifest: {e.strerror}") from None
    return _parsed[key]


_parsed: dict[tuple[str, int, int], Manifest] = {}  # frozen models, so one can be handed out many times


def manifest_dirs(settings: Settings) -> list[Path]:
    return [BUILTIN_PROJECTS_DIR, *settings.project_dirs]


def manifest_files(settings: Settings) -> list[Path]:
    files: list[Path] = []
    for d in manifest_dirs(settings):
        if d.is_dir():
            files += sorted(d.glob("*.yaml")) + sorted(d.glob("*.yml"))
    return files


def manifest_path(name_or_path: str) -> Path | None:
    """The path, when a PROJECT argument names a manifest file rather than a project."""
    p = Path(name_or_path)
    return p if p.suffix in (".yaml", ".yml") or p.is_file() else None


def find_manifest(name_or_path: str, settings: Settings) -> Manifest:
    """A path to a manifest file, or the name of a built-in or user manifest (user dirs win)."""
    p = manifest_path(name_or_path)
    if p is not None:
        if not p.is_file():
            raise ProjectNotFound(f"manifest file {p} does not exist")
        return load_manifest(p)
    for d in reversed(manifest_dirs(settings)):  # user folders first: they win over built-in ones
        found = _named_in(d, name_or_path)
        if len(found) > 1:
            raise ManifestError(f"two manifests for {name_or_path!r} in {d}: "
                                f"{', '.join(str(m.origin) for m in found)}",
                                hint="remove or rename one of them (a manifest's file name and its `name` "
                                     "field both name the project)")
        if found:
            return found[0]
    known = ", ".join(sorted(f.stem for f in manifest_files(settings))) or "none"
    raise ProjectNotFound(f"no project named {name_or_path!r}",
                          hint=f"known projects: {known}; or pass a path to a manifest file, "
                               "or add a directory with --projects / CODERUN_PROJECTS")


def _named_in(folder: Path, name: str) -> list[Manifest]:
    """The manifests of one folder named `name` by their file name or their `name` field."""
    if not folder.is_dir():
        return []
    found = []
    for f in sorted(folder.glob("*.yaml")) + sorted(folder.glob("*.yml")):
        if f.stem == name:
            found.append(load_manifest(f))  # asked for by its file name: its errors are the answer
            continue
        try:
            m = load_manifest(f)
        except ManifestError:
            continue
        if m.name == name:
            found.append(m)
    return found


def all_manifests(settings: Settings) -> list[Manifest]:
    return [load_manifest(f) for f in manifest_files(settings)]


def known_manifests(settings: Settings) -> tuple[list[Manifest], dict[Path, ManifestError]]:
    """Every built-in and user manifest, one per project name (a user manifest wins over a built-in one
    of the same name, as in `find_manifest`), and the errors of the files that do not load."""
    by_name: dict[str, Manifest] = {}
    errors: dict[Path, ManifestError] = {}
    for f in manifest_files(settings):
        try:
            m = load_manifest(f)
        except ManifestError as e:
            errors[f] = e
            continue
        by_name[m.name] = m
    return list(by_name.values()), errors
