"""Project images pushed to and pulled from a real registry (issue 22: clusters with a registry).

The registry is CNCF distribution (Debian's `docker-registry`), serving on 127.0.0.1 on the host, where the
Docker engine runs (a loopback registry is plain HTTP to the engine by default). The project is the tiny one
of tests/helpers.py under a name of its own per session, so removing its image touches nothing else.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from coderun.cli.main import app
from coderun.config import load_settings
from coderun.envs import dockerlib
from coderun.envs.docker import build_project_image
from coderun.errors import SandboxError
from coderun.events import Note
from coderun.manifests.schema import load_manifest
from coderun.runner.executors.cluster import ProjectWorker
from coderun.sandbox import SandboxSpec
from tests.helpers import TINY_PROJECT, write_tree

HOST_PYTHON = f"{sys.version_info[0]}.{sys.version_info[1]}"
pytestmark = [pytest.mark.docker, pytest.mark.slow]
runner = CliRunner()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """HOST:PORT of a registry serving on loopback from a temp folder, for this module."""
    binary = shutil.which("docker-registry") or shutil.which("registry")
    if binary is None:
        pytest.skip("no registry server: apt-get install docker-registry (CI installs it)")
    root = tmp_path_factory.mktemp("registry")
    address = f"127.0.0.1:{_free_port()}"
    (root / "config.yml").write_text(f"version: 0.1\nlog: {{level: warn}}\nstorage:\n  filesystem:\n"
                                      f"    rootdirectory: {root / 'data'}\nhttp: {{addr: '{address}'}}\n")
    log = (root / "registry.log").open("w")
    proc = subprocess.Popen([binary, "serve", str(root / "config.yml")], stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://{address}/v2/", timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail(f"the registry exited: {(root / 'registry.log').read_text()}")
                time.sleep(0.1)
        yield address
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


@pytest.fixture(scope="module")
def project(tmp_path_factory, docker_engine):
    """(settings, manifest, the image built here, the manifests' folder) of the tiny project."""
    root = tmp_path_factory.mktemp("registry-project")
    write_tree(root / "calc", TINY_PROJECT)
    name = f"calc-{uuid.uuid4().hex[:8]}"
    (root / f"{name}.yaml").write_text(f"name: {name}\nsource: {{path: calc}}\npython: '{HOST_PYTHON}'\n"
                                       "tests:\n  paths: [tests]\n")
    mp = pytest.MonkeyPatch()
    mp.setenv("CODERUN_HOME", str(root / "home"))
    mp.delenv("CODERUN_REGISTRY", raising=False)
    settings = load_settings([root])
    manifest = load_manifest(root / f"{name}.yaml")
    image = build_project_image(manifest, settings, client=docker_engine)
    yield settings, manifest, image, root
    mp.undo()
    for found in docker_engine.images.list(name=dockerlib.repo_name(name)):
        for tag in found.tags:
            docker_engine.images.remove(tag, force=True)


def _forget(client, tag: str) -> None:
    """The project image gone from this engine (its lower layers stay tagged: only its own is removed)."""
    client.images.remove(tag)
    assert not dockerlib.image_exists(client, tag)


def _cli(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def pushed(project, registry):
    settings, manifest, image, root = project
    done = _cli("images", "push", manifest.name, "--registry", registry, "--projects", str(root), "--json")
    assert done.exit_code == 0, done.output
    (row,) = json.loads(done.output)
    return row


def test_push_names_the_remote_and_its_digest(pushed, project, registry):
    _, _, image, _ = project
    assert pushed["remote"] == f"{registry}/{image.tag}"
    assert pushed["digest"].startswith("sha256:")


def test_pull_restores_the_image_and_its_baseline(pushed, project, registry, docker_engine):
    """A machine without the image gets it by its tag, with the baseline recorded in it."""
    _, manifest, image, root = project
    _forget(docker_engine, image.tag)
    done = _cli("images", "pull", manifest.name, "--registry", registry, "--projects", str(root), "--json")
    assert done.exit_code == 0, done.output
    (row,) = json.loads(done.output)
    assert row["pulled"] is True and row["tag"] == image.tag
    assert row["passed"] == image.baseline.counts()["passed"] == 3
    labels = docker_engine.images.get(image.tag).labels
    assert labels["org.coderun.key"] == image.tag.rpartition(":")[2]
    assert not [t for i in docker_engine.images.list() for t in i.tags if t.startswith(registry)], \
        "the registry's name for the image was left behind"
    again = _cli("images", "pull", manifest.name, "--registry", registry, "--projects", str(root), "--json")
    assert json.loads(again.output)[0]["pulled"] is False  # already here: nothing to pull


def test_a_missing_image_is_pulled_instead_of_built(pushed, project, registry, docker_engine):
    settings, manifest, image, _ = project
    _forget(docker_engine, image.tag)
    got = build_project_image(manifest, replace(settings, registry=registry), client=docker_engine)
    assert got.pulled_from == registry and got.built == ()
    assert got.tag == image.tag and got.baseline == image.baseline


def test_a_node_without_the_image_pulls_the_drivers_tag(pushed, project, registry, docker_engine):
    """The cluster's actor on a node that lacks the image pulls it by the driver's tag: no manifest, no
    source, no build on the node."""
    _, manifest, image, _ = project
    _forget(docker_engine, image.tag)
    spec = SandboxSpec(project=manifest.name, project_dir=image.workdir, python=image.python_path, image=image.tag)
    with pytest.raises(SandboxError, match="not on this node"):
        ProjectWorker("docker", spec, None)  # without a registry it would have to build, and has no manifest
    worker = ProjectWorker("docker", spec, None, registry)
    try:
        assert dockerlib.image_exists(docker_engine, image.tag)
    finally:
        worker.close()


def test_a_registry_without_the_image_falls_back_to_building(project, registry, docker_engine):
    settings, manifest, image, root = project
    other = load_manifest(root / f"{manifest.name}.yaml").model_copy(
        update={"tests": manifest.tests.model_copy(update={"args": ["-k", "not unrelated"]})})
    done = _cli("images", "pull", manifest.name, "--registry", registry, "--projects", str(root))
    assert done.exit_code == 0  # the pushed one
    got = build_project_image(other, replace(settings, registry=registry), client=docker_engine)
    assert got.pulled_from is None and got.built == ("project",)  # a new baseline layer, not in the registry


def test_bad_registries_say_what_to_fix(pushed, project, registry, docker_engine):
    _, manifest, image, root = project
    done = _cli("images", "pull", manifest.name, "--registry", "https://example.org", "--projects", str(root))
    assert done.exit_code != 0 and "not a registry" in done.output and "HOST[:PORT][/PATH]" in done.output
    nowhere = f"127.0.0.1:{_free_port()}"  # nothing listens there
    done = _cli("images", "push", manifest.name, "--registry", nowhere, "--projects", str(root))
    assert done.exit_code != 0 and f"pushing {nowhere}/{image.tag} failed" in " ".join(done.output.split())
    _forget(docker_engine, image.tag)
    done = _cli("images", "pull", manifest.name, "--registry", nowhere, "--projects", str(root))
    assert done.exit_code != 0 and f"pulling {nowhere}/{image.tag} failed" in " ".join(done.output.split())
    assert _cli("images", "pull", manifest.name, "--registry", registry, "--projects", str(root)).exit_code == 0
    done = _cli("images", "push", manifest.name, "--projects", str(root))
    assert done.exit_code != 0 and "no registry given" in done.output


def test_a_failing_registry_is_said_and_the_image_built(project, docker_engine):
    """Pulling before a build is a cache: a registry that does not answer costs a build, not the run."""
    settings, manifest, image, _ = project
    _forget(docker_engine, image.tag)
    nowhere = f"127.0.0.1:{_free_port()}"
    events = []
    got = build_project_image(manifest, replace(settings, registry=nowhere), client=docker_engine,
                              on_event=events.append)
    assert got.pulled_from is None and got.built == ("project",) and got.tag == image.tag
    warnings = [e.text for e in events if isinstance(e, Note) and e.level == "warning"]
    assert any(f"pulling {nowhere}/{image.tag} failed" in w for w in warnings), events
