"""A shipped CoderEval project end to end from its upstream snapshot, as CI does without GitHub:
manifest -> git mirror (+ the benchmark's supplementary test) -> venv -> tasks -> ground truth and blank
bodies. Real pip, real pytest runs."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from coderun.cli.main import app
from coderun.config import load_settings
from coderun.evaluation.store import RunStore
from coderun.tasks import load_tasks
from tests.helpers import CODEREVAL_DATA

MIRRORS = CODEREVAL_DATA / "sources"
# kirankotari/shconfparser: pure Python 3.7 with pytest 5.3, one CoderEval task, a one-second test suite (it
# was boolean, whose 25 tasks took 213 s of CI's time here)
PROJECT = "shconfparser"
CODEREVAL_IDS = {"62ece4992e6aefcf4aabbd82"}
MIRROR = "kirankotari+shconfparser.git.tar.gz"
COMMIT = "e5fb8d04fa0375704e7647def227f6919e12bbb2"


@pytest.mark.slow
@pytest.mark.skipif(not (MIRRORS / MIRROR).is_file(),
                    reason=f"no upstream snapshots at {MIRRORS} (../shared/codereval/sources beside the repository)")
def test_shipped_project_from_its_mirror_to_ground_truth(tmp_path, monkeypatch):
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CODERUN_GIT_MIRRORS", str(MIRRORS))
    monkeypatch.setenv("CODERUN_CONFIG", str(tmp_path / "none.toml"))
    runner = CliRunner()
    built = runner.invoke(app, ["tasks", "build", PROJECT])
    assert built.exit_code == 0, built.output
    tasks = [t for t in load_tasks(load_settings()) if t.project == PROJECT]
    verified = {a for t in tasks for a in t.aliases}
    assert verified >= CODEREVAL_IDS, built.output

    for flag, expected in (("--ground-truth", "pass"), ("--blank", "fail")):
        run = tmp_path / flag.strip("-")
        res = runner.invoke(app, ["eval", "-p", PROJECT, flag, "--backend", "local", "--run-dir", str(run)])
        assert res.exit_code == 0, res.output
        with RunStore.open(run) as store:
            verdicts = {r.verdict.value for r in store.results()}
        assert verdicts == {expected}, res.output
        environment = (run / "environment.txt").read_text()
        assert f"from mirror {MIRRORS.resolve() / MIRROR}" in environment
        assert COMMIT in environment
