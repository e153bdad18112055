"""Sources: turn a manifest's `source` into a clean git worktree at a recorded commit.

Every kind of source (git, PyPI sdist, local path) ends as the same thing: a git repository whose
HEAD is the recorded commit, under `$CODERUN_HOME/src/`. Later stages copy it; none modifies it.
"""

from __future__ import annotations

import contextlib
import hashlib
import html.parser
import io
import re
import shutil
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin, urlparse

import git
import httpx

from coderun.config import Settings
from coderun.errors import SourceError
from coderun.manifest import Manifest

# Snapshots (sdists, plain directories) are committed with a fixed identity and date so that the same
# content always gives the same commit sha.
_SNAPSHOT_ENV = {
    "GIT_AUTHOR_NAME": "coderun", "GIT_AUTHOR_EMAIL": "coderun@localhost",
    "GIT_COMMITTER_NAME": "coderun", "GIT_COMMITTER_EMAIL": "coderun@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
}


@dataclass(frozen=True)
class Checkout:
    project: str
    path: Path
    commit: str
    kind: str  # git | pypi | path


def checkout(manifest: Manifest, settings: Settings) -> Checkout:
    src = manifest.source
    if src.git:
        return _checkout_git(manifest.name, src.git.url, src.git.rev, manifest, settings)
    if src.pypi:
        return _checkout_pypi(manifest.name, src.pypi, settings)
    return _checkout_path(manifest.name, _resolve_path(src.path, manifest), settings)


def _resolve_path(p: str, manifest: Manifest) -> Path:
    path = Path(p).expanduser()
    if not path.is_absolute() and manifest.origin is not None:
        path = manifest.origin.parent / path
    return path.resolve()


# ------------------------------------------------------------------------------------------ git


def _key(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _normalize_url(url: str, manifest: Manifest) -> str:
    if "://" in url or re.match(r"^[\w.-]+@[\w.-]+:", url):
        return url
    return str(_resolve_path(url, manifest))


def _checkout_git(name: str, url: str, rev: str, manifest: Manifest, settings: Settings) -> Checkout:
    url = _normalize_url(url, manifest)
    mirror = settings.git_cache / f"{_key(url)}.git"
    try:
        repo = _mirror(url, mirror)
        commit = _resolve_rev(repo, rev)
    except git.GitCommandError as e:
        raise SourceError(f"{name}: git failed for {url} at {rev!r}: {e.stderr.strip() or e}",
                          hint="check the url and rev in the manifest's source.git") from None
    return _worktree(name, mirror, commit, "git", settings)


def _mirror(url: str, mirror: Path) -> git.Repo:
    if mirror.is_dir():
        return git.Repo(mirror)
    mirror.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=mirror.parent, prefix=".clone-"))
    try:
        git.Repo.clone_from(url, tmp, mirror=True)
        tmp.rename(mirror)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return git.Repo(mirror)


def _resolve_rev(repo: git.Repo, rev: str) -> str:
    for attempt in range(2):
        try:
            return repo.git.rev_parse("--verify", "--quiet", f"{rev}^{{commit}}")
        except git.GitCommandError:
            if attempt == 0:
                repo.git.fetch("origin", "+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*",
                               "--prune")
                with contextlib.suppress(git.GitCommandError):  # a bare sha that no ref names
                    repo.git.fetch("origin", rev)
    raise SourceError(f"revision {rev!r} not found in {repo.git_dir}",
                      hint="use a tag, a branch or a full commit sha that the repository has")


def _worktree(name: str, repo_dir: Path, commit: str, kind: str, settings: Settings) -> Checkout:
    dest = settings.sources / f"{name}-{commit[:12]}"
    if (dest / ".git").exists():
        head = git.Repo(dest).head.commit.hexsha
        if head == commit and not git.Repo(dest).is_dirty(untracked_files=True):
            return Checkout(name, dest, commit, kind)
        shutil.rmtree(dest)  # modified in place by someone: restore a clean tree
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=".wt-"))
    try:
        clone = git.Repo.clone_from(str(repo_dir), tmp / "t", no_checkout=True)
        clone.git.checkout("--detach", commit)
        (tmp / "t").rename(dest)
    except git.GitCommandError as e:
        raise SourceError(f"{name}: cannot check out {commit}: {e.stderr.strip() or e}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return Checkout(name, dest, commit, kind)


# ---------------------------------------------------------------------------------- snapshots


def _snapshot_repo(tree: Path, repo_dir: Path) -> str:
    """Commit `tree` (no .git of its own) into a fresh repository at `repo_dir`; return the sha."""
    repo = git.Repo.init(repo_dir)
    with repo.git.custom_environment(**_SNAPSHOT_ENV):
        repo.git.add("--all", "--force", ".")
        repo.git.commit("--quiet", "--allow-empty", "--no-verify", "--no-gpg-sign", "-m", "snapshot")
    return repo.head.commit.hexsha


def _checkout_path(name: str, path: Path, settings: Settings) -> Checkout:
    if not path.is_dir():
        raise SourceError(f"{name}: source path {path} is not a directory",
                          hint="source.path is relative to the manifest file")
    tmp = Path(tempfile.mkdtemp(prefix="coderun-snap-"))
    try:
        shutil.copytree(path, tmp / "t", symlinks=True,
                        ignore=shutil.ignore_patterns(".git", "__pycache__", "*.pyc", ".tox", ".venv"))
        commit = _snapshot_repo(tmp / "t", tmp / "t")
        repo_store = settings.git_cache / f"path-{name}-{commit[:12]}"
        if not repo_store.exists():
            repo_store.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(tmp / "t"), repo_store)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return _worktree(name, repo_store, commit, "path", settings)


# --------------------------------------------------------------------------------------- pypi


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self._href: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._href = dict(attrs).get("href")

    def handle_data(self, data: str) -> None:
        if self._href:
            self.links.append((data.strip(), self._href))
            self._href = None


def _normalize_dist(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def find_sdist(requirement: str, index_url: str) -> tuple[str, str, str]:
    """(filename, url, sha256) of the sdist for "name==version", from a PEP 503 simple index."""
    name, _, version = requirement.partition("==")
    page = f"{index_url}/{_normalize_dist(name)}/"
    try:
        r = httpx.get(page, follow_redirects=True, timeout=60)
    except httpx.HTTPError as e:
        raise SourceError(f"cannot reach the package index at {page}: {e}",
                          hint="set CODERUN_PYPI_URL to a reachable simple index") from None
    if r.status_code == 404:
        raise SourceError(f"no package named {name!r} on {index_url}")
    r.raise_for_status()
    parser = _Links()
    parser.feed(r.text)
    stem = _normalize_dist(name).replace("-", "[-_.]")
    pattern = re.compile(rf"^{stem}-{re.escape(version)}\.(tar\.gz|zip|tar\.bz2)$", re.IGNORECASE)
    for filename, href in parser.links:
        if pattern.match(filename):
            url, _, frag = urljoin(page, href).partition("#")
            sha = frag.removeprefix("sha256=") if frag.startswith("sha256=") else ""
            if not sha:
                raise SourceError(f"{filename} on {index_url} has no sha256 to verify against")
            return filename, url, sha
    raise SourceError(f"no sdist of {requirement} on {index_url}",
                      hint="check the version; coderun needs a source distribution, not a wheel")


def download_sdist(requirement: str, settings: Settings) -> Path:
    filename, url, sha = find_sdist(requirement, settings.pypi_url)
    dest = settings.sdist_cache / filename
    if dest.is_file() and hashlib.sha256(dest.read_bytes()).hexdigest() == sha:
        return dest
    try:
        r = httpx.get(url, follow_redirects=True, timeout=300)
        r.raise_for_status()
    except httpx.HTTPError as e:
        raise SourceError(f"downloading {url} failed: {e}") from None
    got = hashlib.sha256(r.content).hexdigest()
    if got != sha:
        raise SourceError(f"{filename}: sha256 {got} does not match the index's {sha}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(".part")
    tmp.write_bytes(r.content)
    tmp.replace(dest)
    return dest


def _unpack(archive: Path, into: Path) -> Path:
    """Unpack an sdist safely (no absolute paths, no escapes) and return its single top directory."""
    into.mkdir(parents=True)
    data = archive.read_bytes()
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            for member in z.namelist():
                if member.startswith("/") or ".." in Path(member).parts:
                    raise SourceError(f"{archive.name}: unsafe path {member!r} in archive")
            z.extractall(into)
    else:
        with tarfile.open(fileobj=io.BytesIO(data)) as t:
            t.extractall(into, filter="data")
    tops = [p for p in into.iterdir()]
    return tops[0] if len(tops) == 1 and tops[0].is_dir() else into


def _checkout_pypi(name: str, requirement: str, settings: Settings) -> Checkout:
    archive = download_sdist(requirement, settings)
    repo_store = settings.git_cache / f"sdist-{archive.name}"
    if not (repo_store / ".git").is_dir():
        tmp = Path(tempfile.mkdtemp(prefix="coderun-sdist-"))
        try:
            top = _unpack(archive, tmp / "x")
            _snapshot_repo(top, top)
            repo_store.parent.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(repo_store, ignore_errors=True)
            shutil.move(str(top), repo_store)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    commit = git.Repo(repo_store).head.commit.hexsha
    return _worktree(name, repo_store, commit, "pypi", settings)


def describe_source(manifest: Manifest) -> str:
    s = manifest.source
    if s.git:
        host = urlparse(s.git.url).netloc or s.git.url
        return f"git {host}{urlparse(s.git.url).path}@{s.git.rev}"
    return f"pypi {s.pypi}" if s.pypi else f"path {s.path}"
