"""Sources: turn a manifest's `source` into a clean git worktree at a recorded commit.

Every kind of source (git, PyPI sdist, local path) ends as the same thing: a git repository whose
HEAD is the recorded commit, under `$CODERUN_HOME/src/`. Later stages copy it; none modifies it.
A manifest's supplementary test files (`tests.supplementary`) are committed on top of the source's commit
here, once, so that the baseline, the task build and the evaluation, on every backend, see the same tree;
the checkout records both commits.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import importlib.util
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import git

from coderun.config import Settings
from coderun.envs.resolve import locate_sdist
from coderun.errors import ManifestError, SourceError
from coderun.manifests.schema import Manifest, supplementary_files

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
    origin: str = ""  # where the code came from: the clone URL, a local mirror, the sdist file, the folder
    upstream: str = ""  # the source's own commit, when `commit` adds the supplementary test files to it

    @property
    def upstream_commit(self) -> str:
        return self.upstream or self.commit


def checkout(manifest: Manifest, settings: Settings) -> Checkout:
    src = manifest.source
    if src.git:
        co = _checkout_git(manifest.name, src.git.url, src.git.rev, manifest, settings)
    elif src.pypi:
        co = _checkout_pypi(manifest.name, src.pypi, settings)
    else:
        co = _checkout_path(manifest.name, _resolve_path(src.path, manifest), settings)
    files = supplementary_files(manifest)
    return _with_supplementary(co, files, manifest, settings) if files else co


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
    if re.fullmatch(r"[0-9a-f]{40}", rev) and (done := _ready_worktree(name, rev, "git", settings)):
        return done  # a commit is a commit: no mirror or network needed to check it out again
    local = _from_mirrors(name, url, rev, settings)
    if local is not None:
        repo_dir, commit, origin = local
        return _worktree(name, repo_dir, commit, "git", settings, upstream=url, origin=origin)
    mirror = settings.git_cache / f"{_key(url)}.git"
    try:
        repo = _mirror(url, mirror)
        commit = _resolve_rev(repo, rev)
    except git.GitCommandError as e:
        raise SourceError(f"{name}: git failed for {url} at {rev!r}: {e.stderr.strip() or e}",
                          hint="check the url and rev in the manifest's source.git, or point "
                               "CODERUN_GIT_MIRRORS at a folder holding a mirror of it") from None
    return _worktree(name, mirror, commit, "git", settings, upstream=url, origin=url)


# ------------------------------------------------------------------------------ local mirrors


def _owner_name(url: str) -> tuple[str, str, str] | None:
    """(host, owner, name) of a clone URL (https, ssh, scp-like), the name without `.git`."""
    if "://" in url:
        parsed = urlparse(url)
        host, path = parsed.hostname or "", parsed.path
    elif m := re.match(r"^[\w.-]+@([\w.-]+):(.*)$", url):
        host, path = m.group(1), m.group(2)
    else:
        return None
    parts = [p for p in path.strip("/").split("/") if p]
    if len(parts) < 2:
        return None
    return host, parts[-2], parts[-1].removesuffix(".git")


def mirror_candidates(url: str, folder: Path) -> list[Path]:
    """What in `folder` stands for `url`: OWNER+NAME.git, OWNER+NAME.git.tar.gz, OWNER/NAME.git or
    HOST/OWNER/NAME.git (names compared without case, as the big forges do)."""
    found = _owner_name(url)
    if found is None or not folder.is_dir():
        return []
    host, owner, name = found
    wanted = [f"{owner}+{name}.git", f"{owner}+{name}", f"{owner}+{name}.git.tar.gz", f"{owner}+{name}.tar.gz",
              f"{owner}/{name}.git", f"{owner}/{name}", f"{host}/{owner}/{name}.git", f"{host}/{owner}/{name}"]
    out = []
    for rel in wanted:
        path = folder
        for part in rel.split("/"):
            path = _child_nocase(path, part)
            if path is None:
                break
        if path is not None and path not in out:
            out.append(path)
    return out


def _child_nocase(folder: Path, name: str) -> Path | None:
    if (folder / name).exists():
        return folder / name
    if not folder.is_dir():
        return None
    return next((p for p in folder.iterdir() if p.name.lower() == name.lower()), None)


def _from_mirrors(name: str, url: str, rev: str, settings: Settings) -> tuple[Path, str, str] | None:
    """(bare repository, commit, origin) from the first local mirror of `url` holding `rev`, or None.

    A mirror that is found but lacks the revision is passed over (the network is tried next) and named in
    the error if the network fails too."""
    for folder in settings.git_mirrors:
        for candidate in mirror_candidates(url, folder):
            repo_dir = _unpacked(candidate, settings) if candidate.is_file() else candidate
            try:  # git run in the folder itself: a bare mirror without a `config` file is one to git
                commit = git.Git(str(repo_dir)).rev_parse("--verify", "--quiet", f"{rev}^{{commit}}")
            except (git.GitCommandError, git.InvalidGitRepositoryError, git.NoSuchPathError, OSError):
                print(f"warning: {name}: mirror {candidate} does not hold {rev}; trying {url}", file=sys.stderr)
                continue
            if len(rev) == 40 and commit != rev.lower():
                raise SourceError(f"{name}: mirror {candidate} gives commit {commit} for {rev}")
            return repo_dir, commit, f"mirror {candidate}"
    return None


def _unpacked(archive: Path, settings: Settings) -> Path:
    """The bare repository inside a mirror archive, unpacked once under $CODERUN_HOME/git/mirrors (a
    changed archive, by size or time, is unpacked again)."""
    st = archive.stat()
    dest = settings.git_cache / "mirrors" / f"{archive.name}-{_key(f'{archive.resolve()}|{st.st_size}|{st.st_mtime_ns}')}"
    if not dest.is_dir():
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=".unpack-"))
        try:
            top = _unpack(archive, tmp / "x")
            top.rename(dest)
        except (tarfile.TarError, zipfile.BadZipFile, OSError) as e:
            raise SourceError(f"cannot unpack mirror archive {archive}: {e}") from None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return dest


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


def _worktree(name: str, repo_dir: Path, commit: str, kind: str, settings: Settings,
              upstream: str | None = None, origin: str = "") -> Checkout:
    """A clone of `repo_dir` at `commit`, with its submodules at their recorded commits (git keeps
    symlinks as links). `upstream` is the URL relative submodule URLs are resolved against."""
    if done := _ready_worktree(name, commit, kind, settings):
        return done
    dest = settings.sources / f"{name}-{commit[:12]}"
    shutil.rmtree(dest, ignore_errors=True)  # absent, or modified in place by someone: make a clean tree
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=".wt-"))
    try:
        clone = git.Repo.clone_from(str(repo_dir), tmp / "t", no_checkout=True)
        clone.git.checkout("--detach", commit)
        if (tmp / "t" / ".gitmodules").is_file():
            _update_submodules(clone, upstream, settings)
        (tmp / "t" / ".git" / _ORIGIN_FILE).write_text(origin)
        (tmp / "t").rename(dest)
    except git.GitCommandError as e:
        raise SourceError(f"{name}: cannot check out {commit}: {e.stderr.strip() or e}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return Checkout(name, dest, commit, kind, origin)


_ORIGIN_FILE = "coderun-origin"  # inside the worktree's .git: where its commit was fetched from


def _ready_worktree(name: str, commit: str, kind: str, settings: Settings) -> Checkout | None:
    """The existing clean worktree of `commit`, if there is one."""
    dest = settings.sources / f"{name}-{commit[:12]}"
    if not (dest / ".git").exists():
        return None
    repo = git.Repo(dest)
    if repo.head.commit.hexsha != commit or repo.is_dirty(untracked_files=True) or not _submodules_ready(repo):
        return None
    origin = dest / ".git" / _ORIGIN_FILE
    return Checkout(name, dest, commit, kind, origin.read_text() if origin.is_file() else "")


def _submodules_ready(repo: git.Repo) -> bool:
    """Every submodule checked out at the commit the superproject records ('-' uninitialised, '+' moved)."""
    if not (Path(repo.working_tree_dir) / ".gitmodules").is_file():
        return True
    status = repo.git.submodule("status", "--recursive")
    return not any(line[:1] in ("-", "+", "U") for line in status.splitlines())


def _update_submodules(clone: git.Repo, upstream: str | None, settings: Settings) -> None:
    """Check out the submodules at their recorded commits, each from a local mirror that holds that commit
    (matched by URL like any git source), else from its URL; then theirs, the same way."""
    if upstream:  # relative submodule URLs (../lib.git) name siblings of the upstream, not of the mirror
        clone.git.config("remote.origin.url", upstream)
    # git refuses file:// submodules by default (CVE-2022-39253); a source that is itself local is the
    # user's own machine, so its local submodules are allowed, and only then; so are the configured mirrors.
    local = upstream is not None and _is_local(upstream)
    clone.git.submodule("init")
    root = Path(clone.working_tree_dir)
    for name, path, url in _submodules(clone):
        mirror = _submodule_mirror(clone, path, url, settings)
        if mirror is not None:
            clone.git.config(f"submodule.{name}.url", str(mirror))
        allow = ["-c", "protocol.file.allow=always"] if local or mirror is not None else []
        clone.git.execute(["git", *allow, "submodule", "update", "--", path])
        if (root / path / ".gitmodules").is_file():
            _update_submodules(git.Repo(root / path), url, settings)


def _is_local(url: str) -> bool:
    return url.startswith("file://") or "://" not in url and not re.match(r"^[\w.-]+@[\w.-]+:", url)


def _submodules(clone: git.Repo) -> list[tuple[str, str, str]]:
    """(name, path, URL as `submodule init` resolved it) of each submodule."""
    try:
        paths = clone.git.config("-f", ".gitmodules", "--get-regexp", r"^submodule\..*\.path$").splitlines()
    except git.GitCommandError:  # no submodule entries
        return []
    out = []
    for line in paths:
        key, _, path = line.partition(" ")
        name = key.removeprefix("submodule.").removesuffix(".path")
        out.append((name, path, clone.git.config("--get", f"submodule.{name}.url")))
    return out


def _submodule_mirror(clone: git.Repo, path: str, url: str, settings: Settings) -> Path | None:
    """The first local mirror of `url` that holds the commit the superproject records at `path`."""
    if _is_local(url):
        return None
    recorded = clone.git.ls_tree("HEAD", "--", path).split()
    if len(recorded) < 3 or recorded[1] != "commit":
        return None
    for folder in settings.git_mirrors:
        for candidate in mirror_candidates(url, folder):
            repo_dir = _unpacked(candidate, settings) if candidate.is_file() else candidate
            try:
                git.Repo(repo_dir).git.cat_file("-e", f"{recorded[2]}^{{commit}}")
            except (git.GitCommandError, git.InvalidGitRepositoryError, git.NoSuchPathError):
                print(f"warning: submodule {path}: mirror {candidate} does not hold {recorded[2]}; trying {url}",
                      file=sys.stderr)
                continue
            return repo_dir
    return None


def _with_supplementary(co: Checkout, files: dict[str, Path], manifest: Manifest, settings: Settings) -> Checkout:
    """`co` plus the supplementary files, committed on top of its commit with a fixed identity and date (the
    same files give the same commit), in a worktree of its own; the source's commit stays `upstream`."""
    digest = _key(co.commit + "".join(f"|{rel}:{hashlib.sha256(p.read_bytes()).hexdigest()}" for rel, p in sorted(files.items())))
    dest = settings.sources / f"{co.project}-{co.commit[:12]}+{digest[:8]}"
    if (dest / ".git").exists():
        repo = git.Repo(dest)
        head = repo.head.commit
        if [c.hexsha for c in head.parents] == [co.commit] and not repo.is_dirty(untracked_files=True):
            return Checkout(co.project, dest, head.hexsha, co.kind, origin=co.origin, upstream=co.commit)
        shutil.rmtree(dest)
    clash = [rel for rel in files if os.path.lexists(co.path / rel)]
    if clash:
        raise ManifestError(f"{manifest.origin}: tests.supplementary: {', '.join(clash)} would replace the "
                            "project's own file", hint="give a supplementary test file a name the project "
                            "does not use")
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=".supp-"))
    try:
        shutil.copytree(co.path, tmp / "t", symlinks=True)  # .git and submodules too
        for rel, path in files.items():
            (tmp / "t" / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, tmp / "t" / rel)
        repo = git.Repo(tmp / "t")
        with repo.git.custom_environment(**_SNAPSHOT_ENV):
            repo.git.add("--force", "--", *files)
            repo.git.commit("--quiet", "--no-verify", "--no-gpg-sign", "-m",
                            "coderun: supplementary tests written for the benchmark")
        commit = repo.head.commit.hexsha
        (tmp / "t").rename(dest)
    except git.GitCommandError as e:
        raise SourceError(f"{co.project}: cannot add the supplementary test files: {e.stderr.strip() or e}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return Checkout(co.project, dest, commit, co.kind, origin=co.origin, upstream=co.commit)


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
    return _worktree(name, repo_store, commit, "path", settings, origin=str(path))


# --------------------------------------------------------------------------------------- pypi


def _normalize_dist(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _sdist_name(name: str, version: str) -> re.Pattern[str]:
    stem = _normalize_dist(name).replace("-", "[-_.]")
    return re.compile(rf"^{stem}-{re.escape(version)}\.(tar\.gz|zip|tar\.bz2)$", re.IGNORECASE)


def download_sdist(requirement: str, settings: Settings) -> Path:
    """The sdist of "name==version", fetched by `pip download` so that pip's own configuration (index
    and extra indexes, find-links, proxy, certificates: `pip config list`, PIP_* variables) applies;
    pip checks the hash the index gives. Cached under $CODERUN_HOME/sdists."""
    name, _, version = requirement.partition("==")
    pattern = _sdist_name(name, version)
    cache = settings.sdist_cache
    cached = sorted(p for p in cache.glob("*") if p.is_file() and pattern.match(p.name)) if cache.is_dir() else []
    if cached:
        return cached[0]
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="coderun-sdist-", dir=cache) as tmp:
        fetched = _fetch_located(requirement, Path(tmp), pattern)
        if fetched is not None:
            return fetched.replace(cache / fetched.name)
        cmd = [*pip_command(), "download", "--no-deps", "--no-binary", ":all:", "--disable-pip-version-check",
               "--dest", tmp, requirement]
        proc = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        got = [p for p in Path(tmp).iterdir() if pattern.match(p.name)]
        if proc.returncode != 0 or not got:
            raise SourceError(f"no sdist of {requirement} from pip's package index: {_pip_error(proc)}",
                              hint="coderun fetches sdists with `pip download --no-binary :all:` and pip's own "
                                   "configuration (`pip config list`, PIP_INDEX_URL); check the version has a "
                                   "source distribution there")
        dest = cache / got[0].name
        got[0].replace(dest)
    return dest


def _fetch_located(requirement: str, tmp: Path, pattern: re.Pattern[str]) -> Path | None:
    """The sdist fetched from where uv locates it on pip's indexes, checked against the index's sha256;
    None when it is not located or not fetched (pip downloads it then)."""
    found = locate_sdist(requirement, pip=pip_command(), folder=tmp)
    if found is None:
        return None
    url, sha256 = found
    name = Path(urlparse(url).path).name
    if not pattern.match(name):
        return None
    try:
        with urllib.request.urlopen(url, timeout=60) as response:  # http(s)_proxy, SSL_CERT_FILE apply
            data = response.read()
    except (OSError, ValueError):
        return None
    if hashlib.sha256(data).hexdigest() != sha256:
        return None
    path = tmp / name
    path.write_bytes(data)
    return path


def pip_command() -> list[str]:
    """pip of coderun's own interpreter, else the one on PATH (a `uv tool` install has no pip)."""
    if importlib.util.find_spec("pip") is not None:
        return [sys.executable, "-m", "pip"]
    found = shutil.which("pip3") or shutil.which("pip")
    if found is None:
        raise SourceError("fetching a PyPI sdist needs pip, which coderun's interpreter does not have",
                          hint=f"{sys.executable} -m ensurepip, or put pip on PATH")
    return [found]


def _pip_error(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [ln.strip() for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
    errors = [ln.removeprefix("ERROR: ") for ln in lines if ln.startswith("ERROR:")]
    return "; ".join(errors[:2]) or (lines[-1] if lines else f"pip exited with {proc.returncode}")


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
    return _worktree(name, repo_store, commit, "pypi", settings, origin=f"sdist {archive.name}")


def commit_date(co: Checkout) -> dt.date:
    """The day (UTC) the checked-out commit was made: the date a git source's dependencies are resolved as of."""
    return git.Repo(co.path).commit(co.upstream_commit).committed_datetime.astimezone(dt.timezone.utc).date()


def describe_source(manifest: Manifest) -> str:
    s = manifest.source
    if s.git:
        host = urlparse(s.git.url).netloc or s.git.url
        return f"git {host}{urlparse(s.git.url).path}@{s.git.rev}"
    return f"pypi {s.pypi}" if s.pypi else f"path {s.path}"
