from pathlib import Path

import pytest

from coderun.config import load_settings
from coderun.envs.resolve import locate_sdist
from coderun.envs.sources import checkout, pip_command
from coderun.errors import SourceError
from coderun.manifests.schema import parse_manifest
from tests.helpers import git, make_repo


@pytest.fixture
def settings(tmp_path, monkeypatch):
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    return load_settings()


def manifest(text, origin):
    return parse_manifest(text, origin)


def test_git_source_resolves_tag_to_commit_and_reuses_cache(tmp_path, settings):
    repo = tmp_path / "upstream"
    first = make_repo(repo, {"pkg/__init__.py": "X = 1\n"})
    git(repo, "tag", "v1")
    make_repo(repo, {"pkg/__init__.py": "X = 2\n"})
    m = manifest(f"name: pkg\nsource:\n  git: {{url: 'file://{repo}', rev: v1}}\npython: '3.11'\n",
                 tmp_path / "m.yaml")
    co = checkout(m, settings)
    assert co.commit == first
    assert (co.path / "pkg/__init__.py").read_text() == "X = 1\n"
    assert checkout(m, settings) == co


def test_git_source_fetches_new_commits_and_relative_paths(tmp_path, settings):
    repo = tmp_path / "upstream"
    make_repo(repo, {"a.py": "1\n"})
    m = manifest("name: pkg\nsource:\n  git: {url: upstream, rev: main}\npython: '3.11'\n", tmp_path / "m.yaml")
    checkout(m, settings)
    second = make_repo(repo, {"a.py": "2\n"})
    m2 = manifest(f"name: pkg\nsource:\n  git: {{url: upstream, rev: {second}}}\npython: '3.11'\n",
                  tmp_path / "m.yaml")
    assert checkout(m2, settings).commit == second


def test_dirty_worktree_is_restored(tmp_path, settings):
    repo = tmp_path / "upstream"
    make_repo(repo, {"a.py": "1\n"})
    m = manifest(f"name: pkg\nsource:\n  git: {{url: '{repo}', rev: main}}\npython: '3.11'\n", tmp_path / "m.yaml")
    co = checkout(m, settings)
    (co.path / "a.py").write_text("tampered\n")
    assert (checkout(m, settings).path / "a.py").read_text() == "1\n"


def test_unknown_rev_is_a_source_error(tmp_path, settings):
    repo = tmp_path / "upstream"
    make_repo(repo, {"a.py": "1\n"})
    m = manifest(f"name: pkg\nsource:\n  git: {{url: '{repo}', rev: nope}}\npython: '3.11'\n", tmp_path / "m.yaml")
    with pytest.raises(SourceError, match="nope"):
        checkout(m, settings)


def test_path_source_snapshot_is_deterministic(tmp_path, settings):
    src = tmp_path / "proj"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg/__init__.py").write_text("Y = 1\n")
    m = manifest("name: proj\nsource: {path: proj}\npython: '3.11'\n", tmp_path / "m.yaml")
    a = checkout(m, settings)
    b = checkout(m, settings)
    assert a.commit == b.commit and (a.path / "pkg/__init__.py").exists()
    (src / "pkg/__init__.py").write_text("Y = 2\n")
    assert checkout(m, settings).commit != a.commit


@pytest.mark.network
def test_pypi_sdist_is_verified_unpacked_and_committed(tmp_path, monkeypatch):
    # Cached under the real $CODERUN_HOME so reruns do not download again.
    s = load_settings()
    m = manifest('name: shortuuid\nsource: {pypi: "shortuuid==1.0.9"}\npython: "3.11"\n', tmp_path / "m.yaml")
    co = checkout(m, s)
    assert co.kind == "pypi" and len(co.commit) == 40
    assert (co.path / "shortuuid" / "main.py").is_file()
    assert checkout(m, s).commit == co.commit


@pytest.mark.network
def test_pypi_unknown_version_is_clear(tmp_path):
    m = manifest('name: x\nsource: {pypi: "shortuuid==0.0.999"}\npython: "3.11"\n', tmp_path / "m.yaml")
    with pytest.raises(SourceError, match="no sdist of shortuuid==0.0.999"):
        checkout(m, load_settings())


# An in-tree PEP 517 backend with no build requirements: pip can prepare the sdist's metadata offline.
_BACKEND = '''\
import os, zipfile

META = "Metadata-Version: 2.1\\nName: tinypkg\\nVersion: 1.0\\n"


def prepare_metadata_for_build_wheel(directory, config_settings=None):
    info = os.path.join(directory, "tinypkg-1.0.dist-info")
    os.makedirs(info)
    with open(os.path.join(info, "METADATA"), "w") as f:
        f.write(META)
    return "tinypkg-1.0.dist-info"


def build_wheel(directory, config_settings=None, metadata_directory=None):
    name = "tinypkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(directory, name), "w") as z:
        z.writestr("tinypkg-1.0.dist-info/METADATA", META)
    return name
'''


def _local_index(root):
    """A PEP 503 index on disk holding one sdist of tinypkg 1.0, made here."""
    import hashlib
    import tarfile

    src = root / "build" / "tinypkg-1.0"
    (src / "tinypkg").mkdir(parents=True)
    (src / "tinypkg" / "__init__.py").write_text("VALUE = 1\n")
    (src / "backend.py").write_text(_BACKEND)
    (src / "pyproject.toml").write_text('[build-system]\nrequires = []\nbuild-backend = "backend"\n'
                                        'backend-path = ["."]\n')
    (src / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n")
    page = root / "simple" / "tinypkg"
    page.mkdir(parents=True)
    sdist = page / "tinypkg-1.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as t:
        t.add(src, arcname="tinypkg-1.0")
    sha = hashlib.sha256(sdist.read_bytes()).hexdigest()
    (page / "index.html").write_text(f'<a href="tinypkg-1.0.tar.gz#sha256={sha}">tinypkg-1.0.tar.gz</a>\n')
    return (root / "simple").as_uri()


@pytest.fixture
def pip_index(tmp_path, monkeypatch):
    """pip configured only through its own variables, with a local index: no coderun setting at all."""
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    for var in ("PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PIP_INDEX_URL", _local_index(tmp_path / "index"))


@pytest.mark.integration
def test_pypi_sdist_comes_through_pips_own_configuration(tmp_path, settings, pip_index):
    m = manifest('name: tinypkg\nsource: {pypi: "tinypkg==1.0"}\npython: "3.11"\n', tmp_path / "m.yaml")
    co = checkout(m, settings)
    assert co.kind == "pypi" and (co.path / "tinypkg" / "__init__.py").read_text() == "VALUE = 1\n"
    assert [p.name for p in settings.sdist_cache.iterdir()] == ["tinypkg-1.0.tar.gz"]
    assert checkout(m, settings).commit == co.commit


@pytest.mark.integration
def test_uv_locates_the_sdist_on_pips_indexes(tmp_path, pip_index):
    """The fast path: uv finds the file and its sha256 where pip's configuration points (no metadata build)."""
    import hashlib
    from urllib.parse import urlparse

    (tmp_path / "lock").mkdir()
    url, sha256 = locate_sdist("tinypkg==1.0", pip=pip_command(), folder=tmp_path / "lock")
    assert url.startswith("file://") and url.endswith("/tinypkg/tinypkg-1.0.tar.gz")
    assert hashlib.sha256(Path(urlparse(url).path).read_bytes()).hexdigest() == sha256
    assert locate_sdist("tinypkg==2.0", pip=pip_command(), folder=tmp_path / "lock") is None


@pytest.mark.integration
def test_without_uv_pip_downloads_the_sdist(tmp_path, settings, pip_index, monkeypatch):
    """uv only makes it faster: an install without it (a `uv tool` one may lack it) still gets the sdist."""
    from coderun.envs import resolve
    from coderun.errors import EnvironmentBuildError

    def missing() -> str:
        raise EnvironmentBuildError("uv is not installed")

    monkeypatch.setattr(resolve, "uv_binary", missing)
    m = manifest('name: tinypkg\nsource: {pypi: "tinypkg==1.0"}\npython: "3.11"\n', tmp_path / "m.yaml")
    assert (checkout(m, settings).path / "tinypkg" / "__init__.py").read_text() == "VALUE = 1\n"


@pytest.mark.integration
def test_an_sdist_that_does_not_match_its_index_hash_is_refused(tmp_path, settings, pip_index):
    sdist = tmp_path / "index" / "simple" / "tinypkg" / "tinypkg-1.0.tar.gz"
    sdist.write_bytes(sdist.read_bytes() + b"\0")  # the index page keeps the old sha256
    m = manifest('name: tinypkg\nsource: {pypi: "tinypkg==1.0"}\npython: "3.11"\n', tmp_path / "m.yaml")
    with pytest.raises(SourceError, match="no sdist of tinypkg==1.0"):
        checkout(m, settings)
    assert not list(settings.sdist_cache.glob("*.tar.gz"))


@pytest.mark.integration
def test_pypi_sdist_missing_from_the_configured_index_is_clear(tmp_path, settings, pip_index):
    m = manifest('name: tinypkg\nsource: {pypi: "tinypkg==2.0"}\npython: "3.11"\n', tmp_path / "m.yaml")
    with pytest.raises(SourceError, match="no sdist of tinypkg==2.0 from pip's package index") as e:
        checkout(m, settings)
    assert "pip config list" in e.value.hint


def test_git_checkout_has_submodules_at_their_commits_and_keeps_symlinks(tmp_path, settings):
    """A checkout left submodules empty, so a project whose code or tests live in one could not run."""
    sub = tmp_path / "vendored"
    pinned = make_repo(sub, {"vendored/__init__.py": "V = 1\n"})
    make_repo(sub, {"vendored/__init__.py": "V = 2\n"})  # a later commit the superproject does not record
    sup = tmp_path / "super"
    make_repo(sup, {"pkg/__init__.py": "X = 1\n"})
    git(sup, "-c", "protocol.file.allow=always", "submodule", "add", "-q", f"file://{sub}", "third_party/vendored")
    git(sup / "third_party" / "vendored", "checkout", "-q", pinned)
    (sup / "pkg" / "link.py").symlink_to("__init__.py")
    git(sup, "add", "-A")
    git(sup, "commit", "-q", "-m", "submodule and symlink")
    m = manifest(f"name: pkg\nsource:\n  git: {{url: 'file://{sup}', rev: main}}\npython: '3.11'\n",
                 tmp_path / "m.yaml")
    co = checkout(m, settings)
    assert (co.path / "third_party/vendored/vendored/__init__.py").read_text() == "V = 1\n"
    link = co.path / "pkg" / "link.py"
    assert link.is_symlink() and str(link.readlink()) == "__init__.py"
    assert checkout(m, settings) == co  # reused, not seen as a modified tree
