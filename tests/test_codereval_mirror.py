"""A shipped CoderEval project end to end from its upstream snapshot, as CI does without GitHub:
manifest -> git mirror -> venv -> tasks -> ground truth and blank bodies. Real pip, real pytest runs."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from coderun.cli.main import app
from coderun.config import load_settings
from coderun.evaluation.store import RunStore
from coderun.tasks import load_tasks
from tests.helpers import CODEREVAL_DATA

MIRRORS = CODEREVAL_DATA / "sources"
PROJECT = "boolean"  # bastikr/boolean: pure Python, two CoderEval tasks, a 5-second test suite
CODEREVAL_IDS = {"62b46740d2f69a53b466171a", "62b46746d2f69a53b4661722"}


@pytest.mark.slow
@pytest.mark.skipif(not (MIRRORS / "bastikr+boolean.git.tar.gz").is_file(),
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
        assert f"from mirror {MIRRORS.resolve() / 'bastikr+boolean.git.tar.gz'}" in environment
        assert "431e5226c269e4c863cc851b971ca5e89fda04d7" in environment
