"""A project's suite run on the host (baseline, coverage map, recording) gets a temporary folder of its own:
pytest there prunes the user's older `pytest-of-USER/pytest-N` folders, and with the user's own /tmp those of
pytest sessions running beside the build went too (a CI run lost its tmp_paths to rdflib's task build)."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pytest

from coderun.envs.testrun import run_logged, venv_env

pytestmark = pytest.mark.integration  # a subprocess of a project's kind: pytest on a test file


def test_a_host_run_has_its_own_temporary_folder_removed_afterwards(tmp_path):
    (tmp_path / "test_where.py").write_text(
        "import tempfile\n\n\ndef test_where(tmp_path):\n"
        "    print('TMP', tempfile.gettempdir())\n    print('TMP_PATH', tmp_path)\n")
    log = tmp_path / "run.log"
    proc = run_logged([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "test_where.py"],
                      tmp_path, venv_env(Path(sys.executable)), 120, log)
    assert proc.returncode == 0, proc.stdout
    seen = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if line.startswith("TMP"))
    own = Path(seen["TMP"])
    assert own != Path(tempfile.gettempdir()) and own.name.startswith("coderun-tmp-"), seen
    assert Path(seen["TMP_PATH"]).is_relative_to(own), seen   # pytest's numbered folders are in the run's own
    assert not own.exists()                                     # and go with it
    assert "TMP_PATH" in log.read_text()
