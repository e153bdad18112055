"""A Python that no Debian suite ships (3.7, 3.8, 3.10, 3.12), for the rootfs base strategy: the host's own
pythonX.Y, the interpreter the image's wheels are built with and the local backend runs, copied into the root
filesystem of the host's Debian suite together with the Debian packages of the libraries it links.

Why this way: without a container registry there is no python:X.Y-slim; Debian's current suites ship one
python3 each (bullseye 3.9, bookworm 3.11, trixie 3.13) and older suites are no longer on its mirrors; and
CPython's sources come from python.org or GitHub, which a machine that reaches only PyPI and Debian cannot
fetch. An interpreter built on this very Debian release (pyenv builds one from source) links exactly the
libraries of that release, so copied into the same release it runs as it does here.

Limits: the host must be a Debian release debootstrap can fetch (images/rootfs.yaml's suites); the interpreter
a self-contained installation under its own prefix (pyenv, or `./configure --prefix=DIR && make altinstall`),
not the system's /usr; tkinter, the test suite and what the host installed into its site-packages are left out.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from coderun.envs.local import find_python
from coderun.errors import EnvironmentBuildError

TARGET_ROOT = "/opt/python"  # the copy is /opt/python/X.Y in the image
# Stdlib modules with C parts that must load in the copy (a library missing in the image fails here, not in a test).
SMOKE_IMPORTS = "ssl, sqlite3, ctypes, bz2, lzma, zlib, decimal, uuid, hashlib, json, venv, ensurepip"


@dataclass(frozen=True)
class HostPython:
    version: str                # "3.7"
    prefix: Path                # its installation on the host
    suite: str                  # the host's Debian suite, the image's too
    packages: tuple[str, ...]   # Debian packages of the libraries it links
    key: str                    # its full version and files, hashed

    @property
    def target(self) -> str:
        return f"{TARGET_ROOT}/{self.version}"

    @property
    def interpreter(self) -> str:
        return f"{self.target}/bin/python{self.version}"


def host_suite(known: Iterable[str], os_release: Path = Path("/etc/os-release")) -> str | None:
    """The host's Debian suite when it is one of `known`, else None."""
    try:
        fields = dict(line.split("=", 1) for line in os_release.read_text().splitlines() if "=" in line)
    except OSError:
        return None
    values = {k: v.strip().strip('"') for k, v in fields.items()}
    suite = values.get("VERSION_CODENAME", "")
    return suite if values.get("ID") == "debian" and suite in set(known) else None


def host_python(version: str, known_suites: Iterable[str]) -> HostPython:
    """The host's pythonX.Y as the image will have it; raises when it cannot be copied."""
    suites = sorted(known_suites)
    suite = host_suite(suites)
    if suite is None:
        raise EnvironmentBuildError(
            f"no Debian suite ships Python {version}, and the host's python{version} can be copied into an "
            f"image only on a Debian host of a suite debootstrap fetches ({', '.join(suites)})",
            hint=f"build on such a machine, or use `--base pull` with a registry that has python:{version}-slim")
    exe, exact = find_python(version)
    if not exact:
        raise EnvironmentBuildError(f"no python{version} on this machine to copy into the image",
                                    hint=f"install Python {version} (e.g. `pyenv install {version}`)")
    prefix = Path(_ask(exe, "import sys; print(sys.base_prefix)")).resolve()
    if str(prefix) in ("/usr", "/usr/local", "/") or not (prefix / "lib" / f"python{version}").is_dir():
        raise EnvironmentBuildError(
            f"python{version} ({exe}) is installed under {prefix}, not in a prefix of its own: only a "
            "self-contained installation can be copied into an image",
            hint=f"install Python {version} with pyenv, or `./configure --prefix=DIR && make altinstall`")
    files = kept_files(prefix, version)
    digest = hashlib.sha256(_ask(exe, "import sys; print(sys.version)").encode())
    for rel in files:
        digest.update(f"{rel}:{(prefix / rel).lstat().st_size}\n".encode())
    return HostPython(version, prefix, suite, linked_packages(prefix, files), digest.hexdigest()[:16])


def _ask(exe: Path, code: str) -> str:
    proc = subprocess.run([str(exe), "-I", "-c", code], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise EnvironmentBuildError(f"{exe} did not answer: {proc.stderr.strip()[-300:]}")
    return proc.stdout.strip()


def _left_out(rel: str, version: str) -> bool:
    lib = f"lib/python{version}/"
    return (rel.startswith(("include/", "share/", f"{lib}test/", f"{lib}idlelib/", f"{lib}tkinter/",
                            f"{lib}turtledemo/", f"{lib}site-packages/", f"{lib}lib-dynload/_tkinter"))
            or rel.endswith(".a"))


def kept_files(prefix: Path, version: str) -> list[str]:
    """The installation's files (and symlinks) that the copy keeps, relative to the prefix, sorted."""
    out = []
    for root, dirs, names in os.walk(prefix):
        rel_root = os.path.relpath(root, prefix)
        dirs[:] = [d for d in dirs if not _left_out(os.path.join(rel_root, d, "").removeprefix("./"), version)]
        names += [d for d in dirs if os.path.islink(os.path.join(root, d))]  # os.walk does not enter them
        for name in names:
            rel = os.path.join(rel_root, name).removeprefix("./")
            if not _left_out(rel, version):
                out.append(rel)
    return sorted(out)


def linked_packages(prefix: Path, files: list[str]) -> tuple[str, ...]:
    """The Debian packages holding the shared libraries the interpreter and its extension modules link."""
    binaries = [prefix / rel for rel in files if re.search(r"(^bin/python[\d.]+$|\.so(\.[\d.]+)?$)", rel)
                and not (prefix / rel).is_symlink()]
    libraries: set[str] = set()
    for binary in binaries:
        proc = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, timeout=60)
        libraries |= {m for m in re.findall(r"=>\s+(/\S+)", proc.stdout) if not m.startswith(str(prefix))}
    owner = _packages_of(libraries)
    unknown = sorted(lib for lib in libraries if lib not in owner)
    if unknown:
        raise EnvironmentBuildError(
            f"the Python under {prefix} links libraries no Debian package holds: {', '.join(unknown)}",
            hint="build that Python against Debian's libraries (their -dev packages), as pyenv does")
    return tuple(sorted(set(owner.values()) - {"libc6"}))


def _packages_of(libraries: set[str]) -> dict[str, str]:
    """Library path -> the Debian package holding it, by one `dpkg -S` of each path as it is, resolved, and
    under /usr (usrmerge lists some files there only)."""
    variants = {lib: dict.fromkeys([lib, os.path.realpath(lib), lib if lib.startswith("/usr/") else "/usr" + lib])
                for lib in libraries}
    proc = subprocess.run(["dpkg", "-S", *{v for vs in variants.values() for v in vs}], capture_output=True,
                          text=True, timeout=120)
    held = {}
    for line in proc.stdout.splitlines():  # "libssl3:amd64: /usr/lib/x86_64-linux-gnu/libssl.so.3"
        package, _, path = line.partition(": ")
        held[path.strip()] = package.split(":")[0].split(",")[0].strip()
    return {lib: next(held[v] for v in vs if v in held) for lib, vs in variants.items() if any(v in held for v in vs)}


def copy_into(hp: HostPython, root: Path) -> None:
    """Copy the interpreter into the root filesystem at /opt/python/X.Y, make its libpython known to the
    dynamic loader there, and check that it runs and loads its C modules (chroot: as root, as debootstrap)."""
    dest = root / hp.target.lstrip("/")
    for rel in kept_files(hp.prefix, hp.version):
        src, out = hp.prefix / rel, dest / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            out.symlink_to(os.readlink(src))
        else:
            shutil.copy2(src, out)
    conf = root / "etc" / "ld.so.conf.d" / "coderun-python.conf"
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text(f"{hp.target}/lib\n")
    for cmd in (["ldconfig", "-r", str(root)],
                ["chroot", str(root), hp.interpreter, "-I", "-c", f"import {SMOKE_IMPORTS}; print('ok')"]):
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise EnvironmentBuildError(f"the copy of {hp.prefix} in the {hp.suite} root filesystem does not work: "
                                        f"{' '.join(cmd[:3])} failed: {(proc.stderr or proc.stdout).strip()[-500:]}")
