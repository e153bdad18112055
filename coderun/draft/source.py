"""What the user typed (a git URL, a directory, "pkg==version") and what the fetched tree says about itself."""

from __future__ import annotations

import re
from pathlib import Path

import git

from coderun.draft.metadata import Metadata
from coderun.errors import UsageError

_PYPI_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9.+!_-]+")


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


def no_tests_message(source: str, src: dict, meta: Metadata) -> tuple[str, str]:
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


def sanitize_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-._") or "project"
