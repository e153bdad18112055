"""Local environments: a venv per project (the embedded default backend), with a recorded baseline.

Layout of `$CODERUN_HOME/envs/<project>-<key>/` (key = hash of what installs the venv: the interpreter, the
install spec and the source's own commit; never the supplementary tests committed on top of it):
    venv/            the virtual environment (dependencies, pytest, coverage; never the project's code)
    project/         only with `install.pre_install`: the checkout after those commands, the tree that
                     the baseline, tasks build and evaluation all use (`LocalEnv.checkout` points here)
    env.json         what built it and how long it took; written once the venv is installed, so that a failed
                     baseline is re-run with the same venv after the manifest's `tests` are fixed
    packages.json    the interpreter's version and every installed distribution (ProjectEnvironment)
    baseline.json    every test's outcome on the original code (coderun.records.Baseline)
    logs/            pip and test logs
The project's code is always imported from a tree given by PYTHONPATH, so a copy with a spliced
function is what the tests see, never an installed version.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from coderun.config import Settings
from coderun.envs.diagnose import baseline_failure, install_failure
from coderun.envs.logs import tail
from coderun.envs.progress import Steps
from coderun.envs.resolve import TOOLING, compile_requirements, install_named, install_pinned
from coderun.envs.services import expand, start_services
from coderun.envs.sources import Checkout, checkout, commit_date, pip_command
from coderun.envs.testrun import (
    baseline_command,
    install_limit,
    limit_env,
    own_tmp,
    parse_junit,
    test_env,
    timed_out_note,
    timed_out_tests,
)
from coderun.envs.venv import make_venv
from coderun.envs.versions import PACKAGES_SCRIPT, project_environment
from coderun.errors import EnvironmentBuildError
from coderun.events import Listener, Note, silent
from coderun.harness.coderun_baseline import ATTEMPTS
from coderun.manifests.schema import Manifest
from coderun.records import Baseline, ProjectEnvironment

_LOG_TAIL_LINES = 15  # of a failed step's log, in the error

ENV_RECIPE_VERSION = "1"
# Test tooling every environment gets unless the manifest pins its own.
_TOOLING = {"pytest": "pytest", "coverage": "coverage"}


@dataclass(frozen=True)
class LocalEnv:
    project: str
    path: Path
    python: Path
    checkout: Checkout
    key: str
    tests_key: str = ""    # hash of the manifest's `tests` section the baseline was recorded with
    as_of: dt.date | None = None  # the day the dependencies are resolved as of (None: today's releases)

    @property
    def baseline_path(self) -> Path:
        return self.path / "baseline.json"

    @property
    def packages_path(self) -> Path:
        return self.path / "packages.json"

    @property
    def resolved_path(self) -> Path:
        """The pinned requirements when the dependencies were resolved as of a date."""
        return self.path / "resolved.txt"

    @property
    def logs(self) -> Path:
        return self.path / "logs"

    @property
    def installed(self) -> bool:
        return (self.path / "env.json").is_file()

    @property
    def ready(self) -> bool:
        """Installed, with a baseline recorded under the current `tests` section of the manifest."""
        if not (self.installed and self.baseline_path.is_file()):
            return False
        try:
            return json.loads((self.path / "env.json").read_text()).get("tests_key") == self.tests_key
        except (OSError, ValueError):
            return False


def baseline_tests_key(manifest: Manifest, commit: str = "") -> str:
    """The venv depends on the install spec only; the baseline also on how the tests are run (in tests.env
    alone: the configurations do not count) and on the tree they run in (`commit`: the checkout's, which adds
    the supplementary tests to the source's)."""
    data = manifest.tests.model_dump_json(exclude=manifest.tests.BASELINE_EXCLUDE) + commit
    return hashlib.sha256(data.encode()).hexdigest()[:16]


def _env_for(manifest: Manifest, settings: Settings, co: Checkout) -> LocalEnv:
    interpreter, _ = find_python(manifest.python)
    # The interpreter actually used is part of the key: installing python3.9 later rebuilds.
    as_of = resolve_date(manifest, co)  # a git source's commit date when the manifest gives none
    # What installs the venv, and nothing else: the source's own commit, not the supplementary tests on top.
    key = manifest.install_hash(co.upstream_commit, ENV_RECIPE_VERSION, _version_of(str(interpreter)) or "",
                                *([f"as-of {as_of}"] if as_of else []))
    path = settings.envs / f"{manifest.name}-{key}"
    tests_key = baseline_tests_key(manifest, co.commit)
    if manifest.install.pre_install:  # every stage uses the tree the commands prepared, never the bare checkout
        co = replace(co, path=path / "project")
    return LocalEnv(manifest.name, path, path / "venv" / "bin" / "python", co, key, tests_key, as_of)


def find_local_env(manifest: Manifest, settings: Settings) -> LocalEnv | None:
    env = _env_for(manifest, settings, checkout(manifest, settings))
    return env if env.ready else None


def load_baseline(env: LocalEnv) -> Baseline:
    try:
        return Baseline.model_validate_json(env.baseline_path.read_text())
    except (OSError, ValueError) as e:
        raise EnvironmentBuildError(f"{env.project}: no readable baseline at {env.baseline_path}: {e}",
                                    hint=f"run `coderun env build {env.project} --force`") from None


def find_python(version: str) -> tuple[Path, bool]:
    """An interpreter for `version` (PATH, then pyenv's versions), or the current one as a fallback.

    The second item says whether the interpreter really is `version`.
    """
    pyenv_root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    # pyenv's shims only answer for the selected versions, and each answer is a pipeline of bash scripts (0.2 s,
    # every command paid it, often for a "command not found"): PATH without them, then pyenv's installations.
    shims = os.path.realpath(pyenv_root / "shims")
    path = os.pathsep.join(p for p in os.environ.get("PATH", os.defpath).split(os.pathsep)
                           if p and os.path.realpath(p) != shims)
    candidates = [shutil.which(f"python{version}", path=path)]
    for d in sorted((pyenv_root / "versions").glob(f"{version}.*"), reverse=True):
        candidates.append(str(d / "bin" / f"python{version}"))
    for exe in candidates:
        if exe and Path(exe).exists() and _version_of(exe) == version:
            return Path(exe), True
    return Path(sys.executable), f"{sys.version_info[0]}.{sys.version_info[1]}" == version


_versions: dict[str, str] = {}   # interpreter path -> "X.Y": a build asks up to 16 times, each a process


def _version_of(exe: str) -> str | None:
    if exe not in _versions:
        found = _ask_version(exe)
        if found is None:  # not there yet (a venv before it is made): ask again next time
            return None
        _versions[exe] = found
    return _versions[exe]


def _ask_version(exe: str) -> str | None:
    try:
        out = subprocess.run([exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _run(cmd: list[str], log: Path, *, cwd: Path | None = None, env: dict | None = None,
         timeout: float | None = None, step: str) -> subprocess.CompletedProcess:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as fh:
        fh.write(f"$ {' '.join(cmd)}\n")
        fh.flush()
        try:
            proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise EnvironmentBuildError(f"{step}: timed out after {timeout:.0f}s", log_path=str(log),
                                        log_tail=tail(log, _LOG_TAIL_LINES)) from None
    return proc


def _check(proc: subprocess.CompletedProcess, log: Path, step: str, hint: str | None = None) -> None:
    if proc.returncode != 0:
        raise EnvironmentBuildError(f"{step} failed (exit {proc.returncode})", log_path=str(log),
                                    log_tail=tail(log, _LOG_TAIL_LINES), hint=hint)


def resolve_date(manifest: Manifest, co: Checkout) -> dt.date | None:
    """The day the dependencies are resolved as of: `install.resolve_as_of`, else a git source's commit
    date; None resolves today's releases (sdists and directories carry no date of their own)."""
    if manifest.install.resolve_as_of is False:  # the manifest asks for today's releases
        return None
    if manifest.install.resolve_as_of is not None:
        return manifest.install.resolve_as_of
    return commit_date(co) if co.kind == "git" else None


def pin_requirements(manifest: Manifest, tree: Path, folder: Path, *, python: Path, as_of: dt.date, log: Path,
                     env: dict[str, str]) -> Path:
    """`folder/resolved.txt`: the manifest's requirements (`folder/requirements.in`) pinned as of `as_of` for
    `python`, for a venv and an image's wheelhouse alike (see coderun.envs.resolve)."""
    req_in, resolved = folder / "requirements.in", folder / "resolved.txt"
    req_in.write_text(requirements_in(manifest, tree))
    compile_requirements(req_in, resolved, python=python, as_of=as_of, pip=pip_command(),
                         pip_args=list(manifest.install.pip_args), log=log, env=env, tree=tree)
    return resolved


def requirements_in(manifest: Manifest, tree: Path) -> str:
    """The manifest's requirements as a requirements file for resolving as of a date."""
    args = pip_requirements(manifest, tree, dated=True)
    lines, i = [], 0
    while i < len(args):  # pip arguments to requirements-file lines: `-r FILE` stays one line
        if args[i] == "-r":
            lines.append(f"-r {args[i + 1]}")
            i += 2
        else:
            lines.append(args[i])
            i += 1
    return "\n".join(lines) + "\n"


def pip_requirements(manifest: Manifest, tree: Path, *, dated: bool = False) -> list[str]:
    """pip arguments that install the manifest's dependencies (and test tooling) from `tree`. `dated`:
    they are resolved as of a date, and the test tooling needs floors of its own (see coderun.envs.resolve)."""
    args: list[str] = list(manifest.install.requirements)
    for f in manifest.install.requirements_files:
        if not (tree / f).is_file():
            raise EnvironmentBuildError(f"{manifest.name}: requirements file {f} is not in the source tree",
                                        hint="fix install.requirements_files in the manifest")
        args += ["-r", str(tree / f)]
    if manifest.install.project or manifest.install.extras:
        extras = f"[{','.join(manifest.install.extras)}]" if manifest.install.extras else ""
        args.append(f"{tree}{extras}")
    named = {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() for r in manifest.install.requirements}
    tooling = TOOLING if dated else _TOOLING
    args += [spec for name, spec in tooling.items() if name not in named]
    return args


def _venv_env(venv: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "PYENV_VERSION"))}
    env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


def build_local_env(manifest: Manifest, settings: Settings, *, force: bool = False,
                    on_event: Listener = silent) -> LocalEnv:
    co = checkout(manifest, settings)
    env = _env_for(manifest, settings, co)
    if env.ready and not force:
        return env
    if env.installed and not force:
        return _rerun_baseline(manifest, env, co, on_event)
    python, exact = find_python(manifest.python)
    if not exact:
        on_event(Note("", f"warning: no python{manifest.python} on PATH; {manifest.name} is built with "
                          f"{python} ({sys.version.split()[0]}) instead, results may differ", "warning"))
    shutil.rmtree(env.path, ignore_errors=True)
    env.logs.mkdir(parents=True)
    started = time.monotonic()
    with Steps(f"env {manifest.name}", on_event) as steps, \
            tempfile.TemporaryDirectory(prefix="coderun-build-") as tmp:
        venv = env.path / "venv"
        with steps.step("create venv"):
            make_venv(python, venv, lambda argv, what: _check(_run(argv, env.logs / "venv.log", step="venv"),
                                                              env.logs / "venv.log", what))
        venv_env = _venv_env(venv)
        if manifest.install.pre_install:
            _prepare_tree(manifest, co.path, env, venv_env, steps)
        # pip and the baseline run in a throwaway copy: in-tree builds and caches stay out of the kept tree.
        tree = Path(tmp) / "tree"
        shutil.copytree(env.checkout.path, tree, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        _install(manifest, env, tree, venv_env, steps)
        # The venv is complete: recorded now, so a baseline that fails is re-run with it (`tests` fixed).
        meta = {"project": manifest.name, "key": env.key, "tests_key": None, "commit": co.commit,
                "upstream_commit": co.upstream_commit, "python": str(python),
                "resolved_as_of": env.as_of.isoformat() if env.as_of else None,
                "python_version": _version_of(str(env.python)), "exact_python": exact,
                "install_seconds": round(time.monotonic() - started, 1)}
        (env.path / "env.json").write_text(json.dumps(meta, indent=1))
        with steps.step("baseline test run"):
            baseline = run_baseline(manifest, env, tree, venv_env)
    _say_timed_out(manifest, baseline, on_event)
    _record_baseline(env, baseline, build_seconds=round(time.monotonic() - started, 1))
    return env


def _install(manifest: Manifest, env: LocalEnv, tree: Path, venv_env: dict[str, str], steps: Steps) -> None:
    """Pin the dependencies (as of the env's date), install them and record what got installed."""
    if env.as_of is not None:
        with steps.step(f"resolve dependencies as of {env.as_of}"):
            pin_requirements(manifest, tree, env.path, python=env.python, as_of=env.as_of,
                             log=env.logs / "resolve.log", env=venv_env)
    with steps.step("install dependencies"):
        log = env.logs / "pip.log"
        reqs = ["-r", str(env.resolved_path)] if env.as_of else pip_requirements(manifest, tree)
        if env.as_of and not manifest.install.pip_args:  # pip_args are pip's: pip installs everything then
            own = install_pinned(env.resolved_path, python=env.python, pip=pip_command(), log=env.logs / "uv.log",
                                 env=venv_env)
            if own is not None:  # the pins are in; pip installs the project's own line alone, or nothing
                reqs = ["--no-deps", *own] if own else []
            else:
                log.parent.mkdir(parents=True, exist_ok=True)
                log.write_text("# uv could not install the pinned set (see uv.log): pip installs it\n")
        elif not manifest.install.pip_args and install_named(reqs, python=env.python, pip=pip_command(),
                                                             log=env.logs / "uv.log", env=venv_env):
            reqs = []
        if reqs:
            cmd = [str(env.python), "-m", "pip", "install", "--disable-pip-version-check",
                   *manifest.install.pip_args, *reqs]
            proc = _run(cmd, log, cwd=tree, env=venv_env, step="pip install")
            _check(proc, log, "pip install", hint=install_failure(log, manifest) if proc.returncode else None)
    with steps.step("record installed versions"):
        record_packages(env)


def _record_baseline(env: LocalEnv, baseline: Baseline, **extra: object) -> None:
    """Keep the baseline, and mark the env ready for the `tests` section it was recorded with."""
    env.baseline_path.write_text(baseline.model_dump_json(indent=1))
    meta_path = env.path / "env.json"
    meta = json.loads(meta_path.read_text())
    meta.update(tests_key=env.tests_key, commit=env.checkout.commit, counts=baseline.counts(), **extra)
    meta_path.write_text(json.dumps(meta, indent=1))


def record_packages(env: LocalEnv) -> ProjectEnvironment:
    """List what is installed in the venv (its own python answers) and keep it in packages.json."""
    log = env.logs / "packages.log"
    log.unlink(missing_ok=True)
    proc = _run([str(env.python), "-I", "-c", PACKAGES_SCRIPT], log, env=_venv_env(env.path / "venv"),
                timeout=120, step="listing installed versions")
    _check(proc, log, "listing installed versions")
    record = project_environment(log.read_text(errors="replace"), project=env.project, backend="local",
                                 where=str(env.path), log_path=str(log))
    env.packages_path.write_text(record.model_dump_json(indent=1))
    return record


def local_packages(env: LocalEnv) -> ProjectEnvironment:
    """The venv's recorded versions; recorded now for a venv built before coderun kept them."""
    try:
        return ProjectEnvironment.model_validate_json(env.packages_path.read_text())
    except (OSError, ValueError):
        return record_packages(env)


def _prepare_tree(manifest: Manifest, source: Path, env: LocalEnv, venv_env: dict[str, str], steps: Steps) -> None:
    """Copy the checkout to `env.checkout.path` and run the manifest's pre_install commands there."""
    shutil.copytree(source, env.checkout.path, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    log = env.logs / "pre_install.log"
    for i, command in enumerate(manifest.install.pre_install):
        with steps.step(f"pre_install {i + 1}"):
            _check(_run(["sh", "-c", command], log, cwd=env.checkout.path, env=venv_env, step="pre_install"),
                   log, f"pre_install command {command!r}")


def _rerun_baseline(manifest: Manifest, env: LocalEnv, co: Checkout, on_event: Listener) -> LocalEnv:
    """The manifest's `tests` (or the supplementary tests) changed but not what installs the venv: record the
    baseline again with the venv as it is. A tree prepared by pre_install is prepared again from the new
    checkout when the checkout changed."""
    venv_env = _venv_env(env.path / "venv")
    with Steps(f"env {manifest.name}", on_event) as steps, \
            tempfile.TemporaryDirectory(prefix="coderun-build-") as tmp:
        if manifest.install.pre_install and _recorded(env).get("commit") != co.commit:
            shutil.rmtree(env.checkout.path, ignore_errors=True)
            _prepare_tree(manifest, co.path, env, venv_env, steps)
        tree = Path(tmp) / "tree"
        shutil.copytree(env.checkout.path, tree, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        with steps.step("baseline test run (the venv is reused: only the tests changed)"):
            baseline = run_baseline(manifest, env, tree, venv_env)
    _say_timed_out(manifest, baseline, on_event)
    _record_baseline(env, baseline)
    return env


def _recorded(env: LocalEnv) -> dict:
    try:
        return json.loads((env.path / "env.json").read_text())
    except (OSError, ValueError):
        return {}


def run_baseline(manifest: Manifest, env: LocalEnv, tree: Path, venv_env: dict[str, str]) -> Baseline:
    """The whole suite once on the original, no test longer than the per-test limit (coderun_baseline)."""
    junit = env.logs / "baseline-junit.xml"
    log = env.logs / "baseline.log"
    records = env.logs / "baseline-limit"
    shutil.rmtree(records, ignore_errors=True)
    harness = install_limit(records / "harness")
    cmd = baseline_command(manifest, env.python, harness=harness, out=records, junit=junit, rootdir=tree)
    started = time.monotonic()
    with start_services(manifest.tests.services) as services:
        t_env = limit_env(manifest, expand(test_env(manifest, tree), services.env), harness)
        # the runner bounds each attempt by tests.timeout; this bounds it, should the runner itself hang
        with own_tmp({**venv_env, **t_env}) as run_env:
            proc = _run(cmd, log, cwd=tree, env=run_env, timeout=manifest.tests.timeout * (ATTEMPTS + 1),
                        step="baseline test run")
    if proc.returncode not in (0, 1) or not junit.is_file():
        cause, hint = baseline_failure(log, manifest, proc.returncode)
        raise EnvironmentBuildError(
            f"{manifest.name}: the test suite did not run (pytest exit {proc.returncode}): {cause}",
            log_path=str(log), log_tail=tail(log, _LOG_TAIL_LINES), hint=hint)
    timed_out = timed_out_tests(_read(records / "limit.log"), _read(records / "ended.json"))
    return Baseline(project=manifest.name, commit=env.checkout.commit,
                    python=_version_of(str(env.python)) or manifest.python, backend="local",
                    tests=parse_junit(junit, rootdir=tree), ignored=[t.test for t in manifest.tests.ignore],
                    timed_out=timed_out, duration=round(time.monotonic() - started, 2), exit_code=proc.returncode)


def _say_timed_out(manifest: Manifest, baseline: Baseline, on_event: Listener) -> None:
    if baseline.timed_out:
        on_event(Note("", timed_out_note(manifest, baseline), "warning"))


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.is_file() else ""
