"""A run of the original writes a file of the project back unchanged: that file is the project's code, not a
sample's. neo4j-python-driver's v2 test classes subclass v1's (two `test_temporal_dehydration.py`); a pass+
run of the original that wrote the v1 file back had the test-code check flag every inherited v2 test as
running "the sample's" code ("... not test code"), and the task build stopped: "every sample would fail as
tampering"."""

from __future__ import annotations

from pathlib import Path

import pytest
from sandbox_fixtures import quiet

from coderun.records import FindingKind
from coderun.runner.evidence import SampleRun
from coderun.runner.execute import run_sample
from coderun.sandbox import SandboxSpec, create_sandbox

V1 = "class TestDehydration:\n    def test_duration(self):\n        assert 1 + 1 == 2\n"
V2 = "from tests.v1.test_dehydration import TestDehydration as Base\n\n\nclass TestDehydration(Base):\n    pass\n"
FILES = {"pkg/__init__.py": "", "tests/__init__.py": "", "tests/v1/__init__.py": "", "tests/v2/__init__.py": "",
         "tests/v1/test_dehydration.py": V1, "tests/v2/test_dehydration.py": V2}
NODEIDS = ["tests/v1/test_dehydration.py::TestDehydration::test_duration",
           "tests/v2/test_dehydration.py::TestDehydration::test_duration"]


@pytest.fixture(scope="module")
def inheriting_project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("inheriting") / "project"
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.mark.parametrize("sample", [False, True])
def test_a_test_file_written_back_is_project_code(inheriting_project, tiny_venv, sample):
    spec = SandboxSpec(project="inheriting", project_dir=str(inheriting_project), python=str(tiny_venv))
    with quiet(), create_sandbox("local", spec) as sb:
        ev = run_sample(sb, SampleRun(relfile="tests/v1/test_dehydration.py", new_source=V1, nodeids=NODEIDS,
                                      timeout=60, per_test_timeout=10, env={}, sample=sample))
    flagged = [f.detail for f in ev.tampering if f.kind is FindingKind.TESTS_CHANGED]
    if sample:  # a sample's text in a file other tests import from: their tests run the sample's code
        assert flagged and "not test code" in flagged[0]
    else:
        assert not flagged and ev.machinery() == [], flagged
        assert sorted(t.nodeid for t in ev.outcomes if t.outcome == "passed") == NODEIDS


@pytest.mark.parametrize("executor", ["naive", "workers"])
def test_coderuns_own_bodies_skip_the_test_code_snapshot(inheriting_project, tiny_venv, executor):
    """A task build's stubs, trivial bodies and pass+ runs are coderun's own code (`trusted`): the same text a
    sample's run is flagged for is not checked, and the snapshot costs nothing; a sample's run is checked."""
    from coderun.runner.executors import NaivePool, WorkerPool

    spec = SandboxSpec(project="inheriting", project_dir=str(inheriting_project), python=str(tiny_venv))
    pool = (NaivePool if executor == "naive" else WorkerPool)("local", {"inheriting": spec}, 1)
    found = {}
    with quiet(), pool:
        for trusted in (True, False):
            run = SampleRun(relfile="tests/v1/test_dehydration.py", new_source=V1, nodeids=NODEIDS, timeout=60,
                            per_test_timeout=10, env={}, template=False, trusted=trusted)
            ev = pool.run("inheriting", run)
            found[trusted] = [f.detail for f in ev.tampering if f.kind is FindingKind.TESTS_CHANGED]
            if trusted:
                assert sorted(t.nodeid for t in ev.outcomes if t.outcome == "passed") == NODEIDS
    assert found[True] == [] and found[False] and "not test code" in found[False][0], found
