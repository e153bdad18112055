"""Record what real pytest releases print, for tests/test_pytest_summary.py.

    python tests/pytest_outputs/record.py [--only 9.2] [--python 3.12=/path/to/python3.12 ...]

For each pytest minor version from 4.6 to 9.x (its last patch release), a temporary venv on a Python of its
era gets that pytest from PyPI, then runs a small test file the way coderun does (`-q --tb=short -p
no:cacheprovider -o addopts=`), once per scenario: every outcome at once (passed, failed, skipped,
deselected, xfailed, xpassed, a warning, a setup error, unittest subtests, subtests through the `subtests`
fixture where pytest has it, and a category of a plugin's own, as pytest-rerunfailures' `rerun`), only
passes, `-v` (the summary framed by `=`), every test deselected, and a collection error. Besides stdout it
writes what pytest's terminal reporter counted (its `stats`, per category), read by a plugin at the end of
the session: the counts the summary line is made of. One JSON file per version lands next to this script.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent

# (pytest pin, the Python minor of its era); each is the minor's last release.
VERSIONS = [("4.6.11", "3.7"), ("5.0.1", "3.8"), ("5.1.3", "3.8"), ("5.2.4", "3.8"), ("5.3.5", "3.8"),
            ("5.4.3", "3.8"), ("6.0.2", "3.9"), ("6.1.2", "3.9"), ("6.2.5", "3.9"), ("7.0.1", "3.10"),
            ("7.1.3", "3.10"), ("7.2.2", "3.10"), ("7.3.2", "3.10"), ("7.4.4", "3.10"), ("8.0.2", "3.12"),
            ("8.1.2", "3.12"), ("8.2.2", "3.12"), ("8.3.5", "3.12"), ("8.4.2", "3.12"), ("9.0.3", "3.12"),
            ("9.1.1", "3.12"), ("9.2.0", "3.12")]

TESTS = '''
import unittest
import warnings

import pytest


def test_pass():
    pass


def test_fail():
    assert 1 == 2


def test_skip():
    pytest.skip("no")


@pytest.mark.xfail(reason="known")
def test_xfail():
    assert False


@pytest.mark.xfail(reason="known")
def test_xpass():
    pass


def test_warn():
    warnings.warn(UserWarning("careful"))


@pytest.fixture
def broken():
    raise RuntimeError("fixture")


def test_error(broken):
    pass


def test_rerun():
    pass


def test_deselected():
    pass


class Sub(unittest.TestCase):
    def test_sub(self):
        for i in range(3):
            with self.subTest(i=i):
                self.assertLess(i, 2)

    def test_sub_pass(self):
        for i in range(2):
            with self.subTest(i=i):
                self.assertLess(i, 2)
'''

FIXTURE_SUBTESTS = '''
def test_fixture_subtests(subtests):
    for i in range(3):
        with subtests.test(i=i):
            assert i < 2
'''

# The category a plugin of its own adds (pytest-rerunfailures reports a rerun this way), and the reporter's
# own counts written where the test cannot see them: the file named by PYTEST_STATS_OUT.
CONFTEST = '''
import json
import os


def pytest_report_teststatus(report, config):
    if report.when == "call" and report.nodeid.endswith("::test_rerun"):
        return "rerun", "R", "RERUN"


def pytest_terminal_summary(terminalreporter):
    counts = {key: len([r for r in reports if getattr(r, "count_towards_summary", True)])
              for key, reports in terminalreporter.stats.items() if key}
    with open(os.environ["PYTEST_STATS_OUT"], "w") as f:
        json.dump(counts, f)
'''

COMMON = ["-p", "no:cacheprovider", "-o", "addopts=", "--tb=short", "--rootdir=."]
SCENARIOS = {
    "everything": ["-q", "--deselect", "test_all.py::test_deselected", "test_all.py"],
    "passes": ["-q", "test_all.py::test_pass", "test_all.py::test_deselected", "test_all.py::Sub::test_sub_pass"],
    "verbose": ["-v", "test_all.py::test_pass", "test_all.py::test_deselected"],
    "all_deselected": ["-q", "--deselect", "test_all.py::test_pass", "test_all.py::test_pass"],
    "collection_error": ["-q", "test_broken.py"],
}


def record(pin: str, python: str, work: Path) -> dict:
    venv = work / f"venv-{pin}"
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    subprocess.run([py, "-m", "pip", "install", "-q", f"pytest=={pin}"], check=True)
    project = work / f"project-{pin}"
    project.mkdir()
    major = int(pin.split(".")[0])
    (project / "test_all.py").write_text(TESTS + (FIXTURE_SUBTESTS if major >= 9 else ""))
    (project / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    (project / "test_broken.py").write_text("import no_such_module\n\ndef test_x():\n    pass\n")
    runs = []
    for name, args in SCENARIOS.items():
        stats = project / "stats.json"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PY_COLORS", "FORCE_COLOR"))}
        env["PYTEST_STATS_OUT"] = str(stats)
        proc = subprocess.run([py, "-m", "pytest", *COMMON, *args], cwd=project, env=env, capture_output=True,
                              text=True, timeout=300)
        counts = json.loads(stats.read_text()) if stats.exists() else None
        stats.unlink(missing_ok=True)
        runs.append({"name": name, "args": args, "exit_code": proc.returncode, "stdout": proc.stdout,
                     "stats": counts})
    version = subprocess.run([py, "-c", "import pytest, sys; print(pytest.__version__, sys.version.split()[0])"],
                             check=True, capture_output=True, text=True).stdout.split()
    return {"pytest": version[0], "python": version[1], "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", action="append", default=[], help="pytest minor versions to record (e.g. 9.2)")
    parser.add_argument("--python", action="append", default=[], metavar="MINOR=PATH",
                        help="the interpreter for a Python minor (default: pythonMINOR on PATH)")
    args = parser.parse_args()
    pythons = dict(p.split("=", 1) for p in args.python)
    for pin, minor in VERSIONS:
        if args.only and ".".join(pin.split(".")[:2]) not in args.only:
            continue
        with tempfile.TemporaryDirectory(prefix="pytest-outputs-") as tmp:
            data = record(pin, pythons.get(minor, f"python{minor}"), Path(tmp))
        out = HERE / f"pytest-{'.'.join(pin.split('.')[:2])}.json"
        out.write_text(json.dumps(data, indent=1) + "\n")
        print(f"pytest {data['pytest']} on Python {data['python']}: {out.name}", file=sys.stderr)


if __name__ == "__main__":
    main()
