"""`coderun projects add`: drafts from real git repositories in temp dirs and real PyPI sdists."""

from __future__ import annotations

import textwrap
from pathlib import Path

import git
import pytest
import yaml
from typer.testing import CliRunner

from coderun.cli.main import app
from coderun.config import Settings, load_settings
from coderun.draft import PY_MINORS
from coderun.draft.make import draft_manifest, make_draft
from coderun.envs.local import build_local_env, find_python, load_baseline
from coderun.errors import UsageError
from coderun.manifests.schema import load_manifest, parse_manifest

_IDENTITY = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@localhost", "GIT_COMMITTER_NAME": "t",
             "GIT_COMMITTER_EMAIL": "t@localhost"}


def make_repo(root: Path, files: dict[str, str], *, commit: bool = True) -> Path:
    """A real git repository holding `files` in one commit."""
    root.mkdir(parents=True)
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    if commit:
        repo = git.Repo.init(root)
        with repo.git.custom_environment(**_IDENTITY):
            repo.git.add("--all")
            repo.git.commit("-q", "-m", "init")
    return root


def draft(source: str | Path, home: Path) -> dict:
    """The draft as data, without the date of today's commits (tests of the date look at it themselves)."""
    text = draft_manifest(str(source), Settings(home=home))
    parse_manifest(text, Path("draft.yaml"))  # every draft validates
    data = yaml.safe_load(text)
    if data.get("install", {}).pop("resolve_as_of", None) and not data["install"]:
        del data["install"]
    return data


def best_installed(minors: list[int]) -> str:
    installed = next((m for m in sorted(minors, reverse=True) if find_python(f"3.{m}")[1]), max(minors))
    return f"3.{installed}"


PKG = {"pkg/__init__.py": "def add(a, b):\n    return a + b\n", "pkg/util.py": "X = 1\n"}
TEST_ADD = "from pkg import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"


def test_pyproject_requires_python_test_extra_and_cov_addopts(tmp_path):
    repo = make_repo(tmp_path / "proj", {**PKG, "pyproject.toml": """
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "demo-pkg"
        version = "1.0"
        description = "A demo"
        requires-python = ">=3.9,<3.12"
        dependencies = ["attrs>=20"]

        [project.optional-dependencies]
        test = ["pytest", "hypothesis"]

        [tool.pytest.ini_options]
        testpaths = ["tests"]
        addopts = "--cov=pkg --cov-report term -ra"
        """, "tests/test_add.py": "import freezegun\n" + TEST_ADD})
    d = draft(repo, tmp_path / "home")
    assert d["name"] == "demo-pkg" and d["description"] == "A demo"
    assert d["source"]["git"] == {"url": str(repo), "rev": git.Repo(repo).head.commit.hexsha}
    assert d["python"] == best_installed([9, 10, 11])
    assert d["install"]["project"] is True and d["install"]["extras"] == ["test"]
    assert d["install"]["requirements"] == ["freezegun"]  # imported by the tests, declared nowhere
    assert d["tests"]["paths"] == ["tests"]
    assert d["tests"]["args"] == ["-o", "addopts=-ra"]
    assert "pkg/*.py" in d["tasks"]["discover"]["include"]


def test_setup_cfg_install_requires_testpaths_and_classifiers(tmp_path):
    repo = make_repo(tmp_path / "proj", {**PKG, "setup.py": "from setuptools import setup\nsetup()\n",
                                         "setup.cfg": """
        [metadata]
        name = cfgdemo
        classifiers =
            Programming Language :: Python :: 3
            Programming Language :: Python :: 3.7
            Programming Language :: Python :: 3.8

        [options]
        packages = find:
        python_requires = >=3.6
        install_requires =
            requests>=2
        tests_require =
            responses

        [tool:pytest]
        testpaths = testing
        """, "testing/test_add.py": TEST_ADD})
    d = draft(repo, tmp_path / "home")
    assert d["name"] == "cfgdemo"
    assert d["python"] == best_installed([7, 8])
    assert d["install"] == {"project": True, "requirements": ["responses"]}
    assert d["tests"] == {"runner": "pytest", "paths": ["testing"]}


def test_setup_py_is_read_with_ast_never_run(tmp_path):
    """setup.py is parsed, never executed: drafting an untrusted repository runs none of its code."""
    repo = make_repo(tmp_path / "proj", {**PKG, "setup.py": """
        from pathlib import Path
        from setuptools import setup, find_packages

        Path(__file__).with_name("SETUP_RAN").write_text("ran")
        REQUIRES = ["six>=1.5"]
        TESTS = ["mock"]
        setup(name="astdemo", description="parsed", packages=find_packages(),
              install_requires=REQUIRES, tests_require=TESTS + ["pytest-timeout"],
              python_requires=">=3.10", extras_require={"test": ["hypothesis"]})
        """, "tests/test_add.py": TEST_ADD})
    tree_home = tmp_path / "home"
    d = draft(repo, tree_home)
    assert not list(tree_home.rglob("SETUP_RAN")) and not (repo / "SETUP_RAN").exists()
    assert d["name"] == "astdemo" and d["description"] == "parsed"
    assert d["python"] == best_installed([m for m in PY_MINORS if m >= 10])
    assert d["install"]["project"] is True and d["install"]["extras"] == ["test"]
    assert d["install"]["requirements"] == ["mock", "pytest-timeout"]


def test_src_layout_sets_import_root(tmp_path):
    repo = make_repo(tmp_path / "proj", {
        "src/srcpkg/__init__.py": "def f():\n    return 1\n",
        "pyproject.toml": '[project]\nname = "srcpkg"\nversion = "0.1"\n'
                          '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n',
        "tests/test_f.py": "from srcpkg import f\n\ndef test_f():\n    assert f() == 1\n"})
    d = draft(repo, tmp_path / "home")
    assert d["import_root"] == "src"
    assert d["tasks"]["discover"]["include"] == ["src/srcpkg/*.py", "src/srcpkg/**/*.py"]
    assert "requirements" not in d.get("install", {})  # srcpkg is the project itself, not a dependency


def test_unittest_suites_with_other_names_widen_python_files(tmp_path):
    case = "import unittest\nfrom pkg import add\n\nclass T(unittest.TestCase):\n" \
           "    def test_add(self):\n        self.assertEqual(add(1, 1), 2)\n"
    repo = make_repo(tmp_path / "proj", {**PKG, "pkg/tests/__init__.py": "", "pkg/tests/t_one.py": case,
                                         "pkg/tests/t_two.py": case, "pkg/tests/helpers.py": "H = 1\n"})
    d = draft(repo, tmp_path / "home")
    assert d["tests"]["runner"] == "unittest"
    assert d["tests"]["paths"] == ["pkg/tests"]
    assert d["tests"]["args"] == ["-o", "python_files=test_*.py *_test.py t_*.py"]
    assert d["tasks"]["discover"]["exclude"] == ["pkg/tests", "pkg/tests/**"]
    assert "install" not in d  # no build, no requirements: nothing to install besides the test tooling


def test_ci_matrix_and_tox_envlist_choose_python(tmp_path):
    repo = make_repo(tmp_path / "proj", {
        **PKG, "tests/test_add.py": TEST_ADD,
        "tox.ini": "[tox]\nenvlist = py3{7,8}, lint\n\n[testenv]\ndeps = pytest-mock\ncommands = pytest tests\n",
        ".github/workflows/ci.yml": """
            on: push
            jobs:
              test:
                strategy:
                  matrix:
                    python-version: ["3.7", "3.8", 3.9]
            """})
    d = draft(repo, tmp_path / "home")
    assert d["python"] == best_installed([7, 8, 9])
    assert d["install"]["requirements"] == ["pytest-mock"]
    assert d["tests"]["paths"] == ["tests"]


def test_test_requirements_file_without_linters(tmp_path):
    repo = make_repo(tmp_path / "proj", {
        **PKG, "tests/test_add.py": TEST_ADD, "requirements.txt": "attrs\n",
        "requirements-test.txt": "-r requirements.txt\npytest>=7\nflake8==3.0.0\nblack\nresponses\n"})
    d = draft(repo, tmp_path / "home")
    assert d["install"]["requirements_files"] == ["requirements.txt"]
    assert d["install"]["requirements"] == ["pytest>=7", "responses"]


def test_plain_directory_is_a_path_source_and_file_url_a_git_source(tmp_path):
    plain = make_repo(tmp_path / "plain", {**PKG, "test_top.py": TEST_ADD}, commit=False)
    d = draft(plain, tmp_path / "home")
    assert d["source"] == {"path": str(plain)}
    assert d["tests"]["paths"] == ["test_top.py"]
    repo = make_repo(tmp_path / "viaurl", {**PKG, "tests/test_add.py": TEST_ADD})
    d = draft(f"file://{repo}", tmp_path / "home")
    assert d["source"]["git"]["url"] == f"file://{repo}"
    assert d["source"]["git"]["rev"] == git.Repo(repo).head.commit.hexsha


def test_uncommitted_changes_are_reported(tmp_path):
    repo = make_repo(tmp_path / "proj", {**PKG, "tests/test_add.py": TEST_ADD})
    (repo / "pkg" / "util.py").write_text("X = 2\n")
    result = make_draft(str(repo), Settings(home=tmp_path / "home"))
    assert any("uncommitted" in w for w in result.warnings)
    assert "WARNING" in result.text


@pytest.mark.parametrize("source", ["no-such-dir-or-package", "::nonsense::"])
def test_unrecognised_source_is_a_usage_error(tmp_path, source, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError):
        draft_manifest(source, Settings(home=tmp_path / "home"))


def test_cli_add_prints_writes_and_refuses_to_overwrite(tmp_path, monkeypatch):
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    repo = make_repo(tmp_path / "proj", {**PKG, "tests/test_add.py": TEST_ADD})
    runner = CliRunner()
    printed = runner.invoke(app, ["projects", "add", str(repo)])
    assert printed.exit_code == 0, printed.output
    assert yaml.safe_load(printed.stdout)["name"] == "proj"
    out = tmp_path / "m" / "proj.yaml"
    wrote = runner.invoke(app, ["projects", "add", str(repo), "-o", str(out), "--name", "mine"])
    assert wrote.exit_code == 0, wrote.output
    assert load_manifest(out).name == "mine"
    again = runner.invoke(app, ["projects", "add", str(repo), "-o", str(out)])
    assert again.exit_code == 2 and "already exists" in " ".join(again.output.split())
    assert runner.invoke(app, ["projects", "add", str(repo), "-o", str(out), "--force"]).exit_code == 0
    assert runner.invoke(app, ["projects", "validate", str(out)]).exit_code == 0
    bad = runner.invoke(app, ["projects", "add", str(tmp_path / "missing")])
    assert bad.exit_code == 2 and "no such directory" in " ".join(bad.output.split())


@pytest.mark.network
def test_shortuuid_sdist_draft():
    """A poetry sdist whose unittest suite lives in shortuuid/tests.py."""
    d = yaml.safe_load(draft_manifest("shortuuid==1.0.9", load_settings()))
    assert d["source"] == {"pypi": "shortuuid==1.0.9"}
    assert d["tests"]["runner"] == "unittest" and d["tests"]["paths"] == ["shortuuid/tests.py"]
    assert d["tasks"]["discover"]["exclude"] == ["shortuuid/tests.py"]


@pytest.mark.slow
@pytest.mark.network
@pytest.mark.parametrize("requirement", ["sqlparams==3.0.0", "cachetools==4.2.1", "six==1.16.0"])
def test_drafted_manifest_builds_with_a_passing_baseline(tmp_path, requirement):
    """The draft is usable as written: the environment builds and the large majority of tests pass."""
    out = tmp_path / f"{requirement.partition('==')[0]}.yaml"
    out.write_text(draft_manifest(requirement, load_settings()))
    manifest = load_manifest(out)
    env = build_local_env(manifest, load_settings())
    counts = load_baseline(env).counts()
    ran = counts["passed"] + counts["failed"] + counts["error"]
    assert ran >= 15 and counts["passed"] >= 0.9 * ran, counts


def test_git_draft_resolves_as_of_the_commit_date_with_a_python_of_its_time(tmp_path):
    """A draft left requirements unpinned, so the env took today's releases for an old project; and it
    chose a Python newer than the project, with which its era's build tools fail (distutils is gone)."""
    root = tmp_path / "dated"
    make_repo(root, {**PKG, "tests/test_add.py": TEST_ADD, "setup.py": textwrap.dedent("""\
        from setuptools import setup
        setup(name="dated", packages=["pkg"], python_requires=">=3.6",
              classifiers=["Programming Language :: Python :: 3"])
        """)}, commit=False)
    repo = git.Repo.init(root)
    with repo.git.custom_environment(**_IDENTITY, GIT_COMMITTER_DATE="2021-03-01T10:00:00-0500",
                                     GIT_AUTHOR_DATE="2021-03-01T10:00:00-0500"):
        repo.git.commit("-q", "--allow-empty", "-m", "start")  # a history: the commit's date is the code's
    with repo.git.custom_environment(**_IDENTITY, GIT_COMMITTER_DATE="2021-03-04T23:30:00-0500",
                                     GIT_AUTHOR_DATE="2021-03-04T23:30:00-0500"):
        repo.git.add("--all")
        repo.git.commit("-q", "-m", "init")
    text = draft_manifest(str(root), Settings(home=tmp_path / "home"))
    assert load_manifest_text(text).install.resolve_as_of.isoformat() == "2021-03-05"  # in UTC
    assert "# resolve_as_of: the commit's date" in text
    assert yaml.safe_load(text)["python"] == best_installed([6, 7, 8, 9])  # 3.10 came out in October 2021
    assert "3.10 and later came out after the source's date (2021-03-05)" in text


def load_manifest_text(text: str):
    return parse_manifest(text, Path("draft.yaml"))


@pytest.mark.network
def test_sdist_draft_resolves_as_of_the_day_the_sdist_was_made():
    """cachetools 4.2.1 was released on 2021-01-24; its requirements must not take later releases."""
    text = draft_manifest("cachetools==4.2.1", load_settings())
    assert load_manifest_text(text).install.resolve_as_of.isoformat() == "2021-01-24"


def test_source_without_tests_is_an_error_proposing_the_repository_at_its_tag(tmp_path, monkeypatch):
    """A draft of an sdist without tests was written anyway, and no task could ever be verified."""
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    unpacked = make_repo(tmp_path / "notests-1.2", {**PKG, "PKG-INFO": textwrap.dedent("""\
        Metadata-Version: 2.1
        Name: notests
        Version: 1.2
        Home-page: https://example.org/docs
        Project-URL: Source, https://git.example.org/me/notests
        """), "benchmark.py": "def test_speed():\n    pass\n"}, commit=False)
    res = CliRunner().invoke(app, ["projects", "add", str(unpacked)])
    out = " ".join(res.output.split())
    assert res.exit_code == 2, res.output
    assert "has no tests" in out and "coderun projects add https://git.example.org/me/notests --rev v1.2" in out
    repo = make_repo(tmp_path / "gitnotests", PKG)
    res = CliRunner().invoke(app, ["projects", "add", str(repo)])
    assert res.exit_code == 2 and "has no tests" in " ".join(res.output.split())


def test_rev_option_tries_the_release_tag_with_and_without_v(tmp_path):
    """`projects add URL --rev 1.0` reads the release whose tag is v1.0."""
    repo = make_repo(tmp_path / "tagged", {**PKG, "tests/test_add.py": TEST_ADD})
    tagged = git.Repo(repo)
    tagged.create_tag("v1.0")
    with tagged.git.custom_environment(**_IDENTITY):
        (repo / "pkg" / "util.py").write_text("X = 2\n")
        tagged.git.commit("-qam", "after the release")
    d = yaml.safe_load(draft_manifest(str(repo), Settings(home=tmp_path / "home"), rev="1.0"))
    assert d["source"]["git"]["rev"] == tagged.tags["v1.0"].commit.hexsha
    with pytest.raises(UsageError):
        draft_manifest("six==1.16.0", Settings(home=tmp_path / "home"), rev="1.0")


def test_tests_directory_wins_over_a_root_script_a_ci_command_names(tmp_path):
    """A draft once named a root benchmark.py from tox's command as the suite, and its module as the project's."""
    repo = make_repo(tmp_path / "proj", {
        "tabby.py": "def add(a, b):\n    return a + b\n", "benchmark.py": "import tabby\n\n\ndef test_speed():\n    pass\n",
        "setup.py": "from setuptools import setup\nsetup(name='tabby', py_modules=['tabby'])\n",
        "tox.ini": "[tox]\nenvlist = py39\n[testenv]\ncommands = pytest benchmark.py\n",
        "test/test_tabby.py": "from tabby import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"})
    d = draft(repo, tmp_path / "home")
    assert d["tests"]["paths"] == ["test"]
    assert d["tasks"]["discover"]["include"] == ["tabby.py"]


def test_suites_needing_servers_and_linter_plugins_are_left_out(tmp_path):
    """Integration and performance suites and linters run as pytest plugins failed every baseline."""
    repo = make_repo(tmp_path / "proj", {
        **PKG, "setup.cfg": "[tool:pytest]\naddopts = --flake8 -ra\n",
        "requirements-test.txt": "pytest\npytest-flake8\nmock\n",
        "tox.ini": "[tox]\nenvlist = py39,unit\n[testenv]\ncommands = pytest tests\n"
                   "[testenv:unit]\ncommands = pytest tests/unit\n",
        "tests/unit/test_add.py": TEST_ADD,
        "tests/unit/perf/test_speed.py": "def test_speed():\n    pass\n",
        "tests/integration/test_db.py": "import psycopg2\n\n\ndef test_db():\n    pass\n"})
    d = draft(repo, tmp_path / "home")
    assert d["tests"]["paths"] == ["tests/unit"]  # tox's unit environment
    assert d["tests"]["args"] == ["-o", "addopts=-ra", "--ignore=tests/unit/perf"]
    assert d["install"]["requirements"] == ["pytest", "mock"]
    repo = make_repo(tmp_path / "proj2", {**PKG, "tests/test_add.py": TEST_ADD,
                                          "tests/integration/test_db.py": "import psycopg2\n"})
    text = draft_manifest(str(repo), Settings(home=tmp_path / "home"))
    assert yaml.safe_load(text)["tests"]["args"] == ["--ignore=tests/integration"]
    assert "need servers" in text and "psycopg2" not in text.split("tests:")[0]


@pytest.mark.network
def test_undeclared_test_imports_are_required_when_the_index_has_them_else_left_out(tmp_path):
    """A unit test importing a package no requirement names failed at collection in every run."""
    repo = make_repo(tmp_path / "proj", {
        **PKG, "tests/test_add.py": TEST_ADD,
        "tests/test_frame.py": "import pandas\n\n\ndef test_frame():\n    assert pandas\n",
        "tests/test_gone.py": "import coderun_no_such_distribution_q7\n\n\ndef test_gone():\n    pass\n"})
    text = draft_manifest(str(repo), Settings(home=tmp_path / "home"))
    d = yaml.safe_load(text)
    assert d["install"]["requirements"] == ["pandas"]
    assert d["tests"]["args"] == ["--ignore=tests/test_gone.py"]
    assert "coderun_no_such_distribution_q7, which nothing declares and the package index does not have" in \
        " ".join(line.lstrip("# ") for line in text.splitlines())


def test_a_project_older_than_every_python_here_gets_the_oldest_coderun_runs(tmp_path):
    """A 2015 project was drafted for 3.13 (its classifiers say only "Python :: 3"), where nothing of 2015
    builds; and its setup.cfg [pytest] section is an error for the pytest coderun needs."""
    root = tmp_path / "old"
    make_repo(root, {**PKG, "tests/test_add.py": TEST_ADD, "setup.cfg": "[pytest]\naddopts = -ra\n",
                     "setup.py": "from setuptools import setup\nsetup(name='old', packages=['pkg'], "
                                 "classifiers=['Programming Language :: Python :: 3'])\n"}, commit=False)
    repo = git.Repo.init(root)
    with repo.git.custom_environment(**_IDENTITY, GIT_COMMITTER_DATE="2015-10-07T12:00:00+0000"):
        repo.git.add("--all")
        repo.git.commit("-q", "-m", "init")
    text = draft_manifest(str(root), Settings(home=tmp_path / "home"))
    m = load_manifest_text(text)
    oldest = next(f"3.{v}" for v in PY_MINORS if find_python(f"3.{v}")[1])
    assert m.python == oldest and "every allowed version came out after the source's date (2015-10-07)" in text
    assert len(m.install.pre_install) == 1 and "[tool:pytest]" in m.install.pre_install[0]
    assert m.install.resolve_as_of.isoformat() == "2015-10-07"
