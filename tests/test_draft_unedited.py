"""Drafts that build unedited (issue 32): each test names a failure a user met with a draft on main and had
to fix by hand. Real git repositories in temp dirs; the package index where the test is marked `network`."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import git
import pytest
import yaml
from rich.console import Console
from typer.testing import CliRunner

from coderun.cli.main import app
from coderun.cli.render import Renderer
from coderun.config import Settings
from coderun.draft.make import DraftOptions, draft_manifest
from coderun.envs.diagnose import baseline_failure
from coderun.envs.sources import download_sdist
from coderun.errors import SourceError
from coderun.events import Counted
from coderun.manifests.schema import parse_manifest
from tests.test_draft import _IDENTITY, PKG, TEST_ADD, best_installed, draft, make_repo


def _text(source: Path, home: Path, **options) -> str:
    return draft_manifest(str(source), Settings(home=home), options=DraftOptions(**options))


def test_prerelease_python_in_a_ci_matrix_is_not_chosen(tmp_path):
    """A CI matrix entry "3.12.0-alpha.1" made the draft choose 3.12 for a project that never ran on it."""
    repo = make_repo(tmp_path / "proj", {**PKG, "tests/test_add.py": TEST_ADD,
                                         "setup.py": "from setuptools import setup\nsetup(name='p')\n",
                                         ".github/workflows/ci.yml": """
        jobs:
          test:
            strategy:
              matrix:
                python-version: ["3.8", "3.9", "3.12.0-alpha.1", "3.13-dev"]
        """})
    assert draft(repo, tmp_path / "home")["python"] == best_installed([8, 9])


def test_as_of_and_python_options_override_the_evidence(tmp_path):
    """`projects add` had no way to give the date or the Python when the evidence was wrong."""
    repo = make_repo(tmp_path / "proj", {**PKG, "tests/test_add.py": TEST_ADD})
    text = _text(repo, tmp_path / "home", as_of=dt.date(2020, 5, 1), python="3.8")
    data = yaml.safe_load(text)
    assert data["python"] == "3.8" and data["install"]["resolve_as_of"] == dt.date(2020, 5, 1)
    assert "3.8: given with --python" in text and "given with --as-of" in text
    res = CliRunner().invoke(app, ["projects", "add", str(repo), "--as-of", "May 2020"])
    assert res.exit_code == 2 and "YYYY-MM-DD" in res.output
    res = CliRunner().invoke(app, ["projects", "add", str(repo), "--python", "3"])
    assert res.exit_code == 2 and "3.X" in res.output


@pytest.mark.network
def test_lone_recent_commit_is_dated_by_the_release_its_tag_names(tmp_path):
    """A checkout whose only commit is recent (a vendored copy) was dated today: Python 3.13, today's releases."""
    repo = make_repo(tmp_path / "parse", {"parse.py": "def parse(fmt, s):\n    return None\n",
                                          "test_parse.py": "from parse import parse\n\n\ndef test_p():\n"
                                                           "    assert parse('{}', 'x') is None\n",
                                          "setup.py": "from setuptools import setup\nsetup(name='parse', "
                                                      "py_modules=['parse'])\n"})
    git.Repo(repo).create_tag("1.19.0")
    text = _text(repo, tmp_path / "home")
    data = yaml.safe_load(text)
    assert data["install"]["resolve_as_of"] == dt.date(2021, 1, 14)  # parse 1.19.0's upload to PyPI
    assert "tag 1.19.0 on the commit was uploaded to the package index on 2021-01-14" in " ".join(text.split())
    assert data["python"] == best_installed([7, 8, 9])  # 3.10 came out in October 2021


@pytest.mark.network
def test_flit_sdist_with_1970_timestamps_is_dated_by_its_upload(tmp_path):
    """more-itertools' flit sdist has 1970 file dates: no resolve_as_of, so pytest 9 and Python 3.12 of today."""
    text = draft_manifest("more-itertools==10.1.0", Settings(home=tmp_path / "home"))
    data = yaml.safe_load(text)
    assert data["install"]["resolve_as_of"] == dt.date(2023, 8, 3)
    assert data["python"] == best_installed([8, 9, 10, 11])  # 3.12: October 2023


def test_testpaths_naming_the_package_keep_it_discovered(tmp_path):
    """`testpaths = sortedcontainers` (its doctests) made the draft exclude the package: 0 candidates."""
    repo = make_repo(tmp_path / "proj", {**PKG, "pkg/test_inner.py": TEST_ADD, "tox.ini": """
        [pytest]
        testpaths = pkg tests
        addopts = --doctest-modules
        """, "tests/test_add.py": TEST_ADD})
    d = draft(repo, tmp_path / "home")
    assert d["tests"]["paths"] == ["pkg", "tests"]
    assert d["tasks"]["discover"] == {"include": ["pkg/*.py", "pkg/**/*.py"]}


def test_a_single_root_test_py_is_the_suite(tmp_path):
    """A suite in one root `test.py` was not found: no tests.paths, and the baseline ran nothing."""
    repo = make_repo(tmp_path / "proj", {"mod.py": "def f():\n    return 1\n",
                                         "test.py": "import unittest\nfrom mod import f\n\n\n"
                                                    "class T(unittest.TestCase):\n    def test_f(self):\n"
                                                    "        self.assertEqual(f(), 1)\n"})
    d = draft(repo, tmp_path / "home")
    assert d["tests"]["paths"] == ["test.py"]
    assert d["tests"]["runner"] == "unittest"


def test_unittest_helpers_imported_by_bare_name_put_their_folder_on_the_path(tmp_path):
    """`from testlib import …` in a tests package worked under `python -m unittest` only: pytest did not find it."""
    repo = make_repo(tmp_path / "proj", {**PKG, "tests/__init__.py": "", "tests/testlib.py": "ONE = 1\n",
                                         "tests/test_add.py": "import unittest\nfrom testlib import ONE\n"
                                                              "from pkg import add\n\n\n"
                                                              "class T(unittest.TestCase):\n"
                                                              "    def test_add(self):\n"
                                                              "        self.assertEqual(add(ONE, 1), 2)\n"})
    d = draft(repo, tmp_path / "home")  # dated today: pytest 7's pythonpath
    assert d["tests"]["args"] == ["-o", "pythonpath=tests"]
    assert "testlib" not in str(d.get("install", {}))  # a local helper, not a distribution to install
    old = yaml.safe_load(_text(repo, tmp_path / "home", as_of=dt.date(2020, 1, 1)))
    assert old["tests"]["args"] == ["-o", "python_paths=tests"]
    assert "pytest-pythonpath" in old["install"]["requirements"]


@pytest.mark.network
def test_an_import_inside_a_test_function_does_not_leave_the_file_out(tmp_path):
    """A whole test file was --ignored for an import pytest only runs inside one test function."""
    repo = make_repo(tmp_path / "proj", {**PKG, "tests/test_add.py": TEST_ADD + textwrap.dedent("""

        def test_optional():
            import no_such_distribution_anywhere_xq
            assert no_such_distribution_anywhere_xq
        """), "tests/test_top.py": "import no_such_distribution_anywhere_xq\n" + TEST_ADD})
    d = draft(repo, tmp_path / "home")
    assert d["tests"].get("args") == ["--ignore=tests/test_top.py"]


def test_extras_tox_installs_and_requirements_txt_entries_are_installed(tmp_path):
    """tox's `extras = diagrams` (pyparsing: railroad) and requirements.txt's aiohttp (packtools) were missed."""
    repo = make_repo(tmp_path / "proj", {**PKG, "tests/test_add.py": TEST_ADD, "pyproject.toml": """
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "demo"
        version = "1.0"
        dependencies = ["attrs"]

        [project.optional-dependencies]
        diagrams = ["jinja2"]
        docs = ["sphinx"]
        """, "tox.ini": """
        [testenv]
        extras = diagrams
        commands = pytest tests
        """, "requirements.txt": "attrs\naiohttp>=3\n"})
    d = draft(repo, tmp_path / "home")
    assert d["install"]["extras"] == ["diagrams"]
    assert d["install"]["requirements"] == ["aiohttp>=3"]


def test_tests_require_is_kept_whole_when_an_extra_lists_the_same_package(tmp_path):
    """tests_require kept 1 of 3: what any extra named was skipped as installed, though only one extra is."""
    repo = make_repo(tmp_path / "proj", {**PKG, "tests/test_add.py": TEST_ADD, "setup.py": """
        from setuptools import setup
        setup(name="demo", packages=["pkg"], install_requires=["six"],
              tests_require=["mock", "freezegun", "responses"],
              extras_require={"docs": ["sphinx", "mock"], "http": ["freezegun"]})
        """})
    d = draft(repo, tmp_path / "home")
    assert d["install"]["requirements"] == ["mock", "freezegun", "responses"]


def test_pins_coderun_cannot_run_with_are_replaced_with_a_comment(tmp_path):
    """pytest==3.0.7 and coverage==4.4.2 from requirements-test.txt were copied; coverage 4 silently degraded
    the test mapping to file names (9 of 82 tasks verified)."""
    repo = make_repo(tmp_path / "proj", {**PKG, "tests/test_add.py": TEST_ADD,
                                         "requirements-test.txt": "pytest==3.0.7\ncoverage==4.4.2\n"
                                                                  "pytest-cov==2.4.0\nmock==2.0.0\n"})
    text = draft_manifest(str(repo), Settings(home=tmp_path / "home"))
    reqs = yaml.safe_load(text)["install"]["requirements"]
    assert reqs == ["pytest>=4.6", "coverage>=5", "pytest-cov", "mock==2.0.0"]
    assert "pytest==3.0.7 → pytest>=4.6: coderun runs the tests with pytest 4.6 or later" in " ".join(text.split())


def test_an_import_name_of_a_declared_distribution_is_not_required_again(tmp_path):
    """`rest_framework_api_key` is djangorestframework-api-key's: the draft added a requirement no index has."""
    repo = make_repo(tmp_path / "proj", {**PKG, "setup.py": """
        from setuptools import setup
        setup(name="demo", packages=["pkg"], install_requires=["djangorestframework-api-key", "PyYAML"])
        """, "tests/test_add.py": "import rest_framework_api_key\nimport yaml\n" + TEST_ADD})
    d = draft(repo, tmp_path / "home")
    assert "requirements" not in d["install"] and "args" not in d["tests"]


@pytest.mark.network
def test_a_module_the_package_imports_and_nothing_declares_is_required(tmp_path):
    """packtools imports `magic`, which nothing declares: the baseline failed with No module named 'magic'."""
    repo = make_repo(tmp_path / "proj", {**PKG, "pkg/files.py": "import magic\n\n\ndef kind(p):\n"
                                                                "    return magic.from_file(p)\n",
                                         "tests/test_add.py": TEST_ADD})
    text = draft_manifest(str(repo), Settings(home=tmp_path / "home"))
    assert yaml.safe_load(text)["install"]["requirements"] == ["python-magic"]
    assert "python-magic (the package, as magic)" in " ".join(text.split())


def test_undocumented_option_makes_functions_without_docstrings_candidates(tmp_path):
    """jmespath (2 of 239 functions documented) had no way to take its functions as tasks."""
    repo = make_repo(tmp_path / "proj", {**PKG, "tests/test_add.py": TEST_ADD})
    text = _text(repo, tmp_path / "home", undocumented=True)
    assert parse_manifest(text, Path("d.yaml")).tasks.discover.undocumented is True


def test_a_rev_no_repository_has_is_named_as_given_without_a_manifest(tmp_path):
    """The error named the rev without its `v` and told the user to fix a manifest that did not exist yet."""
    repo = make_repo(tmp_path / "proj", {**PKG, "tests/test_add.py": TEST_ADD})
    with pytest.raises(SourceError) as e:
        draft_manifest(str(repo), Settings(home=tmp_path / "home"), rev="v9.9")
    assert "no revision v9.9 nor 9.9" in e.value.message
    assert "--rev" in e.value.hint and "manifest" not in e.value.hint


def _pytest_log(tmp_path: Path, files: dict[str, str]) -> Path:
    """The output of a real pytest run over `files`, as a baseline's log holds it."""
    for rel, text in files.items():
        (tmp_path / "t" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "t" / rel).write_text(text)
    log = tmp_path / "baseline.log"
    with log.open("w") as fh:
        subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "t"], cwd=tmp_path, stdout=fh,
                       stderr=subprocess.STDOUT, check=False)
    return log


def _manifest(requirements: list[str] | None = None):
    return parse_manifest(yaml.safe_dump({"name": "p", "source": {"path": "."}, "python": "3.11",
                                          "install": {"requirements": requirements or []}}), Path("m.yaml"))


@pytest.mark.network
def test_a_baseline_that_fails_on_a_missing_module_names_the_distribution(tmp_path):
    """Every failed baseline said "check tests.paths and tests.args", also when a dependency was missing."""
    log = _pytest_log(tmp_path, {"test_x.py": "import magic\n\n\ndef test_x():\n    pass\n"})
    cause, hint = baseline_failure(log, _manifest(), 2)
    assert "No module named 'magic'" in cause
    assert 'add "python-magic"' in hint and "install.requirements" in hint


@pytest.mark.integration
def test_a_baseline_that_fails_on_an_old_pytest_pin_names_the_pin(tmp_path):
    """An incompatible pytest pin failed the baseline with the same tests.paths hint."""
    log = _pytest_log(tmp_path, {"test_x.py": "def test_x():\n    pass\n"})
    cause, hint = baseline_failure(log, _manifest(["pytest==3.0.7"]), 4)
    assert "pins pytest==3.0.7" in cause and 'replace "pytest==3.0.7" with "pytest>=4.6"' in hint


@pytest.mark.integration
def test_a_baseline_on_a_python_without_imp_says_to_use_an_older_python(tmp_path):
    """pytest 4 on Python 3.13 fails with No module named 'imp': the hint sent the user to tests.paths."""
    # What `import imp` raises on 3.12 and later, raised here since this interpreter still has imp.
    log = _pytest_log(tmp_path, {"conftest.py": "raise ModuleNotFoundError(\"No module named 'imp'\", name='imp')\n",
                                 "test_x.py": "def test_x():\n    pass\n"})
    cause, hint = baseline_failure(log, _manifest(), 4)
    assert "removed it from the standard library" in cause and "older `python`" in hint


def test_progress_lines_come_at_their_interval_while_no_task_finishes():
    """Without a terminal, tasks build went 2.5 minutes and eval 6.5 without a line: lines came only when a
    task or sample finished."""
    console = Console(file=(out := __import__("io").StringIO()), force_terminal=False, width=200)
    with Renderer(console, every_seconds=0.2) as show:
        show(Counted("calc", 0, 4))
        __import__("time").sleep(1.0)
    lines = [ln for ln in out.getvalue().splitlines() if ln.startswith("calc: 0/4 tasks done")]
    assert len(lines) >= 3, out.getvalue()


def test_a_git_draft_with_a_history_keeps_the_commit_date(tmp_path):
    """The commit's date is still the evidence for a checkout with a history (the evidence is said)."""
    repo = make_repo(tmp_path / "proj", {**PKG, "tests/test_add.py": TEST_ADD})
    with git.Repo(repo).git.custom_environment(**_IDENTITY):
        (repo / "pkg" / "util.py").write_text("X = 2\n")
        git.Repo(repo).git.commit("-qam", "second")
    text = draft_manifest(str(repo), Settings(home=tmp_path / "home"))
    assert "# resolve_as_of: the commit's date" in text


def test_pkg_resources_is_not_mapped_to_a_project_that_vendors_it(tmp_path):
    """Cerberus' tests import pkg_resources: the draft required netoprmgr, one of sixteen projects shipping a copy."""
    repo = make_repo(tmp_path / "proj", {**PKG, "tests/test_add.py": "import pkg_resources\n" + TEST_ADD})
    d = draft(repo, tmp_path / "home")
    assert "requirements" not in d.get("install", {}), d


@pytest.mark.slow
@pytest.mark.network
def test_a_one_commit_checkout_of_a_2021_release_goes_through_to_ground_truth(tmp_path, monkeypatch):
    """A vendored checkout (one commit of today, tag v1.19.0) of parse's 2021 sdist, nothing edited: the draft
    says its date's evidence, ground truth passes 100% and blank 0%."""
    home = tmp_path / "home"
    monkeypatch.setenv("CODERUN_HOME", str(home))
    with tarfile.open(download_sdist("parse==1.19.0", Settings(home=home))) as tar:
        tar.extractall(tmp_path, filter="data")
    repo = git.Repo.init(tmp_path / "parse-1.19.0")
    with repo.git.custom_environment(**_IDENTITY):
        repo.git.add("--all")
        repo.git.commit("-q", "-m", "vendored parse 1.19.0")
    repo.create_tag("v1.19.0")
    manifest = tmp_path / "parse.yaml"
    steps = [["projects", "add", repo.working_dir, "-o", str(manifest)], ["env", "build", str(manifest)],
             ["tasks", "build", str(manifest), "--no-rigor", "-j", "1"]]
    for args in steps:
        res = CliRunner().invoke(app, [*args, *(["--backend", "local"] if args[0] != "projects" else [])])
        assert res.exit_code == 0, (args, res.output)
    text = " ".join(manifest.read_text().split())
    assert "resolve_as_of: 2021-01-14" in text and "tag v1.19.0 on the commit was uploaded" in text
    for mode, expected in (("--ground-truth", 1.0), ("--blank", 0.0)):
        res = CliRunner().invoke(app, ["eval", "--project", str(manifest), mode, "--backend", "local", "-j", "1",
                                       "--json"])
        assert res.exit_code == 0, res.output
        run_dir = Path(json.loads(res.stdout.strip().splitlines()[-1])["run_dir"])
        assert json.loads((run_dir / "report.json").read_text())["overall"]["pass@k"]["1"] == expected, mode
