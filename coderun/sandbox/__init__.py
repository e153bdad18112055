"""Sandboxes that run a sample's tests: `local` (the project venv) and `docker` (the project image).

    from coderun.sandbox import SandboxSpec, create_sandbox
    with create_sandbox("local", spec) as sb:
        work = sb.new_workdir()
        result = sb.exec([sb.python, "-c", "print(1)"], cwd=work, timeout=10)
        sb.remove_workdir(work)

Backends are chosen by name through a registry that fails loudly (UsageError) on an unknown name.
"""

from __future__ import annotations

from coderun.sandbox.base import (
    ExecResult,
    Limits,
    Sandbox,
    SandboxSpec,
    backend_names,
    create_sandbox,
    register,
    sandbox_class,
)


def _local() -> type[Sandbox]:
    from coderun.sandbox.local import LocalSandbox

    return LocalSandbox


def _docker() -> type[Sandbox]:
    from coderun.sandbox.docker import DockerSandbox

    return DockerSandbox


register("local", _local)
register("docker", _docker)

__all__ = ["ExecResult", "Limits", "Sandbox", "SandboxSpec", "backend_names", "create_sandbox", "register",
           "sandbox_class"]
