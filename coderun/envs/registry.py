"""Project images in a Docker registry: pushed and pulled by their content tag.

A project image's tag is a hash of everything that built it (envs/docker.py: plan_image), so the same
manifest gives the same tag on every machine: a node that needs `coderun/cachetools:KEY` pulls
`REGISTRY/coderun/cachetools:KEY` instead of building it, and gets the baseline with it (it is in the
image). A pulled image is checked against its tag (the `org.coderun.key` label the build wrote) before use.

The registry is `HOST[:PORT][/PATH]`, as the engine names it; the engine's own configuration decides TLS
and credentials (`docker login`, `insecure-registries`; loopback registries are plain HTTP by default).
"""

from __future__ import annotations

import contextlib
import re

import docker
import docker.errors

from coderun.envs.dockerlib import LABEL_PREFIX
from coderun.errors import SandboxError, UsageError
from coderun.events import Listener, StepOutput, silent, step

_REGISTRY = re.compile(r"[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9._-]+)*", re.IGNORECASE)


def check_registry(registry: str) -> str:
    """`registry` without a trailing slash; a UsageError when it is not HOST[:PORT][/PATH]."""
    value = registry.strip().rstrip("/")
    if "://" in value or not _REGISTRY.fullmatch(value):
        raise UsageError(f"not a registry: {registry!r}",
                         hint="give HOST[:PORT][/PATH] as docker names it, e.g. registry.example.org:5000/team "
                              "(no scheme: the engine's configuration decides TLS)")
    return value


def remote_ref(registry: str, tag: str) -> str:
    """`coderun/NAME:KEY` as it is named in `registry`."""
    return f"{check_registry(registry)}/{tag}"


def _split(ref: str) -> tuple[str, str]:
    repo, _, tag = ref.rpartition(":")
    return repo, tag


def _failed(what: str, detail: str) -> SandboxError:
    return SandboxError(f"{what} failed: {detail}",
                        hint="check that the registry answers from the Docker engine's host (`docker pull` there), "
                             "`docker login` or `insecure-registries` in the engine's daemon.json, and its free space")


def push_image(client: docker.DockerClient, tag: str, registry: str, *, on_event: Listener = silent) -> str:
    """Push the local image `tag` to `registry`; the digest the registry gave it."""
    remote = remote_ref(registry, tag)
    repo, key = _split(remote)
    try:
        client.images.get(tag).tag(repo, key)
        digest, error = "", None
        with step(on_event, "", f"push {remote}"):
            for ev in client.images.push(repo, tag=key, stream=True, decode=True):
                if "error" in ev:
                    error = ev["error"]
                    break
                digest = (ev.get("aux") or {}).get("Digest", digest)
                if ev.get("status"):
                    on_event(StepOutput("", f"push {remote}", f"{ev.get('id', '')} {ev['status']}"))
    except docker.errors.ImageNotFound:
        raise SandboxError(f"no image {tag} in the engine to push") from None
    except docker.errors.APIError as e:
        raise _failed(f"pushing {remote}", e.explanation) from None
    finally:
        _untag(client, remote)
    if error:
        raise _failed(f"pushing {remote}", error)
    return digest


def pull_image(client: docker.DockerClient, tag: str, registry: str, *, on_event: Listener = silent) -> bool:
    """Pull `tag` from `registry` and name it `tag` here; False when the registry does not have it."""
    remote = remote_ref(registry, tag)
    repo, key = _split(remote)
    try:
        with step(on_event, "", f"pull {remote}"):
            image = client.images.pull(repo, tag=key)
    except docker.errors.NotFound:
        return False
    except docker.errors.APIError as e:
        raise _failed(f"pulling {remote}", e.explanation) from None
    try:
        label = (image.labels or {}).get(f"{LABEL_PREFIX}.key")
        if label is None or _split(tag)[1].rpartition("-")[2] != label:  # `KEY`, `deps-KEY`, `src-KEY`
            raise SandboxError(f"{remote} is not the image its tag names (its {LABEL_PREFIX}.key label is "
                               f"{label!r})", hint="push it again from a machine that built it: coderun images push")
        image.tag(*_split(tag))
    finally:
        _untag(client, remote)
    return True


def _untag(client: docker.DockerClient, ref: str) -> None:
    """Drop the registry's name for an image (the layers stay under the local tag)."""
    with contextlib.suppress(docker.errors.APIError):  # never tagged (a failed push) or already gone
        client.images.remove(ref, noprune=True)
