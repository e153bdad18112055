"""A pytest plugin installed with the project's dependencies is part of the environment, not tampering;
and a task build refuses an environment whose own code evaluation would grade as tampering.

Real venvs and real pytest runs on hand-made projects; the plugin is a wheel made here (no network).
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from coderun.cli.main import app
from coderun.config import load_settings
from coderun.errors import TaskError
from coderun.evaluation.store import RunStore
from coderun.manifests.schema import load_manifest
from coderun.tasks import build_tasks
from tests.helpers import MEAN, write_tree

pytestmark = pytest.mark.slow

# Like pytest-benchmark: a trylast configure registers one more plugin object (its session).
PLUGIN = '''import pytest


class Session:
    """Stands for pytest-benchmark's BenchmarkSession."""


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    config.pluginmanager.register(Session(), "envplug-session")
'''

PROJECT = {
    "calc/__init__.py": "",
    "calc/stats.py": MEAN,
    "tests/test_stats.py": "from calc.stats import mean\n\n\ndef test_mean():\n    assert mean([1, 2, 3]) == 2\n"
                           "    assert mean([4]) == 4\n",  # two values: a constant body passes one
}


def wheel(out: Path, name: str, files: dict[str, str], entry_points: str) -> Path:
    """A pure-Python wheel, built by hand so that pip installs it offline."""
    info = f"{name}-1.0.dist-info"
    files = {**files, f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
             f"{info}/entry_points.txt": entry_points}
    record = [f"{p},sha256={base64.urlsafe_b64encode(hashlib.sha256(t.encode()).digest()).rstrip(b'=').decode()},"
              f"{len(t.encode())}" for p, t in files.items()]
    path = out / f"{name}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for p, text in files.items():
            z.writestr(p, text)
        z.writestr(f"{info}/RECORD", "\n".join([*record, f"{info}/RECORD,,"]) + "\n")
    return path


def _project(tmp: Path, files: dict[str, str], requirements: list[str]) -> Path:
    write_tree(tmp / "calc", files)
    manifest = tmp / "calc.yaml"
    manifest.write_text("name: calc\nsource: {path: calc}\npython: '3.11'\n"
                        f"install:\n  requirements: {requirements!r}\ntests:\n  paths: [tests]\n")
    return manifest


@pytest.mark.parametrize("executor", ["workers", "naive"])
def test_a_plugin_installed_with_the_project_is_not_tampering(tmp_path, monkeypatch, executor):
    plugin = wheel(tmp_path, "envplug", {"envplug.py": PLUGIN}, "[pytest11]\nenvplug = envplug\n")
    manifest = _project(tmp_path, PROJECT, [str(plugin)])
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    build_tasks(load_manifest(manifest), load_settings())
    res = CliRunner().invoke(app, ["eval", "--projects", str(tmp_path), "--project", "calc", "--ground-truth",
                                   "--backend", "local", "--executor", executor, "--run-dir", str(tmp_path / "run")])
    assert res.exit_code == 0, res.output
    with RunStore.open(tmp_path / "run") as store:
        verdicts = [(r.verdict.value, r.failure, r.reason) for r in store.results()]
    assert verdicts and all(v[0] == "pass" for v in verdicts), verdicts


def test_a_task_build_refuses_an_environment_graded_as_tampering(tmp_path, monkeypatch):
    # The project's own test writes a conftest.py into the tree: evaluation grades that as tampering, so
    # verification must not pass it as a task whose every sample would then fail.
    files = {**PROJECT, "tests/test_stats.py": PROJECT["tests/test_stats.py"]
             + "\n\ndef test_writes_conftest():\n    import pathlib\n    from calc.stats import mean\n"
               "    pathlib.Path(__file__).with_name('conftest.py').write_text('')\n    assert mean([2]) == 2\n"}
    manifest = _project(tmp_path, files, [])
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    with pytest.raises(TaskError, match="trips coderun's tampering check"):
        build_tasks(load_manifest(manifest), load_settings())
