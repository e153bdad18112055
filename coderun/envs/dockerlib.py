"""What the Docker builders share: the engine connection, recipe files, content hashes, labels, and one
streaming `build_image` that runs a Dockerfile with networking disabled and keeps its log.

docker-py errors are converted here, where they enter coderun: no engine -> SandboxUnavailable, a failed
build -> EnvironmentBuildError with the log's tail and path.
"""

from __future__ import annotations

import hashlib
import io
import re
import shlex
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors

from coderun.config import IMAGES_DIR, Settings
from coderun.envs.logs import tail
from coderun.errors import EnvironmentBuildError, SandboxError, SandboxUnavailable
from coderun.events import Listener, StepDone, StepOutput, StepStarted, silent, step

# Bump when the way images are built changes in a way the recipe files do not show.
IMAGE_RECIPE_VERSION = "1"
LABEL_PREFIX = "org.coderun"
LAYERS = ("rootfs", "base", "deps", "source", "project")



def docker_client(timeout: int = 600) -> docker.DockerClient:
    """A client for the local engine, or SandboxUnavailable saying how to get one."""
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except docker.errors.DockerException as e:
        raise SandboxUnavailable(
            f"no Docker engine answers ({e.__class__.__name__}: {str(e).splitlines()[0][:200]})",
            hint="start one (on these machines: `.ci/docker-setup.sh`), or use `--backend local`") from None
    return client


def engine_answers() -> bool:
    try:
        docker_client(timeout=5).close()
    except SandboxUnavailable:
        return False
    return True


def recipe_path(name: str) -> Path:
    path = IMAGES_DIR / name
    if not path.is_file():
        raise EnvironmentBuildError(f"image recipe {name} is missing from {IMAGES_DIR}",
                                    hint="reinstall coderun; the images/ directory ships with it")
    return path


def recipe_text(name: str) -> str:
    return recipe_path(name).read_text()


def content_hash(*parts: str, length: int = 12) -> str:
    h = hashlib.sha256()
    for p in (IMAGE_RECIPE_VERSION, *parts):
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()[:length]


def repo_name(project: str) -> str:
    """Docker repository names are lowercase [a-z0-9._-]; project names may be mixed case."""
    return "coderun/" + re.sub(r"[^a-z0-9._-]+", "-", project.lower()).strip("._-")


def labels(layer: str, key: str, **extra: str) -> dict[str, str]:
    out = {f"{LABEL_PREFIX}.layer": layer, f"{LABEL_PREFIX}.key": key,
           f"{LABEL_PREFIX}.recipe-version": IMAGE_RECIPE_VERSION}
    out.update({f"{LABEL_PREFIX}.{k.replace('_', '-')}": v for k, v in extra.items()})
    return out


def image_exists(client: docker.DockerClient, tag: str) -> bool:
    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    except docker.errors.APIError as e:
        raise SandboxUnavailable(f"the Docker engine failed to look up {tag}: {e.explanation}") from None
    return True


@dataclass
class Context:
    """A build context assembled as a tar file: the Dockerfile plus named files and directories."""

    dockerfile: str
    files: dict[str, str | bytes]
    dirs: dict[str, Path]
    exclude: tuple[str, ...] = (".git",)

    def write(self, fh) -> None:
        with tarfile.open(fileobj=fh, mode="w") as tar:
            _add_bytes(tar, "Dockerfile", self.dockerfile.encode())
            for name, data in self.files.items():
                _add_bytes(tar, name, data.encode() if isinstance(data, str) else data)
            for arcname, path in self.dirs.items():
                tar.add(path, arcname=arcname, filter=self._filter)

    def _filter(self, info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        if any(part in self.exclude for part in Path(info.name).parts[1:]):
            return None
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        return info


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    info.mtime = 0
    tar.addfile(info, io.BytesIO(data))


def build_image(client: docker.DockerClient, context: Context, *, tag: str, buildargs: dict[str, str],
                labels: dict[str, str], log_path: Path, title: str,
                on_event: Listener = silent) -> None:
    """Build `context` as `tag` with networking disabled, streaming progress and keeping the log."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    on_event(StepStarted("", title))
    with tempfile.TemporaryFile() as ctx, log_path.open("w") as log:
        context.write(ctx)
        ctx.seek(0)
        log.write(f"# build {tag}\n# buildargs {buildargs}\n")
        try:
            stream = client.api.build(fileobj=ctx, custom_context=True, tag=tag, buildargs=buildargs,
                                      labels=labels, network_mode="none", rm=True, forcerm=True,
                                      pull=False, decode=True)
            error = _follow(stream, log, lambda line: on_event(StepOutput("", title, line)))
        except docker.errors.APIError as e:
            error = f"the engine refused the build: {e.explanation}"
            log.write(error + "\n")
    seconds = time.monotonic() - started
    on_event(StepDone("", title, seconds, ok=not error))
    if error:
        raise EnvironmentBuildError(f"{title} failed: {error.strip().splitlines()[-1][:300]}",
                                    log_path=str(log_path), log_tail=tail(log_path))


def _follow(stream: Iterable[dict], log, show) -> str | None:
    """Copy the engine's build messages to the log; return the error message if the build failed."""
    for chunk in stream:
        if "stream" in chunk:
            text = chunk["stream"]
            log.write(text)
            line = text.strip()
            if line:
                show(line)
        elif "error" in chunk:
            log.write(chunk["error"] + "\n")
            return chunk["error"]
        elif "status" in chunk:
            log.write(f"{chunk['status']} {chunk.get('progress', '')}\n")
    return None


def images_dir(settings: Settings) -> Path:
    return settings.home / "images"


def run_logged(cmd: list[str], log: Path, *, title: str, on_event: Listener = silent, cwd: Path | None = None,
               env: dict[str, str] | None = None, hint: str | None = None) -> None:
    """Run a host command as a step, its output appended to `log` and each line said (StepOutput);
    a failure raises EnvironmentBuildError with the log's last lines and its path."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as fh, step(on_event, "", title):
        fh.write("$ " + shlex.join(cmd) + "\n")
        fh.flush()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, text=True)
        assert proc.stdout is not None
        for line in proc.stdout:
            fh.write(line)
            if line.strip():
                on_event(StepOutput("", title, line))
        code = proc.wait()
        if code != 0:
            raise EnvironmentBuildError(f"{title} failed (exit {code})", log_path=str(log), log_tail=tail(log),
                                        hint=hint)


def read_image_files(client: docker.DockerClient, tag: str, directory: str) -> dict[str, bytes]:
    """The regular files of `directory` in image `tag`, copied out of a created (never started) container."""
    try:
        container = client.containers.create(tag, command=["true"], network_mode="none")
    except docker.errors.APIError as e:
        raise SandboxError(f"cannot create a container from {tag}: {e.explanation}") from None
    try:
        chunks, _ = container.get_archive(directory)
        data = io.BytesIO(b"".join(chunks))
    except docker.errors.NotFound:
        return {}
    finally:
        container.remove(force=True)
    out = {}
    with tarfile.open(fileobj=data) as tar:
        for member in tar.getmembers():
            fh = tar.extractfile(member) if member.isfile() else None
            if fh is not None:
                out[Path(member.name).name] = fh.read()
    return out


def run_in_image(client: docker.DockerClient, tag: str, user: str, command: list[str], timeout: float = 120) -> str:
    """Run `command` in a throwaway container of `tag` without network, as the image's user; its output."""
    try:
        container = client.containers.create(tag, command=command, network_mode="none", user=user)
    except docker.errors.APIError as e:
        raise SandboxError(f"cannot create a container from {tag}: {e.explanation}") from None
    try:
        container.start()
        status = container.wait(timeout=timeout)
        output = container.logs(stdout=True, stderr=True).decode(errors="replace")
    except (docker.errors.APIError, OSError) as e:  # requests' timeouts are OSErrors
        raise SandboxError(f"a container of {tag} failed to run {command[0]}: {e}") from None
    finally:
        container.remove(force=True)
    if status.get("StatusCode") != 0:
        raise EnvironmentBuildError(f"{shlex.join(command[:2])} in {tag} exited {status.get('StatusCode')}",
                                    log_tail="\n".join(output.splitlines()[-15:]))
    return output
