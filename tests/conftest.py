"""Shared fixtures. `docker_engine`: a client for a Docker engine that answers, or a skip saying why.

The unit tier (`python -m pytest -m unit -n auto`): every test not marked slow, docker, network or integration
and not using a fixture that starts a venv, a sandbox or an image gets the `unit` mark here. A test that starts
any of those, a project's tests or coderun in a subprocess, or needs a built $CODERUN_HOME, is marked
`integration` (or slow) in its file.

Under pytest-xdist (`-n auto`, `--dist loadfile` from pyproject), each file's tests run on one worker, so a
module's fixture (a built project) is built once and a file's Docker tests, which add and remove images in the
engine by tag, never overlap one another. The files with slow tests are collected first (see below).
"""

from __future__ import annotations

import os

import pytest
from sandbox_fixtures import test_image, tiny_project, tiny_venv  # noqa: F401  (one definition for every module)

# pytest-xdist's workers get COLUMNS from the controller; rich would fix the CLI consoles' width to it when
# coderun.cli is imported, and the tests that pass COLUMNS to one command would no longer get it.
os.environ.pop("COLUMNS", None)
os.environ.pop("LINES", None)


NOT_UNIT = frozenset({"slow", "docker", "network", "integration"})
NOT_UNIT_FIXTURES = frozenset({"tiny_venv", "test_image", "sandbox", "docker_engine"})


def pytest_collection_modifyitems(items):
    for item in items:
        if NOT_UNIT.isdisjoint(m.name for m in item.iter_markers()) and NOT_UNIT_FIXTURES.isdisjoint(
                item.fixturenames):
            item.add_marker(pytest.mark.unit)
    # The files with slow or docker tests first (those with the most tests beyond the unit tier foremost),
    # then the other integration ones, the unit tier last: xdist hands out whole files in this order, so a
    # long file no longer starts near the end while the other worker runs out of work. A stable sort: each
    # file's tests stay together and in their order.
    rank: dict[str, list[int]] = {}  # file -> [lightest tier of its tests, minus its non-unit tests]
    for item in items:
        marks = {m.name for m in item.iter_markers()}
        here = rank.setdefault(item.location[0], [2, 0])
        here[0] = min(here[0], 0 if marks & {"slow", "docker"} else 2 if "unit" in marks else 1)
        here[1] -= "unit" not in marks
    items.sort(key=lambda item: rank[item.location[0]])


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

