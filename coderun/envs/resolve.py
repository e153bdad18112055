"""Dependencies as of a date: the versions a project's own era would have installed.

A manifest's requirements are mostly unpinned, and today's releases (pytest 9 for a 2019 project) break old
test suites. `uv pip compile --exclude-newer DATE` resolves them among the files uploaded before DATE, for
the environment's interpreter, into the env folder (`resolved.txt`). uv installs exactly that pinned set
(`install_pinned`: 1-3 s where pip took 8-32 s for the same wheels), and pip the project's own line, as
before: its setup.py and build configuration are the project's era's, which uv's isolated builds are not.
An undated environment whose requirements are all named (`pytest coverage`, no paths or files) is resolved
and installed by uv too (`install_named`), and uv locates a PyPI source's sdist for `download_sdist`
(`locate_sdist`); pip does either when uv cannot.

uv reads its own configuration, not pip's. So that a user behind a mirror configures nothing for coderun,
pip's index settings (`pip config list`, which includes the PIP_* variables) are passed on: index-url,
extra-index-url, find-links, no-index, trusted-host, cert; and pip's way of choosing among indexes (the best
version from any of them) is uv's `unsafe-best-match`. A local index or find-links folder that does not
exist is left out, as pip ignores it too. Files of an index that gives no upload time cannot be dated, and uv
leaves them out.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path
from urllib.parse import urlparse

from coderun.errors import EnvironmentBuildError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

# The test tooling coderun runs the suite with, when the manifest names no version of its own. coverage is
# coderun's instrument, not the project's: dynamic contexts need 5.0, so it is taken as of today. pytest is
# the project's runner and keeps the project's date, but coderun's command line and plugins need 4.6 (pytest
# 2.8 of 2015 has no `-o`): when nothing that old fits, it and what it needs move to the 4.6 series (June 2019).
TOOLING = {"pytest": "pytest>=4.6", "coverage": "coverage>=5"}
_PYTEST_4_6 = dt.date(2019, 6, 27)  # the day before pytest 5.0


def uv_binary() -> str:
    """The uv that was installed with coderun (a dependency), else one on PATH."""
    exe = Path(sysconfig.get_path("scripts")) / "uv"
    if exe.is_file():
        return str(exe)
    beside = Path(sys.executable).parent / "uv"
    if beside.is_file():
        return str(beside)
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        raise EnvironmentBuildError("resolving dependencies as of a date needs uv, which is not installed",
                                    hint="pip install uv (a dependency of coderun)") from None


def pip_config(pip: list[str]) -> dict[str, str]:
    """pip's settings by key (`index-url`, …), the most specific scope winning: PIP_* variables, then
    the `install` section, then `global`. Asked once per process for the same pip and the same variables that
    choose its configuration (`pip config list` takes 0.4 s; a build asks up to 4 times)."""
    chosen = tuple(sorted((k, v) for k, v in os.environ.items()
                          if k.startswith("PIP_") or k in ("HOME", "XDG_CONFIG_HOME", "XDG_CONFIG_DIRS", "VIRTUAL_ENV")))
    return dict(_pip_config(tuple(pip), chosen))


@functools.cache
def _pip_config(pip: tuple[str, ...], _chosen: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    proc = subprocess.run([*pip, "config", "list"], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    rank = {":env:": 3, "install": 2, "global": 1}
    best: dict[str, tuple[int, str]] = {}
    for line in proc.stdout.splitlines():
        m = re.match(r"^([^.=]+|:env:)\.([\w-]+)='(.*)'$", line.strip())
        if not m or m.group(1) not in rank:
            continue
        scope, key, value = rank[m.group(1)], m.group(2), m.group(3)
        if key not in best or scope > best[key][0]:
            best[key] = (scope, value)
    return tuple((k, v) for k, (_, v) in best.items())


def _exists(location: str) -> bool:
    """False only for a local path or file:// URL that is not there (pip ignores those with a warning)."""
    if "://" in location and not location.startswith("file://"):
        return True
    path = urlparse(location).path if location.startswith("file://") else location
    return Path(path).exists()


def uv_index_args(config: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """uv arguments and environment variables that give uv pip's index configuration."""
    args: list[str] = []
    if config.get("no-index", "").lower() in ("1", "true", "yes", "on"):
        args.append("--no-index")
    if config.get("index-url"):
        args += ["--index-url", config["index-url"]]
    for url in config.get("extra-index-url", "").split():
        if _exists(url):
            args += ["--extra-index-url", url]
    for loc in config.get("find-links", "").split():
        if _exists(loc):
            args += ["--find-links", loc]
    for host in config.get("trusted-host", "").split():
        args += ["--allow-insecure-host", host]
    env = {}
    if config.get("cert") and "SSL_CERT_FILE" not in os.environ:
        env["SSL_CERT_FILE"] = config["cert"]
    return args, env


def uv_env(pip: list[str], env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """uv's index arguments and environment for a call that installs or resolves as pip would."""
    index_args, index_env = uv_index_args(pip_config(pip))
    return index_args, {**env, **index_env, "UV_PYTHON_DOWNLOADS": "never",
                        "UV_INDEX_STRATEGY": os.environ.get("UV_INDEX_STRATEGY", "unsafe-best-match")}


def _run_logged(cmd: list[str], env: dict[str, str], log: Path) -> int:
    """Run a uv command with its command line and output appended to `log`; its exit code."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as fh:
        fh.write(f"$ {' '.join(cmd)}\n")
        fh.flush()
        return subprocess.run(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL).returncode


def _uv_if_any() -> str | None:
    """uv, where only speed depends on it (pip does the same work without): None when it is not installed."""
    try:
        return uv_binary()
    except EnvironmentBuildError:
        return None


def install_pinned(resolved: Path, *, python: Path, pip: list[str], log: Path, env: dict[str, str]
                   ) -> list[str] | None:
    """Install the pinned lines of `resolved` into `python`'s venv with uv: exactly those versions with no
    resolution (`--no-deps`: the set is complete), files copied rather than linked to uv's cache (a test
    that writes into site-packages must not reach the cache), bytecode compiled as pip compiles it. Returns
    the project's own lines (".") it leaves to the caller; None when uv failed: the log says why."""
    lines = resolved.read_text().splitlines()
    pins, own = [line for line in lines if "==" in line], [line for line in lines if line.strip() == "."]
    if not pins:
        return own
    pinned = log.with_name("pinned.txt")
    pinned.write_text("\n".join(pins) + "\n")
    index_args, run_env = uv_env(pip, env)
    cmd = [uv_binary(), "pip", "install", "--python", str(python), "--no-deps", "--link-mode", "copy",
           "--compile-bytecode", *index_args, "-r", str(pinned)]
    return own if _run_logged(cmd, run_env, log) == 0 else None


def install_named(requirements: list[str], *, python: Path, pip: list[str], log: Path, env: dict[str, str]
                  ) -> bool:
    """Resolve and install named requirements (`pytest`, `six>=1.10`: no files, paths or options) into `python`'s
    venv with uv, as pip would (pip's indexes and constraint files), files copied and bytecode compiled as in
    `install_pinned`. uv takes 1-2 s where pip took 6-8 s for pytest and coverage alone. False when the list
    is not only named requirements, or uv failed (the log says why): pip installs them then."""
    if not requirements or not all(_NAMED.match(r) for r in requirements):
        return False
    uv = _uv_if_any()
    if uv is None:
        return False
    index_args, run_env = uv_env(pip, env)
    constraints = [f for f in pip_config(pip).get("constraint", "").split() if os.path.isfile(f)]
    cmd = [uv, "pip", "install", "--python", str(python), "--link-mode", "copy", "--compile-bytecode",
           *index_args, *(a for f in constraints for a in ("--constraint", f)), *requirements]
    return _run_logged(cmd, run_env, log) == 0


def locate_sdist(requirement: str, *, pip: list[str], folder: Path) -> tuple[str, str] | None:
    """(url, sha256) of the sdist of "name==version" on pip's indexes, as uv finds it (`uv pip compile
    --format pylock.toml`, 0.3 s: `pip download` also builds the sdist's metadata, 4-5 s); None when uv
    does not find one (pip is asked then). `folder` takes the lock file."""
    uv = _uv_if_any()
    if uv is None:
        return None
    index_args, run_env = uv_env(pip, dict(os.environ))
    lock = folder / "pylock.toml"
    (folder / "requirement.in").write_text(requirement + "\n")
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"  # as `pip download` checks requires-python: for coderun's python
    cmd = [uv, "pip", "compile", "--quiet", "--format", "pylock.toml", "--no-deps", "--no-binary", ":all:",
           "--python-version", version, *index_args, str(folder / "requirement.in"), "-o", str(lock)]
    proc = subprocess.run(cmd, env=run_env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if proc.returncode != 0 or not lock.is_file():
        return None
    try:
        sdist = tomllib.loads(lock.read_text())["packages"][0]["sdist"]
        return sdist["url"], sdist["hashes"]["sha256"]
    except (tomllib.TOMLDecodeError, KeyError, IndexError, TypeError):
        return None


# A requirement by name, with extras, version specifiers and a marker: PEP 508 without URLs or paths.
_NAMED = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[\w.,\s-]*\])?\s*([<>=!~][^@/\\]*)?(;[^@]*)?$")


def exclude_newer(day: dt.date) -> str:
    """Everything uploaded on `day` counts as of `day`."""
    return f"{day.isoformat()}T23:59:59Z"


def compile_requirements(requirements_in: Path, out: Path, *, python: Path, as_of: dt.date, pip: list[str],
                         pip_args: list[str], log: Path, env: dict[str, str], tree: Path | None = None
                         ) -> None:
    """Pin `requirements_in` as of `as_of` for `python` into `out` (uv pip compile). The line of the project
    itself (`tree`) becomes ".": pip installs from the tree's copy as its working directory.

    A package with no release left from before the date (its old files were deleted, as atomicwrites' were
    in 2022), or none that fits the tooling's floors, would make the whole set unresolvable: it is taken as
    of pytest 4.6's time, then of today, and the log says so.
    """
    index_args, run_env = uv_env(pip, env)
    today = dt.date.today() + dt.timedelta(days=1)
    # Each package's own cutoff when it is not `as_of`: coverage's, then what had to move. A package that
    # moves goes first to pytest 4.6's time (its dependencies of mid-2019), then to today.
    later = {"coverage": today}
    steps = [d for d in (_PYTEST_4_6, today) if d > as_of]
    for _attempt in range(_MAX_MOVES):
        cmd = [uv_binary(), "pip", "compile", str(requirements_in), "-o", str(out), "--python", str(python),
               "--exclude-newer", exclude_newer(as_of),
               *[a for p, day in later.items() for a in ("--exclude-newer-package", f"{p}={exclude_newer(day)}")],
               "--no-header", "--no-annotate", *index_args, *_compile_args(pip_args)]
        code = _run_logged(cmd, run_env, log)
        if code == 0:
            if tree is not None:  # the project's own line names the build copy: pip runs from it, so "."
                out.write_text("\n".join("." if line.strip() == str(tree) else line
                                         for line in out.read_text().splitlines()) + "\n")
            return
        text = log.read_text(errors="replace").rsplit("$ ", 1)[-1]
        moved = {}
        for p in dict.fromkeys(re.findall(r"`([\w.-]+)` was filtered by `exclude-newer(?:-package)?`", text)):
            nxt = next((d for d in steps if d > later.get(p, as_of)), None)
            if nxt is not None:
                moved[p] = nxt
        if not moved:
            break
        with log.open("a") as fh:
            for p, day in moved.items():
                fh.write(f"# no release of {p} from before {later.get(p, as_of)} is left or fits the rest: "
                         f"taken as of {day if day < today else 'today'}\n")
        later.update(moved)
    text = log.read_text(errors="replace")
    tail = "\n".join(line for line in text.splitlines() if "is missing an upload date" not in line)[-2000:]
    undated_index = "is missing an upload date" in text
    raise EnvironmentBuildError(
        f"resolving the dependencies as of {as_of} failed (uv exit {code})", log_path=str(log),
        log_tail=tail, hint="check install.requirements, or move install.resolve_as_of in the manifest"
        + ("; an index that gives no upload times cannot be dated: `resolve_as_of: false` takes today's "
           "releases" if undated_index else ""))


_MAX_MOVES = 40  # uv names one package per failed resolution


def _compile_args(pip_args: list[str]) -> list[str]:
    """The pip_args that change what is resolved (the rest only concern installing)."""
    keep = {"--pre", "--index-url", "-i", "--extra-index-url", "--find-links", "-f", "--no-index",
            "-c", "--constraint"}
    with_value = {"--index-url", "-i", "--extra-index-url", "--find-links", "-f", "-c", "--constraint"}
    out, i = [], 0
    while i < len(pip_args):
        a = pip_args[i]
        name = a.split("=", 1)[0]
        if name in keep:
            out.append(a)
            if name in with_value and "=" not in a and i + 1 < len(pip_args):
                out.append(pip_args[i + 1])
                i += 1
        i += 1
    return out
