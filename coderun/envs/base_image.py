"""Base images: one Python per image, with a venv at /opt/venv and an unprivileged user `coderun`.

Two strategies make the image that `images/base.Dockerfile` finishes:
    pull    FROM python:X.Y-slim. Used automatically only when that image is already in the engine
            (coderun never contacts a registry on its own); `--base pull` pulls it first.
    rootfs  No registry: debootstrap builds the root filesystem of the Debian suite whose python3 is
            X.Y (see images/rootfs.yaml), coderun tars it (cached under $CODERUN_HOME/images/rootfs/)
            and `docker import`s it. A version no suite ships gets the host's own pythonX.Y copied
            into the host's Debian suite (host_python.py).
A version neither strategy can provide is an error listing what is available, never a substitute.
"""

from __future__ import annotations

import fcntl
import functools
import os
import shutil
import tarfile
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import docker
import docker.errors
import yaml

from coderun.config import Settings
from coderun.envs import dockerlib
from coderun.envs.host_python import HostPython, copy_into, host_python
from coderun.errors import EnvironmentBuildError, UsageError
from coderun.events import Listener, silent, step

PYTHON_IN_IMAGE = "/opt/venv/bin/python"


class BaseStrategy(str, Enum):
    PULL = "pull"
    ROOTFS = "rootfs"


@dataclass(frozen=True)
class RootfsRecipe:
    mirror: str | None  # None: debootstrap's own default
    variant: str
    packages: tuple[str, ...]
    suites: dict[str, str]  # python "X.Y" -> Debian suite
    glibc: dict[str, str]  # suite -> its glibc version
    pull_glibc: str  # the oldest glibc of a python:X.Y-slim image

    @classmethod
    def load(cls) -> RootfsRecipe:
        path = dockerlib.recipe_path("rootfs.yaml")
        try:
            data = yaml.safe_load(path.read_text())
            mirror = os.environ.get("CODERUN_DEBIAN_MIRROR") or data.get("mirror") or None
            return cls(mirror=mirror, variant=data["variant"], packages=tuple(data["packages"]),
                       suites={str(k): str(v) for k, v in data["suites"].items()},
                       glibc={str(k): str(v) for k, v in data["glibc"].items()},
                       pull_glibc=str(data["pull_glibc"]))
        except (yaml.YAMLError, KeyError, TypeError, AttributeError) as e:
            raise EnvironmentBuildError(f"{path} is not a valid rootfs recipe: {e}") from None


@dataclass(frozen=True)
class BaseImage:
    tag: str
    python: str
    strategy: BaseStrategy
    parent: str  # the imported rootfs tag, or python:X.Y-slim
    built: bool  # False when it was already in the engine


def pull_reference(python: str) -> str:
    return f"python:{python}-slim"


def available(client: docker.DockerClient | None = None) -> dict[str, list[str]]:
    """Python versions each strategy can provide here and now (pull: only those already pulled)."""
    recipe = RootfsRecipe.load()
    rootfs = sorted(recipe.suites, key=_version_key) if shutil.which("debootstrap") else []
    if rootfs:
        rootfs += [f"{v} (the host's, copied)" for v in _COPYABLE if v not in recipe.suites and _copyable(v)]
    pulled = []
    if client is not None:
        for image in client.images.list(name="python"):
            pulled += [t.split(":", 1)[1][:-5] for t in image.tags
                       if t.startswith("python:") and t.endswith("-slim")]
    return {"rootfs": rootfs, "pull (already in the engine)": sorted(set(pulled), key=_version_key)}


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in v.split(".") if p.isdigit())


def choose_strategy(client: docker.DockerClient, python: str,
                    requested: BaseStrategy | None, apt: tuple[str, ...] = ()) -> BaseStrategy:
    """The requested strategy, or: pull if python:X.Y-slim is already local, else rootfs if a suite fits.
    Debian packages (`apt`) can only come from a rootfs (builds have no network), so they make rootfs
    the first choice."""
    if requested is not None:
        if requested is BaseStrategy.ROOTFS:
            _rootfs_suite(python)  # fails clearly when no suite ships that version
        return requested
    if apt and _rootfs_can_provide(python):
        return BaseStrategy.ROOTFS
    if dockerlib.image_exists(client, pull_reference(python)):
        return BaseStrategy.PULL
    if _rootfs_can_provide(python):
        return BaseStrategy.ROOTFS
    raise EnvironmentBuildError(
        f"no base image strategy can provide Python {python} here; available: "
        + "; ".join(f"{k}: {', '.join(v) or 'none'}" for k, v in available(client).items()),
        hint=f"with a registry, `--base pull` uses {pull_reference(python)}; without one, use a Python "
             "version listed for rootfs (and install debootstrap)")


def _rootfs_can_provide(python: str) -> bool:
    return bool(shutil.which("debootstrap")) and (python in RootfsRecipe.load().suites or _copyable(python))


_COPYABLE = ("3.6", "3.7", "3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "3.14")


def _rootfs_suite(python: str) -> str:
    recipe = RootfsRecipe.load()
    if python in recipe.suites:
        return recipe.suites[python]
    try:
        return _copied(python).suite
    except EnvironmentBuildError as e:
        raise UsageError(
            f"the rootfs strategy cannot provide Python {python}: Debian suites ship "
            + ", ".join(f"{v} ({s})" for v, s in sorted(recipe.suites.items(), key=lambda i: _version_key(i[0])))
            + f"; and {e.message}",
            hint=(f"{e.hint}; " if e.hint else "") + f"or `--base pull` for {pull_reference(python)}") from None


@functools.cache
def _copied(python: str) -> HostPython:
    """The host's pythonX.Y for a version no suite ships (walking and `ldd`-ing it takes a second or two)."""
    return host_python(python, RootfsRecipe.load().glibc)


def _copyable(python: str) -> bool:
    try:
        _copied(python)
    except EnvironmentBuildError:
        return False
    return True


@dataclass(frozen=True)
class BaseSpec:
    """Everything that names a base image, computed without building anything."""

    python: str
    strategy: BaseStrategy
    parent: str
    interpreter: str
    key: str
    apt: tuple[str, ...]
    glibc: str  # wheels for images on this base must not need a newer one

    @property
    def tag(self) -> str:
        return f"coderun/base:py{self.python}-{self.strategy.value}-{self.key}"


def base_spec(client: docker.DockerClient, python: str, strategy: BaseStrategy | None = None,
              apt: tuple[str, ...] = ()) -> BaseSpec:
    strategy = choose_strategy(client, python, strategy, apt)
    if strategy is BaseStrategy.PULL:
        if apt:
            raise UsageError(f"the Debian packages {', '.join(apt)} (install.apt, tests.services) need the "
                             "rootfs base strategy: builds run without a network, so apt cannot download "
                             "inside a python:X.Y-slim image",
                             hint="use `--base rootfs`")
        parent, interpreter = pull_reference(python), "python3"
        glibc = RootfsRecipe.load().pull_glibc
    else:
        parent, interpreter = _rootfs_tag(python, apt), _interpreter(python)
        glibc = RootfsRecipe.load().glibc[_rootfs_suite(python)]
    key = dockerlib.content_hash(strategy.value, parent, interpreter, dockerlib.recipe_text("base.Dockerfile"))
    return BaseSpec(python, strategy, parent, interpreter, key, apt, glibc)


def build_base_image(python: str, settings: Settings, *, strategy: BaseStrategy | None = None,
                     apt: tuple[str, ...] = (), client: docker.DockerClient | None = None,
                     on_event: Listener = silent) -> BaseImage:
    """The base image for `python`, built when it is not already in the engine."""
    client = client or dockerlib.docker_client()
    spec = base_spec(client, python, strategy, apt)
    if dockerlib.image_exists(client, spec.tag):
        return BaseImage(spec.tag, python, spec.strategy, spec.parent, built=False)
    if spec.strategy is BaseStrategy.PULL:
        _ensure_pulled(client, spec.parent, on_event)
    else:
        import_rootfs(python, settings, apt=apt, client=client, on_event=on_event)
    dockerlib.build_image(
        client, dockerlib.Context(dockerlib.recipe_text("base.Dockerfile"), {}, {}), tag=spec.tag,
        buildargs={"BASE": spec.parent, "PYTHON": spec.interpreter},
        labels=dockerlib.labels("base", spec.key, python=python, strategy=spec.strategy.value),
        log_path=dockerlib.images_dir(settings) / "logs" / f"base-py{python}-{spec.key}.log",
        title=f"base image Python {python} ({spec.strategy.value})", on_event=on_event)
    return BaseImage(spec.tag, python, spec.strategy, spec.parent, built=True)


def _ensure_pulled(client: docker.DockerClient, ref: str, on_event: Listener | None) -> None:
    if dockerlib.image_exists(client, ref):
        return
    with step(on_event, "", f"pulling {ref}"):
        try:
            client.images.pull(ref)
        except docker.errors.APIError as e:
            raise EnvironmentBuildError(f"cannot pull {ref}: {e.explanation}",
                                        hint="without a registry, use `--base rootfs`") from None


# ---------------------------------------------------------------------------------------------
# rootfs: debootstrap -> tar (cached) -> docker import


def _host_copy(python: str) -> HostPython | None:
    """The host's interpreter to copy in, for a version no suite ships."""
    return None if python in RootfsRecipe.load().suites else _copied(python)


def _interpreter(python: str) -> str:
    host = _host_copy(python)
    return host.interpreter if host else "/usr/bin/python3"


def _rootfs_key(python: str, apt: tuple[str, ...]) -> tuple[str, str, tuple[str, ...]]:
    recipe = RootfsRecipe.load()
    suite = _rootfs_suite(python)
    host = _host_copy(python)
    packages = tuple(dict.fromkeys((*recipe.packages, *(host.packages if host else ()), *sorted(apt))))
    # The mirror is not part of the key: a suite's packages are the same from any mirror.
    key = dockerlib.content_hash(suite, recipe.variant, ",".join(packages),
                                 *([f"python {host.version} {host.key}"] if host else []))
    return suite, key, packages


def _rootfs_tag(python: str, apt: tuple[str, ...]) -> str:
    suite, key, _ = _rootfs_key(python, apt)
    return f"coderun/rootfs:{suite}-{key}"


def import_rootfs(python: str, settings: Settings, *, apt: tuple[str, ...] = (),
                  client: docker.DockerClient | None = None, on_event: Listener = silent) -> str:
    """Import the Debian root filesystem for `python` (debootstrapping it when not cached); its tag."""
    client = client or dockerlib.docker_client()
    suite, key, packages = _rootfs_key(python, apt)
    tag = f"coderun/rootfs:{suite}-{key}"
    if dockerlib.image_exists(client, tag):
        return tag
    tarball = rootfs_tarball(suite, key, packages, settings, on_event, _host_copy(python))
    with step(on_event, "", f"import rootfs {suite}"):
        try:
            client.api.import_image_from_file(
                str(tarball), repository="coderun/rootfs", tag=f"{suite}-{key}",
                changes=[f"LABEL {k}={v}" for k, v in dockerlib.labels(
                    "rootfs", key, suite=suite, python=python).items()])
        except docker.errors.APIError as e:
            raise EnvironmentBuildError(f"docker import of {tarball} failed: {e.explanation}") from None
    if not dockerlib.image_exists(client, tag):
        raise EnvironmentBuildError(f"docker import of {tarball} did not produce {tag}")
    return tag


def rootfs_tarball(suite: str, key: str, packages: tuple[str, ...], settings: Settings,
                   on_event: Listener, host: HostPython | None = None) -> Path:
    """$CODERUN_HOME/images/rootfs/<suite>-<key>.tar, made with debootstrap when missing (with the host's
    interpreter copied in, for a version no suite ships)."""
    out_dir = dockerlib.images_dir(settings) / "rootfs"
    tarball = out_dir / f"{suite}-{key}.tar"
    if tarball.is_file():
        return tarball
    if not shutil.which("debootstrap"):
        raise EnvironmentBuildError("the rootfs strategy needs debootstrap, which is not installed",
                                    hint="apt-get install debootstrap (or run .ci/docker-setup.sh), "
                                         "or use `--base pull` where a registry is reachable")
    if os.geteuid() != 0:
        raise EnvironmentBuildError("debootstrap must run as root to build a root filesystem",
                                    hint="run `coderun images build` as root once (the tarball is "
                                         "cached), or use `--base pull`")
    out_dir.mkdir(parents=True, exist_ok=True)
    # Two builds side by side (tasks build --at-once) need the same root filesystem: one makes it.
    with open(out_dir / f"{suite}-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not tarball.is_file():
            _debootstrap(suite, key, packages, out_dir, tarball, on_event, host)
    return tarball


def _debootstrap(suite: str, key: str, packages: tuple[str, ...], out_dir: Path, tarball: Path,
                 on_event: Listener, host: HostPython | None) -> None:
    recipe = RootfsRecipe.load()
    root = out_dir / f"{suite}-{key}.d"
    log = out_dir / f"{suite}-{key}.log"
    shutil.rmtree(root, ignore_errors=True)
    cmd = ["debootstrap", f"--variant={recipe.variant}", f"--include={','.join(packages)}", suite,
           str(root), *([recipe.mirror] if recipe.mirror else [])]
    try:
        log.unlink(missing_ok=True)  # one log per attempt
        dockerlib.run_logged(cmd, log, title=f"debootstrap {suite}", on_event=on_event,
                             hint="debootstrap downloads from its default Debian mirror, or from "
                                  "CODERUN_DEBIAN_MIRROR when set")
        if host is not None:
            with step(on_event, "", f"Python {host.version} from {host.prefix} copied into {suite}"):
                copy_into(host, root)
        _slim(root)
        partial = tarball.with_suffix(".tar.partial")
        with step(on_event, "", f"tar {suite} root filesystem"):
            _tar_rootfs(root, partial)
        partial.rename(tarball)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _slim(root: Path) -> None:
    """Drop what an image never uses: downloaded .debs, apt lists, docs, man pages, locales."""
    for rel in ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man",
                "usr/share/info", "usr/share/locale"):
        d = root / rel
        if d.is_dir():
            for child in d.iterdir():
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child)
                elif child.name != "lock":
                    child.unlink()


def _tar_rootfs(root: Path, out: Path) -> None:
    """Numeric owners and no /dev, /proc, /sys contents: the engine provides those at run time."""
    skip = {"./dev/", "./proc/", "./sys/"}

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        return None if any(info.name.startswith(s) for s in skip) else info

    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        tar.add(root, arcname=".", filter=keep)
