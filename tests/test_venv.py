"""A project's venv: made --without-pip, with ensurepip's own wheels unpacked into it (envs/venv), it holds
what `python -m venv` gives, and where ensurepip names no wheel that exists, ensurepip makes it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from coderun.envs import venv as venvs


def _run(argv: list[str], what: str) -> None:
    subprocess.run(argv, check=True, capture_output=True)


def _contents(venv: Path) -> tuple[list[str], list[str], str]:
    """Its scripts, the distributions its pip lists, and what its pip says it is (paths made relative)."""
    py = venv / "bin" / "python"
    listed = subprocess.run([str(py), "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check"],
                            capture_output=True, text=True, check=True).stdout.split()
    version = subprocess.run([str(venv / "bin" / "pip3"), "--version"], capture_output=True, text=True,
                             check=True).stdout.replace(str(venv), "VENV")
    return sorted(p.name for p in (venv / "bin").iterdir() if p.name != "Activate.ps1"), listed, version


@pytest.mark.slow
def test_a_venv_holds_what_python_m_venv_gives(tmp_path):
    subprocess.run([sys.executable, "-m", "venv", str(tmp_path / "by-venv")], check=True, capture_output=True)
    venvs.make_venv(Path(sys.executable), tmp_path / "by-coderun", _run)
    by_venv, ours = _contents(tmp_path / "by-venv"), _contents(tmp_path / "by-coderun")
    assert ours == by_venv and any(line.startswith("pip==") for line in ours[1])
    # pip removes itself completely: its RECORD names every script it has.
    done = subprocess.run([str(tmp_path / "by-coderun" / "bin" / "python"), "-m", "pip", "uninstall", "-y", "pip"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert not list((tmp_path / "by-coderun" / "bin").glob("pip*"))


def test_without_ensurepips_wheels_ensurepip_makes_it(tmp_path, monkeypatch):
    monkeypatch.setattr(venvs, "_ask", lambda python: {"wheels": [str(tmp_path / "gone.whl")]})
    steps = []
    venvs.make_venv(Path(sys.executable), tmp_path / "v", lambda argv, what: (steps.append(what), _run(argv, what)))
    assert steps == ["creating the venv", "installing pip (ensurepip)"]
    assert subprocess.run([str(tmp_path / "v" / "bin" / "python"), "-m", "pip", "--version"],
                          capture_output=True, check=False).returncode == 0


def test_find_python_looks_past_pyenvs_shims(tmp_path, monkeypatch):
    """A pyenv shim answers only for the selected versions, through bash scripts: find_python takes PATH without
    the shims, then pyenv's installations, so a shim (here one that would answer with another version) is
    never asked."""
    from coderun.envs import local

    root = tmp_path / "pyenv"
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    (root / "shims").mkdir(parents=True)
    asked = tmp_path / "asked"
    shim = root / "shims" / f"python{version}"
    shim.write_text(f"#!/bin/sh\ntouch {asked}\necho 2.7\n")
    shim.chmod(0o755)
    installed = root / "versions" / f"{version}.99" / "bin"
    installed.mkdir(parents=True)
    (installed / f"python{version}").symlink_to(sys.executable)
    monkeypatch.setenv("PYENV_ROOT", str(root))
    monkeypatch.setenv("PATH", f"{root / 'shims'}:/usr/bin:/bin")
    monkeypatch.setattr(local, "_versions", {})
    exe, exact = local.find_python(version)
    assert exact and not asked.exists()
    assert exe in (Path(p) / f"python{version}" for p in ("/usr/bin", "/bin", installed))
