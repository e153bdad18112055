"""How a project's tests are run and read: one pytest command line, one environment for a run in the project's
venv, and one junit parser for everyone.

unittest suites run through pytest as well, so every stage sees pytest node ids.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator
from pathlib import Path

from coderun.errors import EnvironmentBuildError, TaskError
from coderun.harness import HARNESS_DIR, LIMIT_FILES
from coderun.manifests.schema import Manifest
from coderun.records import Baseline, TestOutcome

LIMIT_PLUGIN = "coderun_limit"
_RANK = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}
# A parametrized test known by its parameters' positions (`test_f[#0-1]`, see tasks/coverage_map): pytest's
# command line cannot name it, so its function is named (all its cases run).
_POSITION = re.compile(r"\[#\d+(?:-\d+)*\]$")


def files_of(nodeids: Iterable[str]) -> list[str]:
    """The files of these node ids, each once, first seen first: what pytest is given to collect."""
    return list(dict.fromkeys(n.split("::", 1)[0] for n in nodeids))


def command_line_id(nodeid: str) -> str:
    """The id pytest's command line can name: a position key's function (every case of it)."""
    return _POSITION.sub("", nodeid)


def pytest_command(manifest: Manifest, python: str | Path, *, nodeids: list[str] | None = None,
                   junit: str | Path | None = None, rootdir: str | Path | None = None,
                   extra: list[str] | None = None, deselect: Iterable[str] = ()) -> list[str]:
    """The command that runs `nodeids` (or the manifest's test paths, less `tests.ignore` and `deselect`)
    with junit output."""
    cmd = [str(python), "-m", "pytest", "-p", "no:cacheprovider", "-o", "junit_family=xunit1",
           "-o", "console_output_style=classic", "-q", "-rfE"]
    if rootdir:
        cmd.append(f"--rootdir={rootdir}")
    if junit:
        cmd.append(f"--junitxml={junit}")
    cmd += list(manifest.tests.args)
    cmd += list(extra or [])
    if nodeids is not None:
        cmd += list(dict.fromkeys(command_line_id(n) for n in nodeids))
    else:
        cmd += list(manifest.tests.paths)
        for test in [*(t.test for t in manifest.tests.ignore), *deselect]:
            cmd += ["--deselect", test]
    return cmd


def baseline_command(manifest: Manifest, python: str | Path, *, harness: str | Path, out: str | Path,
                     junit: str | Path, rootdir: str | Path) -> list[str]:
    """The baseline's command: the whole suite under the per-test limit (`limit_env`), run by coderun_baseline,
    which runs it again without a test that ended the process; its records go to `out`."""
    pytest = pytest_command(manifest, python, junit=junit, rootdir=rootdir, extra=["-p", LIMIT_PLUGIN])
    return [str(python), f"{harness}/coderun_baseline.py", str(out), f"{manifest.tests.timeout:g}", "--", *pytest]


def limit_env(manifest: Manifest, env: dict[str, str], harness: str | Path) -> dict[str, str]:
    """`env` (a test run's, from test_env) for a whole-suite run under the per-test limit: the same upper bound
    as every other run of the project's tests, the limit plugin importable after the project."""
    return {**env, "PYTHONPATH": f"{env['PYTHONPATH']}{os.pathsep}{harness}",
            "CODERUN_TEST_TIMEOUT": f"{manifest.tests.timeout_per_test:g}"}


def install_limit(folder: Path) -> Path:
    """The limit plugin and the baseline's runner, copied into `folder` (the harness folder of a host run)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in LIMIT_FILES:
        shutil.copyfile(HARNESS_DIR / name, folder / name)
    return folder


def timed_out_tests(limit_log: str, ended: str) -> list[str]:
    """The tests stopped at the per-test limit (`end NODEID timeout` in the limit log) and those that ended
    the whole process (coderun_baseline's ended.json), in the order they ran."""
    stopped = [f[1] for f in (line.split("\t") for line in limit_log.splitlines())
               if len(f) == 3 and f[0] == "end" and f[2] == "timeout"]
    try:
        killed = [str(n) for n in json.loads(ended or "[]")]
    except ValueError:
        killed = []
    return list(dict.fromkeys([*killed, *stopped]))


def test_env(manifest: Manifest, tree: str | Path, configuration: str = "") -> dict[str, str]:
    """Environment variables a test run of the tree at `tree` needs (besides PATH and the venv), in the
    named `tests.configurations` entry ("": tests.env alone)."""
    root = Path(tree) / manifest.import_root
    env = {"PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0",
           **manifest.tests.env}
    if configuration:
        conf = next((c for c in manifest.tests.configurations if c.name == configuration), None)
        if conf is None:
            raise TaskError(f"{manifest.name}: no configuration {configuration!r} in tests.configurations",
                            hint="the tasks were built with another manifest: build them again")
        env.update(conf.env)
    return {k: v for k, v in env.items() if v is not None}


def venv_env(python: Path) -> dict[str, str]:
    """os.environ for a run in the venv of `python`: its bin first, no outside Python or coverage settings."""
    venv = python.parent.parent
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "VIRTUAL_ENV", "PYENV_VERSION", "COV_CORE", "COVERAGE"))}
    env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


@contextlib.contextmanager
def own_tmp(env: dict[str, str]) -> Iterator[dict[str, str]]:
    """`env` with a temporary folder of the run's own (TMPDIR, TMP, TEMP), removed afterwards. A project's
    suite run on the host (baseline, coverage map, recording) would otherwise share the user's temporary
    folder: pytest there prunes the user's older numbered `pytest-of-USER/pytest-N` folders, those of pytest
    sessions still running beside the build among them (a CI run lost its `tmp_path`s to rdflib's build)."""
    with tempfile.TemporaryDirectory(prefix="coderun-tmp-") as tmp:
        yield {**env, "TMPDIR": tmp, "TMP": tmp, "TEMP": tmp}


def run_logged(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float, log: Path | None, *,
               what: str = "the test run") -> subprocess.CompletedProcess:
    """Run `cmd` (stdout and stderr together, in a temporary folder of its own), appending its output to
    `log`, a timed out run's too. Raises TaskError when it times out or cannot start."""
    try:
        with own_tmp(env) as run_env:
            proc = subprocess.run(cmd, cwd=cwd, env=run_env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, errors="replace", timeout=timeout)
    except subprocess.TimeoutExpired as e:
        output = e.output.decode("utf-8", "replace") if isinstance(e.output, bytes) else e.output or ""
        append_log(log, cmd, f"{output}\n[timed out after {timeout:.0f}s]")
        raise TaskError(f"{what} timed out after {timeout:.0f}s") from None
    except OSError as e:
        append_log(log, cmd, f"[cannot start: {e}]")
        raise TaskError(f"cannot start {cmd[0]}: {e}") from None
    append_log(log, cmd, proc.stdout)
    return proc


def append_log(log: Path | None, cmd: list[str], output: str) -> None:
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a") as fh:
            fh.write(f"$ {' '.join(cmd)}\n{output}\n")


def timed_out_note(manifest: Manifest, baseline: Baseline) -> str:
    """What an environment build says of the baseline's tests that hit the per-test limit."""
    shown = ", ".join(baseline.timed_out[:5]) + (f" and {len(baseline.timed_out) - 5} more" if len(baseline.timed_out) > 5 else "")
    return (f"{manifest.name}: {len(baseline.timed_out)} test(s) ran over the per-test limit of "
            f"{manifest.tests.timeout_per_test:g}s (tests.timeout_per_test) in the baseline and are left out of the "
            f"test mapping: {shown}")


def _nodeid(case: ET.Element, rootdir: Path | None) -> str:
    """pytest's node id for a junit testcase.

    `classname` names the module and classes that *collected* the test; junit's `file` names where the test
    function is *defined*, which differs for tests inherited from a mixin in another module. So the module is
    found from `classname` against the rootdir when there is one.
    """
    name = case.get("name", "")
    classname = case.get("classname", "")
    parts = [p for p in classname.split(".") if p]
    if rootdir is not None:
        for i in range(len(parts), 0, -1):
            candidate = "/".join(parts[:i]) + ".py"
            if (rootdir / candidate).is_file():
                return "::".join([candidate, *parts[i:], name])
    file = case.get("file")
    if not file:  # xunit2 without a rootdir: best effort from the dotted class name
        return "/".join(parts) + ".py::" + name if parts else name
    module = file[:-3].replace("/", ".") if file.endswith(".py") else file
    classes = classname[len(module) + 1:] if classname.startswith(module + ".") else ""
    return "::".join([file, *(c for c in classes.split(".") if c), name])


def _outcome(case: ET.Element) -> tuple[str, str]:
    for tag, outcome in (("error", "error"), ("failure", "failed"), ("skipped", "skipped")):
        el = case.find(tag)
        if el is not None:
            text = (el.get("message") or "") + ("\n" + el.text if el.text else "")
            return outcome, text.strip()[-4000:]
    return "passed", ""


def parse_junit(path: str | Path, rootdir: str | Path | None = None) -> list[TestOutcome]:
    """Per-test outcomes from a pytest junit file; a test with several entries keeps its worst.

    `rootdir` is the tree the tests ran in (as seen from here), used to name inherited tests right.
    """
    root = Path(rootdir) if rootdir is not None else None
    try:
        xml = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        raise EnvironmentBuildError(f"cannot read the junit report {path}: {e}") from None
    merged: dict[str, TestOutcome] = {}
    for case in xml.iter("testcase"):
        nodeid = _nodeid(case, root)
        outcome, message = _outcome(case)
        t = TestOutcome(nodeid=nodeid, outcome=outcome, duration=float(case.get("time") or 0),
                        message=message)
        prev = merged.get(nodeid)
        if prev is None or _RANK[outcome] > _RANK[prev.outcome]:
            if prev is not None:
                t.duration += prev.duration
            merged[nodeid] = t
        else:
            prev.duration += t.duration
    return list(merged.values())
