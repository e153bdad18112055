"""`coderun projects add`: fetch a source the user points at, then draft its manifest.

Fetching is this stage's (coderun.envs.sources, the same checkout as any manifest's), as are the questions a
draft asks the machine: which interpreters are on PATH, what pip's package index has. Reading the fetched
tree into a manifest is coderun.manifests.draft's.
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

from coderun.config import Settings
from coderun.envs.sources import Checkout, checkout, commit_date, download_sdist, pip_command
from coderun.errors import ManifestError, SourceError, UsageError
from coderun.manifests.draft import (
    Builder,
    Probes,
    has_tests,
    no_tests_message,
    read_metadata,
    render,
    resolve_source,
    sanitize_name,
)
from coderun.manifests.draft.requirements import dist_key
from coderun.manifests.schema import Manifest, parse_manifest


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
    co = _checkout_trying_tags(sanitize_name(name or provisional), src, settings)
    if src.get("git"):  # record the commit that was read, so the draft is reproducible
        src = {"git": {"url": src["git"]["url"], "rev": co.commit}}
    meta = read_metadata(co.path)
    if not has_tests(co.path):
        message, hint = no_tests_message(source, src, meta)
        raise UsageError(message, hint=hint)
    b = Builder(tree=co.path, meta=meta, warnings=list(warnings), probes=_PROBES,
                as_of=source_date(src, co, settings))
    data = b.build(name=sanitize_name(name or meta.name or provisional), source=src)
    text = render(data, b.notes, source=source, kind=co.kind, commit=co.commit, warnings=b.warnings)
    try:
        manifest = parse_manifest(text, Path(f"<draft for {source}>"))
    except ManifestError as e:  # a draft that does not validate is a bug here, not the user's fault
        raise ManifestError(f"the drafted manifest does not validate (please report this): {e.message}",
                            hint="write the manifest by hand from the README reference meanwhile") from None
    return Draft(text, manifest, tuple(b.warnings))


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


_PROBES = Probes(has_python=_have_python, on_index=_on_index)
