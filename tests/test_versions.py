"""Versions recorded for a run: coderun's dependency closure, an environment's package list, differences."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from importlib import metadata

import pytest

from coderun.envs.versions import (
    PACKAGES_SCRIPT,
    coderun_environment,
    differences,
    environment_text,
    project_environment,
)
from coderun.errors import EnvironmentBuildError
from coderun.records import Package, RunEnvironment


def test_coderun_environment_lists_its_dependency_closure_with_installed_versions():
    env = coderun_environment()
    versions = {p.name.lower(): p.version for p in env.packages}
    assert env.coderun == metadata.version("coderun") and env.python == platform.python_version()
    assert versions["pydantic"] == metadata.version("pydantic")
    assert versions["pydantic_core"] == metadata.version("pydantic_core")   # a dependency of a dependency
    assert "pytest" not in versions and "ruff" not in versions               # the `test` extra is not coderun's
    if sys.version_info >= (3, 11):
        assert "tomli" not in versions                                         # its marker is false here
    assert not env.missing


def test_coderun_environment_is_kept_for_the_next_process_until_a_folder_on_sys_path_changes(tmp_path):
    """The closure is read once and kept in coderun's home; the next process uses it while the folders on
    sys.path that hold distributions are as they were, and reads it again once one changes (a distribution
    installed or removed there). A folder without any (the working directory) changes nothing."""
    site, work = tmp_path / "site", tmp_path / "work"
    (site / "a.dist-info").mkdir(parents=True)
    work.mkdir()
    env = {**os.environ, "CODERUN_HOME": str(tmp_path / "home"),
           "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    script = "from coderun.envs.versions import coderun_environment as c; print(c().coderun)"
    kept, real = tmp_path / "home" / "coderun-environment.json", metadata.version("coderun")

    def version() -> str:
        return subprocess.run([sys.executable, "-c", script], env=env, cwd=work, capture_output=True, text=True,
                              check=True).stdout.strip()

    def mark() -> None:  # what the next process reads, if it reads the kept closure
        data = json.loads(kept.read_text())
        data["environment"]["coderun"] = "kept"
        kept.write_text(json.dumps(data))

    assert version() == real
    mark()
    assert version() == "kept"
    (work / "scratch.txt").write_text("")
    assert version() == "kept"
    (site / "b.dist-info").mkdir()
    assert version() == real
    mark()
    (site / "b.dist-info").rmdir()
    assert version() == real


def test_packages_script_lists_what_an_interpreter_has_installed():
    out = subprocess.run([sys.executable, "-I", "-c", PACKAGES_SCRIPT], capture_output=True, text=True,
                         check=True).stdout
    env = project_environment(out, project="demo", backend="local", where="here")
    assert env.version_of("Pydantic") == metadata.version("pydantic")
    assert env.version_of("pytest") == metadata.version("pytest")
    assert env.python == platform.python_version()


def test_an_interpreter_that_lists_nothing_is_a_clear_build_error():
    """A broken environment must say so (and how to rebuild), not record an empty package list."""
    with pytest.raises(EnvironmentBuildError, match="cannot list what is installed") as e:
        project_environment("Traceback (most recent call last):\nImportError: boom\n", project="demo",
                            backend="local", where="/envs/demo")
    assert "coderun env build demo --force" in str(e.value.hint) and "ImportError" in (e.value.log_tail or "")


def test_differences_name_changed_added_and_removed_packages():
    old = [Package(name="pytest", version="8.0.0"), Package(name="six", version="1.16.0")]
    new = [Package(name="PyTest", version="8.1.0"), Package(name="attrs", version="23.1.0")]
    assert differences(old, new) == ["+attrs 23.1.0", "PyTest 8.0.0 -> 8.1.0", "-six 1.16.0"]
    assert differences(old, old) == []


def test_environment_text_is_pip_requirements_with_comments():
    env = RunEnvironment(coderun=coderun_environment())
    text = environment_text(env)
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert f"pydantic=={metadata.version('pydantic')}" in lines
    assert all("==" in line for line in lines)
