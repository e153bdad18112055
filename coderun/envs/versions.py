"""Versions of everything that runs a benchmark, so that a run's numbers can be traced to its software.

    coderun_environment()       coderun, the interpreter running it, and its dependency closure
    PACKAGES_SCRIPT             run by an environment's own python (venv or image): its version and
                                every installed distribution, as one line of JSON
    project_environment(...)    that line as a ProjectEnvironment record
    environment_text(env)       the run folder's `environment.txt`, for people (and `pip install -r`)

The closure starts at the requirements of the installed `coderun` distribution, evaluates each marker
(with the extras that pulled the requirement in) and follows every requirement that applies; one that
applies but is not installed is listed as missing rather than failing the run.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import platform
import sys
from datetime import datetime, timezone
from importlib import metadata
from typing import Literal

from packaging.markers import UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from coderun import __version__
from coderun.config import keep, read_kept
from coderun.errors import EnvironmentBuildError
from coderun.records import CoderunEnvironment, Package, ProjectEnvironment, RunEnvironment

ENVIRONMENT_FILE = "environment.txt"
_MARK = "CODERUN-PACKAGES "

# Runs under the environment's interpreter (Python 3.6+ without importlib.metadata falls back to
# pkg_resources), with `-I` so that nothing from the caller's environment variables reaches sys.path.
# The first distribution of a name on sys.path is the one imported, so it is the one listed.
PACKAGES_SCRIPT = f"""
import json, re, sys
try:
    from importlib import metadata
    dists = [(d.metadata["Name"], d.version) for d in metadata.distributions()]
except ImportError:
    import pkg_resources
    dists = [(d.project_name, d.version) for d in pkg_resources.working_set]
seen = {{}}
for name, version in dists:
    if name:
        seen.setdefault(re.sub(r"[-_.]+", "-", name).lower(), [name, version])
print({_MARK!r} + json.dumps({{"python": "%d.%d.%d" % sys.version_info[:3],
                               "packages": [seen[k] for k in sorted(seen)]}}))
"""


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def project_environment(output: str, *, project: str, backend: Literal["local", "docker"], where: str,
                        log_path: str | None = None) -> ProjectEnvironment:
    """PACKAGES_SCRIPT's output as a record; EnvironmentBuildError when it has no answer in it."""
    lines = [line for line in output.splitlines() if line.startswith(_MARK)]
    try:
        doc = json.loads(lines[-1][len(_MARK):])
        packages = [Package(name=n, version=v) for n, v in doc["packages"]]
        python = str(doc["python"])
    except (IndexError, ValueError, KeyError, TypeError):
        raise EnvironmentBuildError(
            f"{project}: cannot list what is installed in {where} (its python gave no package list)",
            log_path=log_path, log_tail="\n".join(output.splitlines()[-15:]),
            hint=f"rebuild the environment: coderun env build {project} --force") from None
    return ProjectEnvironment(project=project, backend=backend, where=where, python=python,
                              packages=packages, recorded_at=_now())


# ------------------------------------------------------------------------------- coderun's side


@functools.cache
def coderun_environment() -> CoderunEnvironment:
    """This process: coderun's version, the interpreter, and the installed version of every distribution
    coderun's requirements pull in. Read once per process (a run asks at its start and when it resumes), and
    kept in coderun's home for the next process while the folders it came from are unchanged: reading the
    closure's metadata takes 0.1-0.15 s, which every `coderun eval` paid, and installing, removing or upgrading
    a distribution changes its folder's modification time."""
    key = _installation_key()
    kept = _read_kept(key)
    if kept is not None:
        return kept
    env = _read_environment()
    _keep(key, env)
    return env


def _installation_key() -> list:
    """What the closure depends on: the interpreter, and each folder on sys.path that holds distributions'
    metadata with its modification time (not the others: `python -m` puts the working directory there)."""
    folders = []
    for entry in dict.fromkeys(sys.path):
        with contextlib.suppress(OSError):
            if any(name.endswith((".dist-info", ".egg-info")) for name in os.listdir(entry or ".")):
                folders.append([entry, os.stat(entry or ".").st_mtime_ns])
    return [sys.executable, sys.prefix, __version__, folders]


_KEPT = "coderun-environment.json"


def _read_kept(key: list) -> CoderunEnvironment | None:
    data = read_kept(_KEPT)
    with contextlib.suppress(ValueError, KeyError, TypeError):
        if data["key"] == key:
            return CoderunEnvironment.model_validate(data["environment"])
    return None


def _keep(key: list, env: CoderunEnvironment) -> None:
    keep(_KEPT, {"key": key, "environment": env.model_dump(mode="json")})


def _read_environment() -> CoderunEnvironment:
    try:
        root = metadata.distribution("coderun")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        root = None
    packages, missing = _closure(root) if root is not None else ([], ["coderun (not installed)"])
    return CoderunEnvironment(
        coderun=root.version if root is not None else __version__,
        python=platform.python_version(), implementation=platform.python_implementation(),
        platform=platform.platform(), packages=packages, missing=missing)


def _closure(root: metadata.Distribution) -> tuple[list[Package], list[str]]:
    found: dict[str, Package] = {}
    extras_seen: dict[str, set[str]] = {}
    missing: set[str] = set()
    todo = _applicable(root, set())
    while todo:
        req = todo.pop()
        key = canonicalize_name(req.name)
        extras = set(req.extras)
        if key in extras_seen and extras <= extras_seen[key]:
            continue
        try:
            dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            missing.add(str(req))
            continue
        extras_seen[key] = extras_seen.get(key, set()) | extras
        meta = dist.metadata  # parsed anew on every access
        found[key] = Package(name=meta["Name"] or req.name, version=meta["Version"])
        todo += _applicable(dist, extras_seen[key])
    return sorted(found.values(), key=lambda p: canonicalize_name(p.name)), sorted(missing)


def _applicable(dist: metadata.Distribution, extras: set[str]) -> list[Requirement]:
    """The distribution's requirements whose marker holds here, for no extra or one of `extras`."""
    out = []
    for text in dist.requires or []:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue  # metadata we cannot read says nothing about what runs
        if req.marker is None or any(_holds(req, extra) for extra in {"", *extras}):
            out.append(req)
    return out


def _holds(req: Requirement, extra: str) -> bool:
    try:
        return req.marker is None or req.marker.evaluate({"extra": extra})
    except UndefinedEnvironmentName:
        return False


# --------------------------------------------------------------------------------- differences


def differences(old: list[Package], new: list[Package]) -> list[str]:
    """`name a -> b`, `+name b`, `-name a`: what changed from `old` to `new`."""
    a = {canonicalize_name(p.name): p for p in old}
    b = {canonicalize_name(p.name): p for p in new}
    out = []
    for key in sorted(a.keys() | b.keys()):
        if key not in b:
            out.append(f"-{a[key].name} {a[key].version}")
        elif key not in a:
            out.append(f"+{b[key].name} {b[key].version}")
        elif a[key].version != b[key].version:
            out.append(f"{b[key].name} {a[key].version} -> {b[key].version}")
    return out


# ------------------------------------------------------------------------------ environment.txt


def environment_text(env: RunEnvironment) -> str:
    """The run folder's `environment.txt`: each section's packages as `name==version` lines."""
    c = env.coderun
    out = ["# What ran this benchmark: coderun's side at run start, each project's environment as built.",
           "# Each section's name==version lines can be given to `pip install -r`.", "",
           f"# coderun {c.coderun}, Python {c.python} ({c.implementation}) on {c.platform}",
           *([f"# isolation: {env.isolation} ({env.isolation_note})"] if env.isolation else []),
           f"# coderun's dependencies ({len(c.packages)}):"]
    out += [str(p) for p in c.packages]
    out += [f"# missing: {m}" for m in c.missing]
    for name, p in sorted(env.projects.items()):
        out += ["", f"# project {name}: {p.backend} environment {p.where}, Python {p.python}, "
                f"recorded {p.recorded_at}"]
        if p.source:
            src = p.source
            added = (f" (upstream {src.upstream} + the benchmark's supplementary tests)"
                     if src.upstream and src.upstream != src.commit else "")
            out.append(f"# source: {src.kind} at {src.commit}{added}, from {src.origin or 'unknown'}")
        out.append(f"# installed ({len(p.packages)}):")
        out += [str(pkg) for pkg in p.packages]
    return "\n".join(out) + "\n"
