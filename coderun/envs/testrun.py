"""How a project's tests are run and read: one pytest command line, one environment for a run in the project's
venv, and one junit parser for everyone.

unittest suites run through pytest as well, so every stage sees pytest node ids.
"""

from __future__ import annotations

import os
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

from coderun.errors import EnvironmentBuildError, TaskError
from coderun.manifests.schema import Manifest
from coderun.records import TestOutcome

_RANK = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}
# A parametrized test known by its parameters' positions (`test_f[#0-1]`, see tasks/coverage_map): pytest's
# command line cannot name it, so its function is named (all its cases run).
_POSITION = re.compile(r"\[#\d+(?:-\d+)*\]$")


def pytest_command(manifest: Manifest, python: str | Path, *, nodeids: list[str] | None = None,
                   junit: str | Path | None = None, rootdir: str | Path | None = None,
                   extra: list[str] | None = None) -> list[str]:
    """The command that runs `nodeids` (or the manifest's test paths) with junit output."""
    cmd = [str(python), "-m", "pytest", "-p", "no:cacheprovider", "-o", "junit_family=xunit1",
           "-o", "console_output_style=classic", "-q", "-rfE"]
    if rootdir:
        cmd.append(f"--rootdir={rootdir}")
    if junit:
        cmd.append(f"--junitxml={junit}")
    cmd += list(manifest.tests.args)
    cmd += list(extra or [])
    if nodeids is not None:
        cmd += list(dict.fromkeys(_POSITION.sub("", n) for n in nodeids))
    else:
        cmd += list(manifest.tests.paths)
        for ignored in manifest.tests.ignore:
            cmd += ["--deselect", ignored.test]
    return cmd


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


def run_logged(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float, log: Path | None, *,
               what: str = "the test run") -> subprocess.CompletedProcess:
    """Run `cmd` (stdout and stderr together), appending its output to `log`, a timed out run's too.
    Raises TaskError when it times out or cannot start."""
    try:
        proc = subprocess.run(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
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
