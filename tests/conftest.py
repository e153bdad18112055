"""Shared fixtures. `docker_engine`: a client for a Docker engine that answers, or a skip saying why.

Under pytest-xdist (`-n auto`, `--dist loadgroup` from pyproject), each file's tests run on one worker, so a
module's fixture (a built project) is built once; every file with a docker test runs on the same worker, since
those share the engine's images by tag (one test removes what another would use).
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def docker_engine():
    from coderun.envs import dockerlib
    from coderun.errors import SandboxUnavailable

    try:
        client = dockerlib.docker_client(timeout=600)
    except SandboxUnavailable as e:
        pytest.skip(f"no Docker engine answers: {e.message} (CI starts one with .ci/docker-setup.sh)")
    yield client
    client.close()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    docker_files = {item.path for item in items if item.get_closest_marker("docker")}
    for item in items:
        group = "docker" if item.path in docker_files else item.nodeid.split("::", 1)[0]
        item.add_marker(pytest.mark.xdist_group(group))
