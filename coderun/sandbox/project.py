"""A project's sandbox: what differs per backend, in one table, and the limits of a project's test run.

    project_sandbox(manifest, settings, backend) -> (SandboxSpec, ProjectEnvironment, Baseline)  built when missing
    build_environment(manifest, settings, backend, force=...) -> BuiltEnvironment       `coderun env build`
    run_limits(durations, manifest) -> (per-test, whole-run) time limits

Every question whose answer depends on the backend (which env or image, how it is built, where it
lives) is answered here, by `_BACKENDS`; the rest of coderun takes a `Backend` and asks.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path

from coderun.choices import Backend, Isolation
from coderun.config import Settings
from coderun.errors import TaskError
from coderun.events import Listener, silent
from coderun.manifests.schema import Manifest
from coderun.records import Baseline, ProjectEnvironment
from coderun.sandbox.base import SandboxSpec


def default_backend() -> Backend:
    """docker when an engine answers, else local (the embedded default)."""
    try:
        import docker

        docker.from_env(timeout=3).ping()
        return Backend.DOCKER
    except Exception:  # no SDK config, no socket, no engine: all mean "not available"
        return Backend.LOCAL


@dataclass(frozen=True)
class BuiltEnvironment:
    """A project's environment after `coderun env build`: its baseline and where it lives."""

    baseline: Baseline
    location: str                         # the venv's folder or the image's tag
    build_seconds: float | None = None    # known for a venv


def _import_root(manifest: Manifest) -> str:
    return "" if manifest.import_root in ("", ".") else manifest.import_root


class _Local:
    """A venv per project, its prepared tree beside it."""

    @staticmethod
    def sandbox(manifest: Manifest, settings: Settings) -> tuple[SandboxSpec, ProjectEnvironment, Baseline]:
        from coderun.envs.local import build_local_env, find_local_env, load_baseline, local_packages

        env = find_local_env(manifest, settings) or build_local_env(manifest, settings)
        return SandboxSpec(project=manifest.name, project_dir=str(env.checkout.path), python=str(env.python),
                           import_root=_import_root(manifest), services=tuple(manifest.tests.services)), \
            local_packages(env), load_baseline(env)

    @staticmethod
    def build(manifest: Manifest, settings: Settings, force: bool, on_event: Listener) -> BuiltEnvironment:
        from coderun.envs.local import build_local_env, load_baseline

        env = build_local_env(manifest, settings, force=force, on_event=on_event)
        meta = json.loads((env.path / "env.json").read_text())
        return BuiltEnvironment(load_baseline(env), str(env.path), meta["build_seconds"])

    @staticmethod
    def usable(spec: SandboxSpec) -> bool:
        return bool(spec.python) and Path(spec.python).exists() and Path(spec.project_dir).is_dir()

    @staticmethod
    def pull(spec: SandboxSpec, registry: str) -> bool:
        return False  # a venv is not kept in a registry: it is built from the manifest


class _Docker:
    """An image per project, built from the base image."""

    @staticmethod
    def sandbox(manifest: Manifest, settings: Settings) -> tuple[SandboxSpec, ProjectEnvironment, Baseline]:
        from coderun.envs.docker import build_project_image, find_project_image

        image = find_project_image(manifest, settings) or build_project_image(manifest, settings)
        return SandboxSpec(project=manifest.name, project_dir=image.workdir, python=image.python_path,
                           import_root=_import_root(manifest), image=image.tag,
                           services=tuple(manifest.tests.services)), image.environment, image.baseline

    @staticmethod
    def build(manifest: Manifest, settings: Settings, force: bool, on_event: Listener) -> BuiltEnvironment:
        from coderun.envs.docker import build_project_image

        image = build_project_image(manifest, settings, force=force, on_event=on_event)
        return BuiltEnvironment(image.baseline, image.tag)

    @staticmethod
    def usable(spec: SandboxSpec) -> bool:
        from coderun.envs import dockerlib

        with contextlib.suppress(Exception):  # no engine, or no such image: not usable here
            dockerlib.docker_client().images.get(spec.image)
            return True
        return False

    @staticmethod
    def pull(spec: SandboxSpec, registry: str) -> bool:
        from coderun.envs import dockerlib
        from coderun.envs.registry import pull_image

        return pull_image(dockerlib.docker_client(), spec.image, registry)


_BACKENDS: dict[Backend, type[_Local] | type[_Docker]] = {Backend.LOCAL: _Local, Backend.DOCKER: _Docker}


def project_sandbox(manifest: Manifest, settings: Settings,
                    backend: Backend | str) -> tuple[SandboxSpec, ProjectEnvironment, Baseline]:
    """The sandbox for a project's tests, what is installed in it and its baseline, built when missing."""
    return _BACKENDS[Backend.parse(backend)].sandbox(manifest, settings)


def project_sandbox_spec(manifest: Manifest, settings: Settings, backend: Backend | str) -> SandboxSpec:
    """The sandbox for a project's tests: its venv (local) or its image (docker), built when missing."""
    return project_sandbox(manifest, settings, backend)[0]


def usable_here(spec: SandboxSpec, backend: Backend | str) -> bool:
    """Whether a spec made on another machine (a cluster's driver) works on this one as it is: its venv and
    tree are here (one machine, or a shared home), or its image is in this engine."""
    return _BACKENDS[Backend.parse(backend)].usable(spec)


def pull_environment(spec: SandboxSpec, backend: Backend | str, registry: str) -> bool:
    """Fetch the spec's environment from a registry by its content tag (docker images; a venv never is):
    whether it is here now. A SandboxError when the registry fails."""
    return _BACKENDS[Backend.parse(backend)].pull(spec, registry)


def build_environment(manifest: Manifest, settings: Settings, backend: Backend, *, force: bool = False,
                      on_event: Listener = silent) -> BuiltEnvironment:
    """Build (or with `force` rebuild) the project's venv or image and record its baseline."""
    return _BACKENDS[backend].build(manifest, settings, force, on_event)


def original_tree(manifest: Manifest, settings: Settings, bare: Path) -> Path:
    """Where a task's original files are read from: the tree after install.pre_install, which the sandbox
    holds on either backend and the local environment keeps (tasks build always makes it), else the checkout."""
    if not manifest.install.pre_install:
        return bare
    from coderun.envs.local import find_local_env

    env = find_local_env(manifest, settings)
    if env is None:
        raise TaskError(f"{manifest.name}: its install.pre_install tree is not built (the local environment keeps it)",
                        hint=f"coderun env build {manifest.name} --backend local")
    return env.checkout.path


def isolation_of(backend: Backend, requested: Isolation) -> tuple[str, str]:
    """How a run's samples are kept apart on this machine, and what makes it (or why there is none):
    docker's container; on local, namespaces where they can be made unless turned off. Requested and
    impossible: SandboxUnavailable, before anything runs."""
    from coderun.errors import SandboxUnavailable
    from coderun.sandbox import isolation

    if backend is Backend.DOCKER:
        return "container", "a container per worker slot (see the threat model)"
    if requested is Isolation.NONE:
        return "none", "turned off (--isolation none)"
    why = isolation.unavailable()
    if why is None:
        return "namespaces", isolation.version()
    if requested is Isolation.NAMESPACES:
        raise SandboxUnavailable(f"namespaces cannot be made on this machine: {why}",
                                 hint="install bubblewrap (Debian: apt-get install bubblewrap), or --isolation none")
    return "none", why


def top_level_packages(root: Path) -> frozenset[str]:
    names = {p.parent.name for p in root.glob("*/__init__.py")}
    names |= {p.stem for p in root.glob("*.py") if p.stem not in ("setup", "conftest")}
    return frozenset(names)


def run_limits(durations: list[float], manifest: Manifest) -> tuple[float, float]:
    """Per-test and whole-run limits derived from the baseline: generous multiples of what the original
    took, capped by the manifest's limits (task verification uses them too)."""
    durations = durations or [1.0]
    per_test = min(manifest.tests.timeout_per_test, max(10.0, 10 * max(durations) + 5))
    total = min(manifest.tests.timeout, 30 + sum(min(per_test, 10 * d + 5) for d in durations))
    return per_test, total
