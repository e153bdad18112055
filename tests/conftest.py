"""Shared fixtures. `docker_engine`: a client for a Docker engine that answers, or a skip saying why."""

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
