"""What pip's package index says about a distribution's releases: each version and the day it was uploaded.

A draft dates a project by its release (`pkg==1.2` was uploaded on that day) and tells apart the distributions
that provide one import name by how many releases each has. The index is pip's own (`index-url` of `pip config
list` and PIP_INDEX_URL, else PyPI), read through its JSON simple API (PEP 691, with PEP 700's upload times).
An index that cannot be reached or gives no JSON answers nothing: the draft then says it had no such evidence.
"""

from __future__ import annotations

import datetime as dt
import functools
import re

import httpx

from coderun.envs.resolve import pip_config
from coderun.envs.sources import pip_command

_DEFAULT_INDEX = "https://pypi.org/simple/"
_ACCEPT = "application/vnd.pypi.simple.v1+json"
_TIMEOUT = 20.0


@functools.cache
def index_url() -> str:
    try:
        url = pip_config(pip_command()).get("index-url") or _DEFAULT_INDEX
    except OSError:
        url = _DEFAULT_INDEX
    return url.rstrip("/") + "/"


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@functools.cache
def releases(name: str) -> dict[str, dt.date]:
    """version -> the day its first file was uploaded (UTC); {} when the index does not answer or lacks it."""
    try:
        resp = httpx.get(f"{index_url()}{normalize(name)}/", headers={"Accept": _ACCEPT}, timeout=_TIMEOUT,
                         follow_redirects=True)
    except httpx.HTTPError:
        return {}
    if resp.status_code != 200 or "json" not in resp.headers.get("content-type", ""):
        return {}
    try:
        files = resp.json().get("files", [])
    except ValueError:
        return {}
    out: dict[str, dt.date] = {}
    for f in files:
        version, stamp = _version_of(name, f.get("filename", "")), f.get("upload-time")
        if not version or not stamp or f.get("yanked"):
            continue
        day = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).astimezone(dt.timezone.utc).date()
        out[version] = min(day, out.get(version, day))
    return out


def released(name: str, version: str) -> dt.date | None:
    """The day `name` `version` was uploaded to the index (versions compared as PEP 440 normalizes them)."""
    found = releases(name)
    if version in found:
        return found[version]
    want = _canonical(version)
    return next((d for v, d in found.items() if _canonical(v) == want), None)


def _canonical(version: str) -> str:
    from packaging.version import InvalidVersion, Version

    try:
        return str(Version(version))
    except InvalidVersion:
        return version


def _version_of(name: str, filename: str) -> str | None:
    """The version in a distribution file's name (sdists and wheels; names compared normalized)."""
    stem = re.sub(r"\.(tar\.gz|tar\.bz2|tgz|zip|whl|egg|exe|msi|rpm|dmg)$", "", filename)
    if stem == filename:
        return None
    if filename.endswith(".whl") or filename.endswith(".egg"):
        parts = stem.split("-")
        return parts[1] if len(parts) > 1 else None
    key = normalize(name)
    for i in range(len(stem) - 1, 0, -1):  # the version starts after the last dash that ends the name
        if stem[i] == "-" and normalize(stem[:i]) == key:
            return stem[i + 1:]
    return None
