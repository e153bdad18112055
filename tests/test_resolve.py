"""Dependencies resolved as of a project's date (uv pip compile --exclude-newer), with pip's index settings."""

import json

import pytest

from coderun.config import load_settings
from coderun.envs.local import build_local_env, load_baseline
from coderun.envs.resolve import pip_config, uv_index_args
from coderun.envs.sources import pip_command
from coderun.manifests.schema import load_manifest
from tests.helpers import GIT_ENV, git, write_tree


def test_pips_index_configuration_is_passed_to_uv(tmp_path, monkeypatch):
    """uv reads its own configuration: a user behind a mirror must not have to configure coderun too."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    conf = tmp_path / "pip.conf"
    conf.write_text(f"[global]\nindex-url = https://mirror.invalid/simple\n"
                    f"extra-index-url = https://extra.invalid/simple file://{tmp_path}/missing\n"
                    f"find-links = {wheels}\ntrusted-host = mirror.invalid\ncert = /etc/ssl/certs/x.pem\n")
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_CERT", "PIP_NO_INDEX"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    monkeypatch.setenv("PIP_INDEX_URL", "https://env-wins.invalid/simple")  # a variable beats the file
    args, env = uv_index_args(pip_config(pip_command()))
    assert args == ["--index-url", "https://env-wins.invalid/simple",
                    "--extra-index-url", "https://extra.invalid/simple",  # the missing local one is left out
                    "--find-links", str(wheels), "--allow-insecure-host", "mirror.invalid"]
    assert env == {"SSL_CERT_FILE": "/etc/ssl/certs/x.pem"}


@pytest.mark.slow
@pytest.mark.network
def test_git_source_resolves_dependencies_as_of_its_commit_date(tmp_path, monkeypatch):
    """Unpinned requirements took today's releases (pytest 9 for a 2019 project) and old suites broke."""
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    repo = tmp_path / "old"
    write_tree(repo, {"old/__init__.py": "import six\n\n\ndef text(x):\n    return six.text_type(x)\n",
                      "tests/test_old.py": "import six\nfrom old import text\n\n\ndef test_text():\n"
                                           "    assert text(1) == '1'\n\n\ndef test_six_of_its_time():\n"
                                           "    assert six.__version__ == '1.12.0'\n"})
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    dated = {**GIT_ENV, "GIT_AUTHOR_DATE": "2019-06-01T12:00:00+0000", "GIT_COMMITTER_DATE": "2019-06-01T12:00:00+0000"}
    import subprocess

    subprocess.run(["git", "commit", "-q", "-m", "old"], cwd=repo, env=dated, check=True)
    f = tmp_path / "old.yaml"
    f.write_text(f"name: old\nsource:\n  git: {{url: 'file://{repo}', rev: main}}\npython: '3.7'\n"
                 "install:\n  requirements: [six, 'pytest>=4.6']\ntests:\n  paths: [tests]\n")
    env = build_local_env(load_manifest(f), load_settings())
    pins = env.resolved_path.read_text()
    assert "six==1.12.0" in pins and "pytest==4.6." in pins, pins  # six 1.13 and pytest 5 came later
    # uv installs the pins (pip took 35 s for cinder's 150, uv 7 s): only the project's line is left to pip.
    assert "six==1.12.0" in (env.logs / "uv.log").read_text() and not (env.logs / "pip.log").exists()
    # atomicwrites, which pytest 4.6 needs, has no release left from before 2022: taken without the date.
    assert "atomicwrites==1.4" in pins and "atomicwrites" in (env.logs / "resolve.log").read_text()
    assert load_baseline(env).counts()["passed"] == 2
    assert json.loads((env.path / "env.json").read_text())["resolved_as_of"] == "2019-06-01"
    # An explicit date in the manifest wins over the commit's.
    f.write_text(f.read_text().replace("tests:", "  resolve_as_of: 2020-06-01\ntests:"))
    later = build_local_env(load_manifest(f), load_settings())
    assert later.path != env.path and "six==1.15.0" in later.resolved_path.read_text()


@pytest.mark.slow
@pytest.mark.network
def test_docker_wheelhouse_takes_the_same_dated_pins(tmp_path, monkeypatch):
    """The docker backend's wheels are built on the host: they must be the dated set too, not today's."""
    from coderun.envs.base_image import BaseSpec, BaseStrategy
    from coderun.envs.docker import ImagePlan, wheelhouse
    from coderun.envs.sources import checkout
    from coderun.events import silent

    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    write_tree(tmp_path / "proj", {"proj/__init__.py": "", "tests/test_p.py": "def test_p():\n    pass\n"})
    f = tmp_path / "proj.yaml"
    f.write_text("name: proj\nsource: {path: proj}\npython: '3.7'\n"
                 "install:\n  requirements: [six]\n  resolve_as_of: 2019-06-01\n")
    m, settings = load_manifest(f), load_settings()
    co = checkout(m, settings)
    base = BaseSpec("3.7", BaseStrategy.ROOTFS, "none", "/opt/venv/bin/python", "k", (), "2.31")
    out = wheelhouse(ImagePlan(m, co, base, "deps1", "src1", "key1"), co.path, settings, silent)
    assert "six==1.12.0" in (out / "resolved.txt").read_text()
    assert [w.name for w in out.glob("six-*.whl")] == ["six-1.12.0-py2.py3-none-any.whl"]


def test_git_source_date_defaults_to_the_commit_and_false_turns_it_off(tmp_path, monkeypatch):
    """A mirror without upload times cannot be dated: `resolve_as_of: false` must take today's releases."""
    import subprocess

    from coderun.envs.local import resolve_date
    from coderun.envs.sources import checkout

    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    repo = write_tree(tmp_path / "r", {"a.py": "A = 1\n"})
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    subprocess.run(["git", "commit", "-q", "-m", "a"], cwd=repo, check=True,
                   env={**GIT_ENV, "GIT_COMMITTER_DATE": "2018-02-03T10:00:00+0000"})
    base = f"name: r\nsource:\n  git: {{url: 'file://{repo}', rev: main}}\npython: '3.11'\n"
    for install, expected in (("", "2018-02-03"), ("install: {resolve_as_of: 2019-01-01}\n", "2019-01-01"),
                              ("install: {resolve_as_of: false}\n", None)):
        (tmp_path / "r.yaml").write_text(base + install)
        m = load_manifest(tmp_path / "r.yaml")
        got = resolve_date(m, checkout(m, load_settings()))
        assert (got.isoformat() if got else None) == expected


@pytest.mark.slow
@pytest.mark.network
def test_a_project_older_than_pytest_4_6_gets_a_pytest_coderun_can_drive(tmp_path, monkeypatch):
    """As of 2015 the resolver picked pytest 2.8, which has no `-o`: every baseline run was a usage error."""
    from packaging.version import Version

    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    write_tree(tmp_path / "old", {"old/__init__.py": "", "tests/test_old.py": "import six\n\n\ndef test_six():\n"
                                                                             "    assert six.PY3\n"})
    f = tmp_path / "old.yaml"
    f.write_text("name: old\nsource: {path: old}\npython: '3.6'\n"
                 "install:\n  requirements: [six]\n  resolve_as_of: 2015-10-07\ntests:\n  paths: [tests]\n")
    env = build_local_env(load_manifest(f), load_settings())
    pins = dict(line.split("==") for line in env.resolved_path.read_text().splitlines() if "==" in line)
    assert pins["six"] == "1.10.0" and Version(pins["pytest"]) >= Version("4.6"), pins
    assert load_baseline(env).counts()["passed"] == 1


@pytest.mark.slow
@pytest.mark.network
def test_pins_uv_cannot_install_are_installed_by_pip(tmp_path, monkeypatch):
    """uv is a fast path, not a requirement: when it fails (here offline with an empty cache), pip installs
    the same pins and the log says why."""
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "empty-uv-cache"))
    repo = tmp_path / "proj"
    write_tree(repo, {"proj/__init__.py": "import six\n", "tests/test_proj.py": "import six\n\n\n"
                      "def test_six():\n    assert six.__version__ == '1.15.0'\n"})
    f = tmp_path / "proj.yaml"
    f.write_text(f"name: proj\nsource: {{path: {repo}}}\npython: '3.8'\ninstall:\n  requirements: [six, pytest]\n"
                 "  resolve_as_of: 2020-06-01\ntests:\n  paths: [tests]\n")
    manifest = load_manifest(f)
    from coderun.envs import resolve

    real = resolve.install_pinned

    def offline(*args, env, **kwargs):  # resolution is done: the install's uv has no index, an empty cache
        return real(*args, env={**env, "UV_OFFLINE": "1"}, **kwargs)

    monkeypatch.setattr("coderun.envs.local.install_pinned", offline)
    env = build_local_env(manifest, load_settings())
    assert "six==1.15.0" in env.resolved_path.read_text()
    assert "Network connectivity is disabled" in (env.logs / "uv.log").read_text()
    pip_log = (env.logs / "pip.log").read_text()
    assert pip_log.startswith("# uv could not install") and "Successfully installed" in pip_log
    assert load_baseline(env).counts()["passed"] == 1


def test_pip_config_is_asked_again_when_its_variables_change(monkeypatch):
    """pip's configuration is kept per process, but a PIP_* variable set later (a test's local index) is seen."""
    monkeypatch.setenv("PIP_INDEX_URL", "file:///first/simple")
    assert pip_config(pip_command())["index-url"] == "file:///first/simple"
    monkeypatch.setenv("PIP_INDEX_URL", "file:///second/simple")
    assert pip_config(pip_command())["index-url"] == "file:///second/simple"
