"""Local git mirrors: a folder of bare repositories or OWNER+NAME.git.tar.gz archives, looked in before the
network. The manifests name a URL nothing serves (file:///nowhere/...), so a checkout that works came from
the mirror."""

import subprocess
import tarfile

import pytest
from typer.testing import CliRunner

from coderun.cli.main import app
from coderun.config import load_settings
from coderun.envs.sources import checkout, mirror_candidates
from coderun.errors import ConfigError, SourceError
from coderun.manifests.schema import parse_manifest
from tests.helpers import make_repo

URL = "file:///nowhere/Owner/Proj"


def _manifest(tmp_path, rev, url=URL):
    return parse_manifest(f"name: proj\nsource:\n  git: {{url: '{url}', rev: '{rev}'}}\npython: '3.11'\n",
                          tmp_path / "m.yaml")


@pytest.fixture
def upstream(tmp_path):
    repo = tmp_path / "upstream"
    first = make_repo(repo, {"proj/__init__.py": "X = 1\n"})
    second = make_repo(repo, {"proj/__init__.py": "X = 2\n"})
    return repo, first, second


def _bare(repo, dest):
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(dest)], check=True)
    return dest


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CODERUN_CONFIG", str(tmp_path / "no-config.toml"))
    monkeypatch.delenv("CODERUN_GIT_MIRRORS", raising=False)


def test_bare_repository_mirror_is_used_and_recorded(tmp_path, monkeypatch, home, upstream):
    repo, first, _ = upstream
    _bare(repo, tmp_path / "mirrors" / "Owner+Proj.git")
    monkeypatch.setenv("CODERUN_GIT_MIRRORS", str(tmp_path / "mirrors"))
    co = checkout(_manifest(tmp_path, first), load_settings())
    assert co.commit == first
    assert (co.path / "proj/__init__.py").read_text() == "X = 1\n"
    assert co.origin == f"mirror {tmp_path / 'mirrors' / 'Owner+Proj.git'}"


def test_archive_mirror_matched_without_case_and_unpacked_once(tmp_path, monkeypatch, home, upstream):
    repo, _, second = upstream
    bare = _bare(repo, tmp_path / "stage" / "owner+proj.git")
    (tmp_path / "mirrors").mkdir()
    archive = tmp_path / "mirrors" / "owner+proj.git.tar.gz"
    with tarfile.open(archive, "w:gz") as t:
        t.add(bare, arcname=bare.name)
    monkeypatch.setenv("CODERUN_GIT_MIRRORS", str(tmp_path / "mirrors"))
    settings = load_settings()
    co = checkout(_manifest(tmp_path, second), settings)
    assert co.commit == second and co.origin == f"mirror {archive}"
    unpacked = list((settings.git_cache / "mirrors").iterdir())
    assert len(unpacked) == 1
    checkout(_manifest(tmp_path, second), settings)
    assert list((settings.git_cache / "mirrors").iterdir()) == unpacked


def test_mirror_without_the_commit_falls_back_to_the_url(tmp_path, monkeypatch, home, upstream, capfd):
    repo, first, _ = upstream
    _bare(repo, tmp_path / "mirrors" / "Owner+Proj.git")
    later = make_repo(repo, {"proj/__init__.py": "X = 3\n"})  # only upstream has it
    monkeypatch.setenv("CODERUN_GIT_MIRRORS", str(tmp_path / "mirrors"))
    with pytest.raises(SourceError, match="nowhere"):
        checkout(_manifest(tmp_path, later), load_settings())
    assert "does not hold" in capfd.readouterr().err
    co = checkout(_manifest(tmp_path, later, url=f"file://{repo}"), load_settings())
    assert co.commit == later and co.origin == f"file://{repo}"
    assert "does not hold" not in capfd.readouterr().err  # the upstream's own name is not Owner/Proj


def test_a_commit_checked_out_once_needs_no_mirror_again(tmp_path, monkeypatch, home, upstream):
    repo, first, _ = upstream
    _bare(repo, tmp_path / "mirrors" / "Owner+Proj.git")
    monkeypatch.setenv("CODERUN_GIT_MIRRORS", str(tmp_path / "mirrors"))
    co = checkout(_manifest(tmp_path, first), load_settings())
    monkeypatch.setenv("CODERUN_GIT_MIRRORS", "")
    assert checkout(_manifest(tmp_path, first), load_settings()) == co  # origin kept with the worktree
    with pytest.raises(SourceError, match="nowhere"):
        checkout(_manifest(tmp_path, "main"), load_settings())  # a branch must be resolved: mirror or URL


def test_layouts_a_mirror_folder_may_use(tmp_path):
    for rel in ("github.com/owner/proj.git", "Owner/Proj.git"):
        (tmp_path / rel).mkdir(parents=True)
    found = mirror_candidates("https://github.com/Owner/Proj.git", tmp_path)
    assert [p.relative_to(tmp_path).as_posix() for p in found] == ["Owner/Proj.git", "github.com/owner/proj.git"]
    assert mirror_candidates("git@github.com:Owner/Proj.git", tmp_path) == found
    assert mirror_candidates("https://github.com/Other/Proj", tmp_path) == []


def test_config_file_entry_relative_to_the_file_and_env_wins(tmp_path, monkeypatch, home):
    cfg = tmp_path / "cfg" / "config.toml"
    cfg.parent.mkdir()
    cfg.write_text('[sources]\ngit_mirrors = ["../mirrors", "/abs/other"]\n')
    monkeypatch.setenv("CODERUN_CONFIG", str(cfg))
    assert load_settings().git_mirrors == ((tmp_path / "mirrors").resolve(), (tmp_path / "/abs/other"))
    monkeypatch.setenv("CODERUN_GIT_MIRRORS", str(tmp_path / "env"))
    assert load_settings().git_mirrors == ((tmp_path / "env"),)


def test_bad_config_file_is_a_clear_error(tmp_path, monkeypatch, home):
    cfg = tmp_path / "config.toml"
    cfg.write_text("[sources]\ngit_mirrors = 3\n")
    monkeypatch.setenv("CODERUN_CONFIG", str(cfg))
    with pytest.raises(ConfigError, match="git_mirrors must be a list"):
        load_settings()
    cfg.write_text("[sources\n")
    result = CliRunner().invoke(app, ["projects", "list"])
    assert result.exit_code == 2
    unwrapped = result.output.replace("\n", "")  # a long path may wrap
    assert "config.toml" in unwrapped and "TOML" in unwrapped



def test_bare_mirror_without_a_config_file_is_recognised(tmp_path, monkeypatch, home, upstream):
    """A bare mirror whose `config` was left out (git reads it fine) was passed over as not holding the rev."""
    repo, first, _ = upstream
    bare = _bare(repo, tmp_path / "mirrors" / "Owner+Proj.git")
    (bare / "config").unlink()
    monkeypatch.setenv("CODERUN_GIT_MIRRORS", str(tmp_path / "mirrors"))
    co = checkout(_manifest(tmp_path, first), load_settings())
    assert co.commit == first and co.origin == f"mirror {bare}"


def test_submodule_comes_from_a_mirror_like_any_git_source(tmp_path, monkeypatch, home):
    """ocfl-py's tests read a submodule whose URL is on GitHub: offline, the checkout failed although the
    mirror folder held it."""
    sub = tmp_path / "fixtures"
    pinned = make_repo(sub, {"data.txt": "pinned\n"})
    make_repo(sub, {"data.txt": "later\n"})  # a later commit the superproject does not record
    sup = tmp_path / "super"
    make_repo(sup, {"proj/__init__.py": "X = 1\n"})
    subprocess.run(["git", "-C", str(sup), "-c", "protocol.file.allow=always", "submodule", "add", "-q",
                    f"file://{sub}", "fixtures"], check=True)
    subprocess.run(["git", "-C", str(sup / "fixtures"), "checkout", "-q", pinned], check=True)
    subprocess.run(["git", "-C", str(sup), "config", "-f", ".gitmodules", "submodule.fixtures.url",
                    "https://nowhere.invalid/Lib/Fixtures.git"], check=True)
    top = make_repo(sup, {})  # commits .gitmodules with the unreachable URL and the pinned gitlink
    _bare(sup, tmp_path / "mirrors" / "Owner+Proj.git")
    _bare(sub, tmp_path / "mirrors" / "lib+fixtures.git")
    monkeypatch.setenv("CODERUN_GIT_MIRRORS", str(tmp_path / "mirrors"))
    co = checkout(_manifest(tmp_path, top, url="https://nowhere.invalid/Owner/Proj"), load_settings())
    assert (co.path / "fixtures" / "data.txt").read_text() == "pinned\n"
    assert checkout(_manifest(tmp_path, top, url="https://nowhere.invalid/Owner/Proj"), load_settings()) == co
