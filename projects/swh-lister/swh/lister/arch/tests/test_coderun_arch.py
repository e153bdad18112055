"""Helpers of the Arch Linux lister, tested for coderun's benchmark from their docstrings and callers.

The lister's own test (test_lister.py) needs the scheduler's PostgreSQL database; these tests need none.
get_repo_archive's caller, ArchLister.get_pages, globs `**/desc` below the directory it returns, once per
repository archive, so each archive must land in a directory of its own.
"""

import io
from pathlib import Path
import tarfile

import pytest

from swh.lister.arch.lister import ArchLister, size_to_bytes
from swh.lister.arch.tests import prepare_repository_from_archive

DATA = Path(__file__).parent / "data" / "https_archive.archlinux.org"
MIRROR = "https://archive.archlinux.org/repos/last"


@pytest.mark.parametrize("size, expected", [
    ("0", 0), ("500", 500), ("1K", 1000), ("12K", 12_000), ("2M", 2_000_000), ("3G", 3 * 1000**3),
    ("7T", 7 * 1000**4), ("1P", 1000**5), ("1E", 1000**6), ("1Z", 1000**7), ("1Y", 1000**8),
])
def test_size_to_bytes(size, expected):
    assert size_to_bytes(size) == expected
    assert isinstance(size_to_bytes(size), int)


def _lister():
    # get_repo_archive needs nothing of the lister's state; __init__ would ask the scheduler database for it.
    return ArchLister.__new__(ArchLister)


def _serve(requests_mock, repo):
    name = f"{repo}.files.tar.gz"
    content = (DATA / f"repos_last_{repo}_os_x86_64_{name}").read_bytes()
    requests_mock.get(f"{MIRROR}/{repo}/os/x86_64/{name}", content=content)
    return name, content


def test_get_repo_archive_downloads_and_extracts(requests_mock, tmp_path):
    name, content = _serve(requests_mock, "core")
    destination = tmp_path / "archives" / "x86_64" / name
    destination.parent.mkdir(parents=True)  # the docstring does not say it makes the folders
    extracted = _lister().get_repo_archive(f"{MIRROR}/core/os/x86_64/{name}", destination)
    assert Path(extracted).is_dir()
    with tarfile.open(fileobj=io.BytesIO(content)) as tar:
        members = {Path(m.name).parent.name: tar.extractfile(m).read()
                   for m in tar.getmembers() if m.name.endswith("/desc")}
    found = {p.parent.name: p.read_bytes() for p in Path(extracted).glob("**/desc")}
    assert found == members
    assert "gzip-1.12-1" in found


def test_each_archive_gets_its_own_directory(requests_mock, tmp_path):
    out = {}
    for repo in ("core", "extra", "community"):
        name, _ = _serve(requests_mock, repo)
        out[repo] = Path(_lister().get_repo_archive(f"{MIRROR}/{repo}/os/x86_64/{name}", tmp_path / name))
    assert len({p.resolve() for p in out.values()}) == 3
    core = {p.parent.name for p in out["core"].glob("**/desc")}
    extra = {p.parent.name for p in out["extra"].glob("**/desc")}
    assert core and extra and not core & extra


def _archive(tmp_path, folder, files):
    src = tmp_path / "src"
    for rel, text in files.items():
        (src / folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / folder / rel).write_text(text)
    archive = tmp_path / f"{folder}.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(src / folder, arcname=folder)
    return archive


def test_prepare_repository_from_archive(tmp_path):
    archive = _archive(tmp_path, "crates.io-index", {"config.json": "{}", "ra/nd/rand": "x"})
    work = tmp_path / "work"
    work.mkdir()
    url = prepare_repository_from_archive(str(archive), "crates.io-index", tmp_path=work)
    assert url == f"file://{work}/crates.io-index"
    assert (work / "crates.io-index" / "config.json").read_text() == "{}"
    assert (work / "crates.io-index" / "ra" / "nd" / "rand").read_text() == "x"


def test_prepare_repository_from_archive_defaults(tmp_path):
    archive = _archive(tmp_path, "repo", {"README": "hello"})
    work = tmp_path / "work"
    work.mkdir()
    # tmp_path may be a str; which name the url then ends with the docstring does not say
    url = prepare_repository_from_archive(str(archive), tmp_path=str(work))
    assert url.startswith(f"file://{work}/")
    assert (work / "repo" / "README").read_text() == "hello"
