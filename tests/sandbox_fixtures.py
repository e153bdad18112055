"""Fixtures of the sandbox tests (test_sandbox.py, test_execute.py, test_workers.py and others): a tiny
project, a venv with pytest for the local backend, and an image with the same project and pytest for the docker
backend (built offline from a coderun base image: one on the engine, else the host Python's, built first).

The session fixtures (tiny_project, tiny_venv, test_image) are registered once, by conftest.py: a test module
that imported them would get a definition of its own, and so a venv and an image of its own. The venv and the
image are built once per session, whichever pytest-xdist worker asks first (tests/shared_home.py)."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
import tarfile
import warnings
from pathlib import Path

import pytest

from coderun.config import load_settings
from coderun.envs.base_image import build_base_image
from coderun.sandbox import Limits, SandboxSpec, create_sandbox
from tests.shared_home import built_once

PROJECT_FILES = {
    "pkg/__init__.py": "",
    "pkg/mod.py": "def add(a, b):\n    return a + b\n",
    "tests/__init__.py": "",
    "tests/test_mod.py": ("from pkg.mod import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n\n\n"
                          "def test_add_neg():\n    assert add(-1, 1) == 0\n"),
    "setup.cfg": "[tool:pytest]\naddopts = --an-option-coderun-must-clear\n",
}
NODEIDS = ["tests/test_mod.py::test_add", "tests/test_mod.py::test_add_neg"]
LIMITS = Limits(memory_mb=1024, pids=128, cpus=1.0, scratch_mb=512, output_limit=64 * 1024)


def write_project(root: Path) -> Path:
    for rel, text in PROJECT_FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.fixture(scope="session")
def tiny_project(tmp_path_factory) -> Path:
    return write_project(tmp_path_factory.mktemp("tiny") / "project")


@pytest.fixture(scope="session")
def tiny_venv(tmp_path_factory) -> Path:
    """A venv with pytest only (from PyPI, once per session)."""
    def build(folder: Path) -> None:
        subprocess.run([sys.executable, "-m", "venv", str(folder / "venv")], check=True)
        subprocess.run([str(folder / "venv" / "bin" / "python"), "-m", "pip", "install", "-q", "pytest"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    return built_once(tmp_path_factory, "tiny-venv", build) / "venv" / "bin" / "python"


@pytest.fixture(scope="session")
def test_image(tmp_path_factory, tiny_project, docker_engine) -> str:
    """coderun-test/sandbox: a coderun base image + pytest wheels + the tiny project at /work/project."""
    client = docker_engine
    if not _bases(client):  # a new engine (CI's): the host Python's base image, as `images build` makes it
        built_once(tmp_path_factory, "base-image", lambda _: build_base_image(
            f"{sys.version_info[0]}.{sys.version_info[1]}", load_settings(), client=client))
    bases = _bases(client)
    tag = "coderun-test/sandbox:latest"
    built_once(tmp_path_factory, "sandbox-image", lambda folder: _build_test_image(client, bases[0], tiny_project,
                                                                                   folder / "wheels", tag))
    return tag


def _bases(client) -> list:
    return [i for i in client.images.list(filters={"label": "org.coderun.layer=base"})
            if any(t.startswith("coderun/base:") for t in i.tags)]


def _build_test_image(client, base, tiny_project: Path, wheels: Path, tag: str) -> None:
    python = base.labels.get("org.coderun.python", "3")
    wheels.mkdir()
    # pytest's dependencies for older Pythons are named too: pip leaves out those whose markers the running
    # interpreter does not meet, even for another --python-version
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "--python-version",
                    python, "-d", str(wheels), "pytest", "exceptiongroup", "tomli"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    dockerfile = (f"FROM {base.id}\nCOPY wheels/ /tmp/wheels/\n"
                  "RUN /opt/venv/bin/python -m pip install -q --no-index --find-links /tmp/wheels pytest"
                  " && rm -rf /tmp/wheels\n"
                  "COPY --chown=coderun:coderun project/ /work/project/\nUSER coderun\n")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        data = dockerfile.encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        tar.add(str(wheels), arcname="wheels")
        tar.add(str(tiny_project), arcname="project")
    buf.seek(0)
    client.images.build(fileobj=buf, custom_context=True, tag=tag, network_mode="none", rm=True,
                        labels={"org.coderun.test": "1", "org.coderun.layer": "test"})


def spec_for(backend: str, request, **overrides) -> SandboxSpec:
    if backend == "local":
        project = request.getfixturevalue("tiny_project")
        python = request.getfixturevalue("tiny_venv")
        return SandboxSpec(project="tiny", project_dir=str(project), python=str(python),
                           limits=overrides.pop("limits", LIMITS), **overrides)
    image = request.getfixturevalue("test_image")
    return SandboxSpec(project="tiny", project_dir="/work/project", python="/opt/venv/bin/python",
                       image=image, limits=overrides.pop("limits", LIMITS), **overrides)


BACKENDS = ["local", pytest.param("docker", marks=pytest.mark.docker)]


@pytest.fixture(params=BACKENDS, scope="module")
def sandbox(request):
    """One started sandbox per backend and test module (reused across tests, as a run reuses it)."""
    sb = create_sandbox(request.param, spec_for(request.param, request))
    with quiet():
        sb.start()
    yield sb
    sb.close()


@contextlib.contextmanager
def quiet():
    """A local sandbox warns when it starts without isolation (a machine without namespaces, or turned off):
    tests that are not about that warning do not mind it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield
