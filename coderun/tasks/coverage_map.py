"""Per-test line coverage: which tests execute which lines of the project's own files.

The whole suite runs once, in the project's environment, on a temporary copy of the tree, under
coverage.py with one dynamic context per test (a tiny pytest plugin switches the context around each
test's setup/call/teardown). The plugin also records every test's outcome under pytest's own node id,
so the map never depends on how a junit report names inherited or parametrized tests.
A coverage run that fails is an error naming its cause (an old coverage pinned by the manifest, say): falling
back to matching tests by file name would verify a fraction of the tasks without a word. A run that completes
but records no line of the project still matches by file name (weaker), and the build report says so.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from coderun.envs.services import expand, start_services
from coderun.envs.testrun import (
    LIMIT_PLUGIN,
    install_limit,
    limit_env,
    pytest_command,
    run_logged,
    test_env,
    venv_env,
)
from coderun.errors import TaskError
from coderun.manifests.schema import Manifest
from coderun.records import Baseline, TestOutcome

# Loaded into the project's pytest with `-p coderun_covctx`; runs inside the project's venv, so it
# must work with every pytest and coverage version the built-in projects pin (pytest>=6, coverage>=5).
_PLUGIN = '''
import ipaddress, json, os, socket, sys
import coverage

_outcomes = {}
_network = {}          # node id -> addresses outside loopback it tried to reach
_current = ""
_HOSTNAME = socket.gethostname().lower()
_LOCAL_NAMES = {"", "localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback", _HOSTNAME}


def _switch(context):
    global _current
    _current = context
    cov = coverage.Coverage.current()
    if cov is not None:
        cov.switch_context(context)


def pytest_runtest_logstart(nodeid, location):
    _switch(nodeid)


def pytest_runtest_logfinish(nodeid, location):
    _switch("")


def _local(host):
    if host is None:
        return True
    if isinstance(host, (bytes, bytearray)):
        host = bytes(host).decode("ascii", "replace")
    host = str(host).strip("[]").lower()
    if host in _LOCAL_NAMES or host.endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return False
    return ip.is_loopback or ip.is_unspecified


def _address(event, args):
    """The (host, port) a socket event reaches for, or None when it stays on this machine."""
    if event in ("socket.connect", "socket.sendto"):
        sock, addr = args[0], args[1]
        if getattr(sock, "family", None) not in (socket.AF_INET, socket.AF_INET6) or not isinstance(addr, tuple):
            return None  # unix sockets, netlink...
        host, port = addr[0], addr[1]
    elif event == "socket.getaddrinfo":
        host, port = args[0], args[1]
    elif event in ("socket.gethostbyname", "socket.gethostbyname_ex"):
        host, port = args[0], None
    else:
        return None
    return None if _local(host) else "%s:%s" % (host, port if port is not None else "")


def _audit(event, args):
    if not _current or not event.startswith("socket."):
        return
    address = _address(event, args)
    if address is not None:
        seen = _network.setdefault(_current, [])
        if address not in seen and len(seen) < 5:
            seen.append(address)


# Audit hooks exist from Python 3.8; before that the map says the check could not be made.
_CHECKED = hasattr(sys, "addaudithook")
if _CHECKED:
    sys.addaudithook(_audit)


def pytest_runtest_logreport(report):
    prev = _outcomes.get(report.nodeid, ("passed", 0.0))
    outcome = prev[0]
    if report.failed:
        outcome = "failed" if report.when == "call" else "error"
    elif report.skipped and outcome == "passed":
        outcome = "skipped"
    _outcomes[report.nodeid] = (outcome, prev[1] + float(getattr(report, "duration", 0.0) or 0.0))


_keys = {}


def position_key(item):
    """As coderun_reporter's: a parametrized test by the positions of its parameters, FILE::NAME[#i-j]."""
    indices = getattr(getattr(item, "callspec", None), "indices", None)
    if not indices or not item.nodeid.endswith(item.name):
        return None
    base = item.nodeid[:len(item.nodeid) - len(item.name)] + item.name.split("[", 1)[0]
    return "%s[#%s]" % (base, "-".join(str(i) for i in indices.values()))


def pytest_collection_finish(session):
    for item in session.items:
        key = position_key(item)
        if key is not None:
            _keys[item.nodeid] = key


def pytest_sessionfinish(session, exitstatus):
    with open(os.environ["CODERUN_COVCTX_OUT"], "w") as fh:
        json.dump({"outcomes": _outcomes, "network": _network if _CHECKED else None, "keys": _keys}, fh)
'''

# Reads the coverage data file with the venv's own coverage (its schema matches the writer's).
_READER = '''
import json, sys
import coverage

data = coverage.CoverageData(sys.argv[1])
data.read()
out = {}
for f in data.measured_files():
    out[f] = {str(ln): sorted(c for c in ctxs if c) for ln, ctxs in data.contexts_by_lineno(f).items()}
with open(sys.argv[2], "w") as fh:
    json.dump(out, fh)
'''


@dataclass(frozen=True)
class CoverageMap:
    """Test node ids per executed line, per file relative to the tree root; plus run outcomes."""

    project: str
    kind: str                                      # "coverage" | "filename"
    lines: dict[str, dict[int, frozenset[str]]] = field(default_factory=dict)
    outcomes: dict[str, TestOutcome] = field(default_factory=dict)
    passing: frozenset[str] = frozenset()          # passed in the baseline and in the coverage run
    test_files: tuple[str, ...] = ()               # every file a passing test lives in
    reason: str = ""                               # why the fallback was used
    duration: float = 0.0
    # Tests that tried to reach a non-loopback address (node id -> "host:port"s), from an audit hook in
    # the coverage run; `network_note` says why that check could not be made (then `network` is empty).
    network: dict[str, tuple[str, ...]] = field(default_factory=dict)
    network_note: str = ""
    # Parametrized tests whose node id changes between runs (an object's repr, the time), known by position
    # instead: position key -> the node id the coverage run gave.
    positions: dict[str, str] = field(default_factory=dict)

    def tests_for(self, relfile: str, lines: Iterable[int]) -> set[str]:
        """Passing tests that execute any of `lines` in `relfile` (coverage mapping)."""
        per_line = self.lines.get(relfile, {})
        found: set[str] = set()
        for ln in lines:
            found |= per_line.get(ln, frozenset())
        return found & self.passing

    def to_json(self) -> str:
        """The whole map, node ids written once (an interrupted task build keeps it, see tasks.store)."""
        ids = sorted({n for per_line in self.lines.values() for tests in per_line.values() for n in tests})
        index = {n: i for i, n in enumerate(ids)}
        return json.dumps({
            "project": self.project, "kind": self.kind, "ids": ids,
            "lines": {f: {str(ln): sorted(index[n] for n in tests) for ln, tests in per_line.items()}
                      for f, per_line in self.lines.items()},
            "outcomes": [o.model_dump(mode="json") for o in self.outcomes.values()],
            "passing": sorted(self.passing), "test_files": list(self.test_files), "reason": self.reason,
            "duration": self.duration, "network": {n: list(a) for n, a in self.network.items()},
            "network_note": self.network_note, "positions": self.positions})

    @classmethod
    def from_json(cls, text: str) -> CoverageMap | None:
        """A map written by `to_json`; None when it cannot be read (then the suite runs again)."""
        try:
            d = json.loads(text)
            ids = d["ids"]
            lines = {f: {int(ln): frozenset(ids[i] for i in tests) for ln, tests in per_line.items()}
                     for f, per_line in d["lines"].items()}
            outcomes = {o["nodeid"]: TestOutcome.model_validate(o) for o in d["outcomes"]}
            return cls(project=d["project"], kind=d["kind"], lines=lines, outcomes=outcomes,
                       passing=frozenset(d["passing"]), test_files=tuple(d["test_files"]), reason=d["reason"],
                       duration=d["duration"], network={n: tuple(a) for n, a in d["network"].items()},
                       network_note=d["network_note"], positions=dict(d.get("positions") or {}))
        except (ValueError, KeyError, TypeError, IndexError):
            return None

    def tests_by_filename(self, relfile: str) -> set[str]:
        """Passing tests in files named after the module (`test_<module>.py`, `<module>_test.py`…)."""
        module = Path(relfile).stem
        if module == "__init__":
            module = Path(relfile).parent.name
        files = {f for f in self.test_files if _module_of_test(f) == module}
        return {t for t in self.passing if test_file(t) in files}


def _module_of_test(path: str) -> str:
    stem = Path(path).stem
    stem = re.sub(r"^(tests?_|t_)", "", stem)
    return re.sub(r"_tests?$", "", stem)


def test_file(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def collect_coverage(manifest: Manifest, python: Path, tree: Path, baseline: Baseline | None, *,
                     log: Path | None = None, measure: Iterable[str] | None = None) -> CoverageMap:
    """Run the suite on a copy of `tree` under coverage with per-test contexts (a run that fails raises
    TaskError with its cause); tests are matched by file name when it records no line of the project.

    `tree` is never modified: everything happens in a temporary copy.
    """
    started = time.monotonic()
    timed_out = baseline.timed_out if baseline is not None else []
    lines, outcomes, network, network_note, positions = _in_a_copy(manifest, python, tree, log, timed_out, measure)
    if measure is not None and not lines:  # whether any other file of the project ran: the whole run says
        lines, outcomes, network, network_note, positions = _in_a_copy(manifest, python, tree, log, timed_out, None)
    reason = "" if lines else "the coverage run recorded no line of the project's files"
    passing = {n for n, o in outcomes.items() if o.outcome == "passed"}
    if baseline is not None:  # a test the baseline saw must have passed there too
        known = {t.nodeid for t in baseline.tests}
        passing = {n for n in passing if n not in known or n in baseline.passing()}
    if not outcomes and baseline is not None:  # coverage failed entirely: the baseline says what passes
        outcomes = {t.nodeid: t for t in baseline.tests}
        passing = baseline.passing()
    if baseline is not None:  # keep the baseline's durations: they were measured without coverage
        for t in baseline.tests:
            if t.nodeid in outcomes:
                outcomes[t.nodeid] = outcomes[t.nodeid].model_copy(update={"duration": t.duration})
    kind = "coverage" if lines else "filename"
    return CoverageMap(project=manifest.name, kind=kind, lines=lines, outcomes=outcomes,
                       passing=frozenset(passing), test_files=tuple(sorted({test_file(n) for n in passing})),
                       reason=reason, duration=round(time.monotonic() - started, 2), network=network,
                       network_note=network_note, positions=positions)


def _in_a_copy(manifest: Manifest, python: Path, tree: Path, log: Path | None, timed_out: list[str],
               measure: Iterable[str] | None):
    with tempfile.TemporaryDirectory(prefix="coderun-covmap-") as tmp:
        work = Path(tmp)
        copy = work / "tree"
        shutil.copytree(tree, copy, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        return _run_with_contexts(manifest, python, copy, work, log, timed_out, measure)


def _run_with_contexts(manifest: Manifest, python: Path, copy: Path, work: Path, log: Path | None,
                       timed_out: list[str], measure: Iterable[str] | None = None) -> tuple[dict[str, dict[int, frozenset[str]]], dict[str, TestOutcome],
                                                      dict[str, tuple[str, ...]], str, dict[str, str]]:
    """(lines, outcomes, network attempts, why the network could not be checked, position key -> the node id
    the coverage run gave the tests known by position). Under the per-test limit, without the tests that hit
    it in the baseline. `measure`: the files (relative to the tree) whose lines are recorded, else all of the
    tree's: the candidates' files are all the mapping reads (rdflib's run: 160 s for the tree, 122 s for them)."""
    plugin_dir = install_limit(work / "plugin")
    (plugin_dir / "coderun_covctx.py").write_text(_PLUGIN)
    (work / "reader.py").write_text(_READER)
    rc = work / "coveragerc"
    data_file = work / "coverage.sqlite"
    # Our own rc file, so a project's [coverage:run] settings (parallel, branch, source) do not apply.
    files = "".join(f"\n    {copy / f}" for f in sorted(measure)) if measure is not None else ""
    where = f"include ={files}" if measure is not None else f"source =\n    {copy}"
    rc.write_text(f"[run]\ndata_file = {data_file}\n{where}\nparallel = False\n")
    outcomes_file = work / "outcomes.json"
    env = venv_env(python)
    t_env = test_env(manifest, copy)
    env.update(limit_env(manifest, t_env, plugin_dir))
    env["CODERUN_COVCTX_OUT"] = str(outcomes_file)
    env["COVERAGE_CORE"] = "ctrace"  # sys.monitoring records a line once, not once per context
    pytest_cmd = pytest_command(manifest, python, rootdir=copy, extra=["-p", "coderun_covctx", "-p", LIMIT_PLUGIN],
                                deselect=timed_out)
    cmd = [str(python), "-m", "coverage", "run", f"--rcfile={rc}", *pytest_cmd[1:]]
    collected_file = work / "collected.json"
    with start_services(manifest.tests.services) as services:
        out = run_logged(cmd, copy, expand(env, services.env), manifest.tests.timeout * 3, log,
                         what="the coverage run")
        _collect_again(manifest, python, copy, plugin_dir, collected_file, services.env, log)
    if out.returncode not in (0, 1) or not outcomes_file.is_file() or not data_file.is_file():
        raise TaskError(f"{manifest.name}: the coverage run that maps tests to functions did not complete "
                        f"(exit {out.returncode}){_old_coverage(python)}: " + _tail(out.stdout),
                        hint="the baseline ran, so the suite runs without coverage; "
                             + (f"see {log}" if log else "see the build's coverage log"))
    raw = json.loads(outcomes_file.read_text())
    again = json.loads(collected_file.read_text()).get("keys", {}) if collected_file.is_file() else {}
    renamed = by_position(raw.get("keys", {}), again)
    outcomes = {renamed.get(n, n): TestOutcome(nodeid=renamed.get(n, n), outcome=o, duration=round(d, 4))
                for n, (o, d) in raw["outcomes"].items()}
    if raw["network"] is None:
        network, network_note = {}, "the project's Python has no audit hooks (3.8+): network use not checked"
    else:
        network, network_note = {renamed.get(n, n): tuple(a) for n, a in raw["network"].items()}, ""
    dump = work / "contexts.json"
    read = run_logged([str(python), str(work / "reader.py"), str(data_file), str(dump)], work, env, 600, log,
                      what="reading the coverage data")
    if read.returncode != 0:
        raise TaskError(f"{manifest.name}: cannot read the coverage data: {_tail(read.stdout)}")
    lines = _relativize(json.loads(dump.read_text()), copy, renamed)
    return lines, outcomes, network, network_note, {k: n for n, k in renamed.items()}


def _collect_again(manifest: Manifest, python: Path, copy: Path, plugin_dir: Path, out: Path,
                   service_env: dict[str, str], log: Path | None) -> None:
    """A second process names the tests again, with the tree at another path: an id it gives otherwise is
    not stable (a repr, the time, or the tree's path: rdflib's test ids embed its data files' URIs, which
    no sandbox's tree shares with this one)."""
    moved = copy.with_name("tree-again")
    copy.rename(moved)
    try:
        env = venv_env(python)
        env.update(limit_env(manifest, test_env(manifest, moved), plugin_dir))
        cmd = pytest_command(manifest, python, rootdir=moved, extra=["-p", "coderun_covctx", "--collect-only"])
        run_logged(cmd, moved, expand({**env, "CODERUN_COVCTX_OUT": str(out)}, service_env), manifest.tests.timeout,
                   log, what="collecting the tests again")
    finally:
        moved.rename(copy)


def by_position(first: dict[str, str], second: dict[str, str]) -> dict[str, str]:
    """Node id -> position key (`FILE::NAME[#i-j]`, the reporter selects by either), for the parametrized
    tests whose node id the second run (`second`: node id -> key) gives otherwise; a key two tests of one
    run share is left alone."""
    def unique(ids: dict[str, str]) -> dict[str, str]:
        keys = list(ids.values())
        return {k: n for n, k in ids.items() if keys.count(k) == 1}
    a, b = unique(first), unique(second)
    return {n: k for k, n in a.items() if k in b and b[k] != n}


def _old_coverage(python: Path) -> str:
    """", coverage X is installed; coderun needs 5 or later" when the environment's coverage is too old."""
    proc = subprocess.run([str(python), "-c", "import coverage; print(coverage.__version__)"], capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)
    version = proc.stdout.strip()
    if proc.returncode != 0 or not re.match(r"^\d+", version) or int(version.split(".")[0]) >= 5:
        return ""
    return (f", with coverage {version}: coderun needs coverage 5 or later (per-test contexts); replace the "
            "manifest's coverage pin in install.requirements with coverage>=5")


def _relativize(raw: dict[str, dict[str, list[str]]], copy: Path, renamed: dict[str, str]
                ) -> dict[str, dict[int, frozenset[str]]]:
    roots = {str(copy), os.path.realpath(copy)}
    out: dict[str, dict[int, frozenset[str]]] = {}
    for path, per_line in raw.items():
        rel = next((os.path.relpath(path, r) for r in roots if path.startswith(r + os.sep)), None)
        if rel is None:
            continue
        out[Path(rel).as_posix()] = {int(ln): frozenset(renamed.get(c, c) for c in ctxs)
                                     for ln, ctxs in per_line.items() if ctxs}
    return out


def _tail(text: str, lines: int = 12) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def cap_tests(tests: Iterable[str], durations: dict[str, float], max_tests: int | None, max_seconds: float
              ) -> tuple[list[str], list[str]]:
    """(kept, dropped): at most `max_tests` tests (None: any number) whose durations add up to at most `max_seconds`, the
    slowest dropped first (ties: the later node id). The fastest test always stays, whatever it takes:
    a task is never lost to the budget. An unknown duration counts as 0."""
    by_speed = sorted(set(tests), key=lambda n: (durations.get(n, 0.0), n))
    kept = by_speed[:max(1, max_tests)] if max_tests is not None else list(by_speed)
    total = sum(durations.get(n, 0.0) for n in kept)
    while len(kept) > 1 and total > max_seconds:
        total -= durations.get(kept.pop(), 0.0)
    stays = set(kept)
    dropped = [n for n in reversed(by_speed) if n not in stays]
    return sorted(kept), dropped
