"""`coderun projects add`: fetch a source the user points at, then draft its manifest.

Fetching is coderun.envs.sources' (the same checkout as any manifest's); the questions a draft asks the
machine (which interpreters are on PATH, what pip's package index has) are answered here, as `Probes`.
Reading the fetched tree into a manifest is the other modules of this package's.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
import subprocess
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import git

from coderun.config import Settings
from coderun.draft import (
    Builder,
    Metadata,
    Probes,
    has_tests,
    no_tests_message,
    read_metadata,
    render,
    resolve_source,
    sanitize_name,
)
from coderun.draft.dating import Dated, changelog_date, declared_versions, exact_pins, tag_version
from coderun.envs.index import released, releases
from coderun.envs.pins import dist_key
from coderun.envs.sources import Checkout, checkout, commit_date, download_sdist, pip_command
from coderun.errors import ManifestError, SourceError, UsageError
from coderun.manifests.schema import Manifest, parse_manifest


@dataclass(frozen=True)
class Draft:
    text: str          # the manifest, with comments
    manifest: Manifest  # what it validates to
    warnings: tuple[str, ...]


@dataclass(frozen=True)
class DraftOptions:
    """What the user can say that the tree cannot: the project's date and Python, functions without docstrings."""

    as_of: dt.date | None = None
    python: str | None = None
    undocumented: bool = False


def draft_manifest(source: str, settings: Settings, name: str | None = None, rev: str | None = None,
                   options: DraftOptions = DraftOptions()) -> str:
    """Commented YAML of a manifest for `source` (git URL, directory, or "pkg==version"); it validates."""
    return make_draft(source, settings, name=name, rev=rev, options=options).text


def _checkout_trying_tags(name: str, src: dict, settings: Settings) -> Checkout:
    """The checkout of `src`; a release tag given as v1.2 or 1.2 is tried the other way too. A failure names
    every revision tried and speaks of `--rev`: there is no manifest yet."""
    rev = src.get("git", {}).get("rev", "")
    other = rev[1:] if re.fullmatch(r"v\d[\w.]*", rev) else f"v{rev}" if re.fullmatch(r"\d[\w.]*", rev) else None
    tried = []
    for attempt in [rev, *([other] if other else [])] if src.get("git") else [None]:
        try:
            if attempt is None:
                return checkout(Manifest(name=name, source=src, python="3.11"), settings)
            return checkout(Manifest(name=name, source={"git": {**src["git"], "rev": attempt}}, python="3.11"),
                            settings)
        except SourceError as e:
            if attempt is None:
                raise
            tried.append(attempt)
            first = e
    names = " nor ".join(tried)
    raise SourceError(f"{src['git']['url']}: no revision {names} ({first.message})",
                      hint="give --rev a tag, branch or commit the repository has (`git ls-remote --tags URL` "
                           "lists its tags)") from None


def make_draft(source: str, settings: Settings, name: str | None = None, rev: str | None = None,
               options: DraftOptions = DraftOptions()) -> Draft:
    src, provisional, warnings = resolve_source(source)
    if rev is not None:
        if not src.get("git"):
            raise UsageError(f"--rev {rev}: {source} is not a git source", hint="--rev is for git URLs and "
                             "repositories; pin a PyPI package as pkg==version")
        src = {"git": {"url": src["git"]["url"], "rev": rev}}
    co = _checkout_trying_tags(sanitize_name(name or provisional), src, settings)
    if src.get("git"):  # record the commit that was read, so the draft is reproducible
        src = {"git": {"url": src["git"]["url"], "rev": co.commit}}
    meta = read_metadata(co.path)
    if not has_tests(co.path):
        message, hint = no_tests_message(source, src, meta)
        raise UsageError(message, hint=hint)
    b = Builder(tree=co.path, meta=meta, warnings=list(warnings), probes=_PROBES, python=options.python,
                undocumented=options.undocumented)
    b.as_of = source_date(src, co, meta, b.packages(b.find_import_root()[0])[0], settings, as_of=options.as_of)
    data = b.build(name=sanitize_name(name or meta.name or provisional), source=src)
    text = render(data, b.notes, source=source, kind=co.kind, commit=co.commit, warnings=b.warnings)
    try:
        manifest = parse_manifest(text, Path(f"<draft for {source}>"))
    except ManifestError as e:  # a draft that does not validate is a bug here, not the user's fault
        raise ManifestError(f"the drafted manifest does not validate (please report this): {e.message}",
                            hint="write the manifest by hand from the reference, docs/manifests.md, meanwhile") from None
    return Draft(text, manifest, tuple(b.warnings))


def source_date(src: dict, co: Checkout, meta: Metadata, packages: list[str], settings: Settings, *,
                as_of: dt.date | None = None) -> tuple[dt.date, str] | None:
    """The day the source is from, and the evidence, best first: `--as-of`; a git commit's date when the
    history supports it (the commit has parents); the index's upload day of the release the source is (an
    sdist's name==version, a tag on the commit, the version the metadata declares); the changelog's date of
    that version; the day an sdist was made (PKG-INFO's timestamp); a lone commit's date. Never earlier than
    the newest exact pin the project declares (the index had that release then)."""
    if as_of is not None:
        return as_of, f"resolve_as_of: {as_of}, given with --as-of"
    found = _release_date(src, co, meta, packages) if not src.get("git") or not _has_history(co) else None
    if found is None and src.get("git") and _has_history(co):
        found = Dated(commit_date(co), "the commit's date")
    version = src["pypi"].partition("==")[2] if src.get("pypi") else (meta.version or None)
    found = found or changelog_date(co.path, version)
    if found is None and src.get("pypi"):
        stamp = _pkg_info_mtime(download_sdist(src["pypi"], settings))
        found = Dated(stamp, "the day the sdist was made (its PKG-INFO's timestamp)") if stamp else None
    if found is None and src.get("git"):
        found = Dated(commit_date(co), "the date of the repository's only commit, the one evidence there is")
    floor = _newest_pin(co.path, meta)
    if floor is not None and (found is None or floor.day > found.day):
        found = Dated(floor.day, f"{found.why + ', moved to ' if found else ''}{floor.why}")
    if found is None:
        return None
    return found.day, f"resolve_as_of: {found.why}; dependencies are resolved among the releases up to then"


def _has_history(co: Checkout) -> bool:
    """Whether the commit's date can be trusted as the code's: it has parents (a lone commit is a snapshot or
    a vendored copy, made whenever someone copied the code)."""
    try:
        return bool(git.Repo(co.path).commit(co.upstream_commit).parents)
    except (git.GitCommandError, ValueError):
        return False


def _release_date(src: dict, co: Checkout, meta: Metadata, packages: list[str]) -> Dated | None:
    """The index's upload day of the release this tree is: the sdist's own, or a version its tags or
    metadata name."""
    names = list(dict.fromkeys(n for n in (meta.name, src.get("pypi", "").partition("==")[0]) if n))
    candidates: list[tuple[str, str]] = []
    if src.get("pypi"):
        candidates.append((src["pypi"].partition("==")[2], f"the release {src['pypi']}"))
    candidates += [(v, f"tag {t} on the commit") for t, v in _tags_at(co)]
    candidates += [(v.lstrip("v"), f"version {v} in {where}") for v, where in declared_versions(co.path, meta, packages)]
    for version, why in candidates:
        for name in names:
            day = released(name, version)
            if day is not None:
                return Dated(day, f"{why} was uploaded to the package index on {day}")
    return None


def _tags_at(co: Checkout) -> list[tuple[str, str]]:
    """(tag, version) of the release tags on the checked-out commit."""
    if co.kind != "git":
        return []
    try:
        out = git.Repo(co.path).git.tag("--points-at", co.upstream_commit)
    except git.GitCommandError:
        return []
    return [(t, v) for t in out.split() if (v := tag_version(t))]


def _newest_pin(tree: Path, meta: Metadata) -> Dated | None:
    """The newest release among the project's exact pins: the project is no older than that."""
    best: Dated | None = None
    for name, version in exact_pins(tree, meta)[:_MAX_PIN_LOOKUPS]:
        day = released(name, version)
        if day is not None and (best is None or day > best.day):
            best = Dated(day, f"its pin {name}=={version} was released on {day}")
    return best


_MAX_PIN_LOOKUPS = 30


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


def _on_index(requirement: str) -> bool:
    """Whether pip's package index (pip's own configuration) has a distribution of this name; an index
    that cannot be asked counts as having it."""
    try:  # offline, pip would retry for minutes: one short try, and an unanswered question is a yes
        proc = subprocess.run([*pip_command(), "index", "versions", "--disable-pip-version-check", "--retries",
                               "1", "--timeout", "15", dist_key(requirement)], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=60)
    except subprocess.TimeoutExpired:
        return True
    return proc.returncode == 0 or "No matching distribution" not in proc.stderr + proc.stdout


@functools.cache
def _have_python(minor: int) -> bool:
    from coderun.envs.local import find_python  # imported when asked: `projects add` needs no env builder

    return find_python(f"3.{minor}")[1]


def _release_count(name: str) -> int:
    return len(releases(name))


_PROBES = Probes(has_python=_have_python, on_index=_on_index, release_count=_release_count)
