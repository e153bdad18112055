"""Docker environments: one image per project, built offline, layered and cached.

    coderun/base:py3.9-rootfs-<k>     Python, venv at /opt/venv, user `coderun`   (base_image.py)
    coderun/<project>:deps-<k>        + the wheelhouse built on the host, installed with --no-index
    coderun/<project>:src-<k>         + the worktree at the recorded commit, at /work/project
    coderun/<project>:<k>             + the baseline test run, kept in /opt/coderun/baseline/

Each key hashes everything that built its layer and the layer below, so an unchanged project is one
image lookup, and a changed test command rebuilds only the baseline layer. The same manifest gives the
same tag on any machine, so a missing image is pulled by it from a registry when one is set (registry.py). Every build runs with
networking disabled; the host downloads (PyPI, Debian) and the image never does. Layout in the image:
    /opt/venv                 the virtual environment (dependencies, pytest, coverage); on PATH
    /work/project             the tree while the baseline runs (after it: /opt/coderun/pristine, root-only)
    /opt/coderun/baseline/    junit.xml, output.log, exit_code, duration_ms, python_version (root-owned)
The host keeps build logs, wheelhouses, baseline records and each image's installed versions
(`packages/<project>-<key>.json`, a ProjectEnvironment listed by the image's python in a container
without network, and listed again when the image id changes) under $CODERUN_HOME/images/.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import docker
import docker.errors

from coderun.config import Settings
from coderun.envs import dockerlib, installed, registry, services
from coderun.envs.base_image import PYTHON_IN_IMAGE, BaseSpec, BaseStrategy, base_spec, build_base_image
from coderun.envs.diagnose import baseline_failure
from coderun.envs.local import find_python, pin_requirements, pip_requirements, resolve_date
from coderun.envs.logs import tail
from coderun.envs.sources import Checkout, checkout
from coderun.envs.testrun import baseline_command, limit_env, parse_junit, test_env, timed_out_tests
from coderun.envs.versions import PACKAGES_SCRIPT, project_environment
from coderun.errors import EnvironmentBuildError, SandboxError
from coderun.events import Listener, Note, StepDone, silent
from coderun.harness import HARNESS_DIR, LIMIT_FILES
from coderun.harness.coderun_baseline import ATTEMPTS
from coderun.manifests.schema import Manifest
from coderun.records import Baseline, ProjectEnvironment

PROJECT_DIR = "/work/project"
PRISTINE_DIR = "/opt/coderun/pristine"   # the tree once the baseline ran: readable by root only
BASELINE_DIR = "/opt/coderun/baseline"
HARNESS_IN_IMAGE = "/opt/coderun/harness"  # the baseline's per-test limit (root-owned, read-only)
IMAGE_USER = "coderun"


@dataclass(frozen=True)
class ImagePlan:
    """The tags of every layer of a project's image, computed before anything expensive."""

    manifest: Manifest
    checkout: Checkout
    base: BaseSpec
    deps_key: str
    source_key: str
    key: str

    @property
    def repo(self) -> str:
        return dockerlib.repo_name(self.manifest.name)

    @property
    def deps_tag(self) -> str:
        return f"{self.repo}:deps-{self.deps_key}"

    @property
    def source_tag(self) -> str:
        return f"{self.repo}:src-{self.source_key}"

    @property
    def tag(self) -> str:
        return f"{self.repo}:{self.key}"


@dataclass(frozen=True)
class ProjectImage:
    project: str
    tag: str
    base_tag: str
    deps_tag: str
    source_tag: str
    commit: str
    python: str
    baseline: Baseline
    environment: ProjectEnvironment  # the interpreter and every distribution installed in the image
    built: tuple[str, ...]  # the layers built by this call; empty for a cache hit
    pulled_from: str | None = None  # the registry it was pulled from by this call
    workdir: str = PRISTINE_DIR
    python_path: str = PYTHON_IN_IMAGE
    user: str = IMAGE_USER


# ---------------------------------------------------------------------------------------------
# Keys


def _requirement_files(manifest: Manifest, tree: Path) -> str:
    parts = []
    for f in manifest.install.requirements_files:
        path = tree / f
        if not path.is_file():
            raise EnvironmentBuildError(f"{manifest.name}: requirements file {f} is not in the source tree",
                                        hint="fix install.requirements_files in the manifest")
        parts.append(f"{f}\n{path.read_text(errors='replace')}")
    return "\n".join(parts)


def image_apt(manifest: Manifest) -> tuple[str, ...]:
    """The Debian packages of the image: install.apt and those of the services the tests need."""
    return tuple(dict.fromkeys((*manifest.install.apt, *services.apt_packages(manifest.tests.services))))


def plan_image(manifest: Manifest, settings: Settings, client: docker.DockerClient,
               base: BaseStrategy | None = None) -> ImagePlan:
    co = checkout(manifest, settings)
    spec = base_spec(client, manifest.python, base, image_apt(manifest))
    install = json.dumps(manifest.install.key_data(), sort_keys=True)
    # The project's own wheel (install.project / extras) is in the deps layer, so then it is per commit.
    needs_tree = manifest.install.project or bool(manifest.install.extras)
    as_of = resolve_date(manifest, co)  # a git source's commit date when the manifest gives none
    deps_key = dockerlib.content_hash(  # the source's own commit: supplementary tests install nothing
        spec.tag, spec.glibc, manifest.python, install, _requirement_files(manifest, co.path),
        co.upstream_commit if needs_tree else "", dockerlib.recipe_text("deps.Dockerfile"),
        *([f"as-of {as_of}"] if as_of else []))
    source_key = dockerlib.content_hash(
        f"{manifest.name}:deps-{deps_key}", co.commit, manifest.import_root, install,
        dockerlib.recipe_text("source.Dockerfile"))
    key = dockerlib.content_hash(
        f"{manifest.name}:src-{source_key}", baseline_script(manifest, co.commit),
        json.dumps(manifest.tests.model_dump(mode="json", exclude=manifest.tests.BASELINE_EXCLUDE), sort_keys=True),
        dockerlib.recipe_text("baseline.Dockerfile"), installed.SOURCE, *_limit_files().values())
    return ImagePlan(manifest, co, spec, deps_key, source_key, key)


# ---------------------------------------------------------------------------------------------
# Entry points


def build_project_image(manifest: Manifest, settings: Settings, base: BaseStrategy | str | None = None,
                        *, force: bool = False, client: docker.DockerClient | None = None,
                        on_event: Listener = silent) -> ProjectImage:
    """The project's image with its baseline; a cache hit when nothing that built it has changed, else
    pulled by its tag from `settings.registry` when that has it, else built."""
    client = client or dockerlib.docker_client()
    plan = plan_image(manifest, settings, client, BaseStrategy(base) if base else None)
    if not force and dockerlib.image_exists(client, plan.tag):
        return _image_record(plan, settings, client, built=())
    if not force and settings.registry and _pulled(plan, settings.registry, client, on_event):
        return replace(_image_record(plan, settings, client, built=()), pulled_from=settings.registry)
    built: list[str] = []
    base_image = build_base_image(manifest.python, settings, strategy=plan.base.strategy,
                                  apt=plan.base.apt, client=client, on_event=on_event)
    if base_image.built:
        built.append("base")
    need_deps = force or not dockerlib.image_exists(client, plan.deps_tag)
    need_source = need_deps or not dockerlib.image_exists(client, plan.source_tag)
    with tempfile.TemporaryDirectory(prefix="coderun-image-") as tmp:
        tree = _prepared_tree(plan, Path(tmp), settings, on_event) if need_source else None
        if need_deps:
            _build_deps(plan, tree, settings, client, on_event)
            built.append("deps")
        if need_source:
            _build_source(plan, tree, settings, client, on_event)
            built.append("source")
    _build_baseline(plan, settings, client, on_event)
    built.append("project")
    return _image_record(plan, settings, client, built=tuple(built))


def _pulled(plan: ImagePlan, registry_name: str, client: docker.DockerClient, on_event: Listener) -> bool:
    """Pulled from the registry; a registry that fails is said and the image is built instead (a cache)."""
    try:
        found = registry.pull_image(client, plan.tag, registry_name, on_event=on_event)
    except SandboxError as e:
        on_event(Note("", f"{e.message}: building {plan.tag} here instead", "warning"))
        return False
    if found:
        on_event(StepDone("", f"{plan.tag} pulled from {registry_name}", None))
    return found


def find_project_image(manifest: Manifest, settings: Settings, base: BaseStrategy | str | None = None,
                       *, client: docker.DockerClient | None = None) -> ProjectImage | None:
    """The project's current image when it is already built, else None (builds nothing)."""
    client = client or dockerlib.docker_client()
    plan = plan_image(manifest, settings, client, BaseStrategy(base) if base else None)
    if not dockerlib.image_exists(client, plan.tag):
        return None
    return _image_record(plan, settings, client, built=())


def push_project_image(manifest: Manifest, settings: Settings, registry_name: str, *,
                       client: docker.DockerClient | None = None,
                       on_event: Listener = silent) -> tuple[ProjectImage, str]:
    """Push the project's current image (built here) to a registry: (the image, its digest there)."""
    client = client or dockerlib.docker_client()
    image = find_project_image(manifest, settings, client=client)
    if image is None:
        raise EnvironmentBuildError(f"{manifest.name}: its current image is not built on this machine",
                                    hint=f"coderun images build {manifest.name}, then push")
    return image, registry.push_image(client, image.tag, registry_name, on_event=on_event)


def pull_project_image(manifest: Manifest, settings: Settings, registry_name: str, *,
                       client: docker.DockerClient | None = None, on_event: Listener = silent) -> ProjectImage:
    """The project's current image from a registry (a cache hit when it is here already); raises when the
    registry does not have it."""
    client = client or dockerlib.docker_client()
    plan = plan_image(manifest, settings, client)
    if dockerlib.image_exists(client, plan.tag):
        return _image_record(plan, settings, client, built=())
    if not registry.pull_image(client, plan.tag, registry_name, on_event=on_event):
        raise EnvironmentBuildError(f"{manifest.name}: {registry_name} has no {plan.tag}",
                                    hint=f"push it from a machine that built it: coderun images push "
                                         f"{manifest.name} --registry {registry_name}")
    return replace(_image_record(plan, settings, client, built=()), pulled_from=registry_name)


def _log(settings: Settings, plan: ImagePlan, layer: str, key: str) -> Path:
    return dockerlib.images_dir(settings) / "logs" / f"{plan.manifest.name}-{layer}-{key}.log"


# ---------------------------------------------------------------------------------------------
# Host side: the tree (after pre_install) and the wheelhouse


def _host_env(python: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = f"{python.parent}{os.pathsep}{env.get('PATH', '')}"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _host_python(manifest: Manifest) -> Path:
    python, exact = find_python(manifest.python)
    if not exact:
        raise EnvironmentBuildError(
            f"{manifest.name}: building wheels for Python {manifest.python} needs python{manifest.python} "
            "on the host (wheels must match the image's interpreter)",
            hint=f"install Python {manifest.python} (e.g. with pyenv) so that python{manifest.python} is on PATH")
    return python


def _prepared_tree(plan: ImagePlan, tmp: Path, settings: Settings, on_event: Listener) -> Path:
    """A copy of the worktree (without .git) after the manifest's pre_install commands."""
    tree = tmp / "project"
    shutil.copytree(plan.checkout.path, tree, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    if plan.manifest.install.pre_install:
        env = _host_env(_host_python(plan.manifest))
        log = _log(settings, plan, "pre_install", plan.source_key)
        log.unlink(missing_ok=True)
        for command in plan.manifest.install.pre_install:
            dockerlib.run_logged(["sh", "-c", command], log, cwd=tree, env=env, on_event=on_event,
                                 title=f"{plan.manifest.name}: pre_install {command!r}")
    return tree


def wheelhouse(plan: ImagePlan, tree: Path, settings: Settings, on_event: Listener) -> Path:
    """Wheels for every dependency, built on the host with the image's Python version (cached)."""
    out = dockerlib.images_dir(settings) / "wheels" / f"{plan.manifest.name}-{plan.deps_key}"
    if (out / ".complete").is_file():
        return out
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    python = _host_python(plan.manifest)
    log = _log(settings, plan, "wheels", plan.deps_key)
    log.unlink(missing_ok=True)
    # --use-pep517: an sdist without pyproject.toml still builds in an isolated env with `wheel`
    # (a legacy `setup.py bdist_wheel` fails when the host interpreter lacks it); pip_args may override.
    reqs = pip_requirements(plan.manifest, tree)
    as_of = resolve_date(plan.manifest, plan.checkout)
    if as_of is not None:  # the same pins as the local backend: the releases up to the project's date
        reqs = ["-r", str(pin_requirements(plan.manifest, tree, out, python=python, as_of=as_of,
                                           log=_log(settings, plan, "resolve", plan.deps_key),
                                           env=_host_env(python)))]
    cmd = [str(python), "-m", "pip", "wheel", "--wheel-dir", str(out),
           "--use-pep517", *plan.manifest.install.pip_args, *reqs]
    with tempfile.TemporaryDirectory(prefix="coderun-manylinux-") as policy:
        env = {**_host_env(python), "PYTHONPATH": _manylinux_policy(Path(policy), plan.base.glibc)}
        dockerlib.run_logged(cmd, log, cwd=tree, env=env, on_event=on_event,
                             title=f"{plan.manifest.name}: wheelhouse (Python {plan.manifest.python}, host)")
    (out / ".complete").write_text(shlex.join(cmd) + "\n")
    return out


def _manylinux_policy(directory: Path, glibc: str) -> str:
    """A `_manylinux` module (PEP 600) that stops the host's pip from choosing wheels which need a
    newer glibc than the image has; the host's own glibc may be newer. Returns the directory."""
    major, minor = (int(p) for p in glibc.split(".")[:2])
    (directory / "_manylinux.py").write_text(
        "# written by coderun: the image's glibc is the limit, not the host's\n"
        "def manylinux_compatible(major, minor, arch):\n"
        f"    return (major, minor) <= ({major}, {minor})\n")
    return str(directory)


# ---------------------------------------------------------------------------------------------
# Layers


def _build_deps(plan: ImagePlan, tree: Path, settings: Settings, client: docker.DockerClient,
                on_event: Listener) -> None:
    wheels = wheelhouse(plan, tree, settings, on_event)
    names = sorted(p.name for p in wheels.glob("*.whl"))
    requirements = "".join(f"/tmp/coderun-wheels/{n}\n" for n in names)
    context = dockerlib.Context(dockerlib.recipe_text("deps.Dockerfile"),
                                {"wheels/requirements.txt": requirements}, {"wheels": wheels},
                                exclude=(".git", ".complete"))
    dockerlib.build_image(
        client, context, tag=plan.deps_tag, buildargs={"BASE": plan.base.tag},
        labels=dockerlib.labels("deps", plan.deps_key, project=plan.manifest.name, python=plan.manifest.python),
        log_path=_log(settings, plan, "deps", plan.deps_key),
        title=f"{plan.manifest.name}: dependencies layer ({len(names)} wheels)", on_event=on_event)


def _build_source(plan: ImagePlan, tree: Path, settings: Settings, client: docker.DockerClient,
                  on_event: Listener) -> None:
    context = dockerlib.Context(dockerlib.recipe_text("source.Dockerfile"), {}, {"project": tree})
    dockerlib.build_image(
        client, context, tag=plan.source_tag,
        buildargs={"BASE": plan.deps_tag, "IMPORT_ROOT": plan.manifest.import_root},
        labels=dockerlib.labels("source", plan.source_key, project=plan.manifest.name,
                                commit=plan.checkout.commit),
        log_path=_log(settings, plan, "source", plan.source_key),
        title=f"{plan.manifest.name}: source layer ({plan.checkout.commit[:10]})", on_event=on_event)


def baseline_script(manifest: Manifest, commit: str) -> str:
    """The shell script that runs the tests once inside the image, on a scratch copy of the tree."""
    scratch = "/tmp/coderun-baseline/tree"
    out = "/tmp/coderun-baseline/out"
    cmd = baseline_command(manifest, PYTHON_IN_IMAGE, harness=HARNESS_IN_IMAGE, out=out, junit=f"{out}/junit.xml",
                           rootdir=scratch)
    env = [f"{k}={v}" for k, v in sorted(limit_env(manifest, test_env(manifest, scratch), HARNESS_IN_IMAGE).items())]
    # coderun_baseline bounds each attempt by tests.timeout; this bounds it, should it hang itself
    timeout = ["timeout", "-k", "10", str(int(manifest.tests.timeout * (ATTEMPTS + 1)))]
    launcher: list[str] = []
    setup: list[str] = []
    if manifest.tests.services:  # started (as coderun) around the test run, their variables expanded into env
        script = "/tmp/coderun-baseline/services.py"
        launcher = [PYTHON_IN_IMAGE, "-I", script, "run", *manifest.tests.services, "--"]
        setup = [f"cat > {script} <<'CODERUN_SERVICES_PY'", services.SOURCE.rstrip("\n"), "CODERUN_SERVICES_PY"]
    run = shlex.join(["env", *env, *launcher, *timeout, *cmd])
    return "\n".join([
        f"# coderun baseline of {manifest.name} at {commit}",
        "set -u",
        f"mkdir -p {out}",
        *setup,
        f"cp -a {PROJECT_DIR} {scratch}",
        f"cd {scratch}",
        f"{PYTHON_IN_IMAGE} -c 'import sys; print(\"%d.%d.%d\" % sys.version_info[:3])' > {out}/python_version",
        "start=$(date +%s%N)",
        f"( {run}; echo $? > {out}/exit_code ) 2>&1 | tee {out}/output.log",
        "end=$(date +%s%N)",
        f"echo $(( (end - start) / 1000000 )) > {out}/duration_ms",
        "",
    ])


def _limit_files() -> dict[str, str]:
    """The per-test limit and the baseline's runner, for the baseline layer's harness folder."""
    return {f"harness/{name}": (HARNESS_DIR / name).read_text() for name in LIMIT_FILES}


def _build_baseline(plan: ImagePlan, settings: Settings, client: docker.DockerClient,
                    on_event: Listener) -> None:
    m = plan.manifest
    files = {"baseline.sh": baseline_script(m, plan.checkout.commit), "installed.py": installed.SOURCE,
             **_limit_files()}
    context = dockerlib.Context(dockerlib.recipe_text("baseline.Dockerfile"), files, {})
    log = _log(settings, plan, "baseline", plan.key)
    dockerlib.build_image(
        client, context, tag=plan.tag, buildargs={"BASE": plan.source_tag},
        labels=dockerlib.labels("project", plan.key, project=m.name, python=m.python,
                                commit=plan.checkout.commit),
        log_path=log, title=f"{m.name}: baseline test run", on_event=on_event)
    try:
        read_baseline(plan, client, settings)
    except EnvironmentBuildError:
        # A tag must only ever name an image with a usable baseline, or the next build is a false hit.
        client.images.remove(plan.tag, noprune=False)
        raise


# ---------------------------------------------------------------------------------------------
# Reading the baseline back


def _baseline_path(settings: Settings, plan: ImagePlan) -> Path:
    path = dockerlib.images_dir(settings) / "baselines" / f"{plan.manifest.name}-{plan.key}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def read_baseline(plan: ImagePlan, client: docker.DockerClient, settings: Settings) -> Baseline:
    m = plan.manifest
    files = dockerlib.read_image_files(client, plan.tag, BASELINE_DIR)
    log = _log(settings, plan, "baseline-output", plan.key)
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_bytes(files.get("output.log", b""))
    exit_code = int(files.get("exit_code", b"-1").strip() or -1)
    if exit_code not in (0, 1) or "junit.xml" not in files:
        cause, hint = baseline_failure(log, m, exit_code)
        raise EnvironmentBuildError(
            f"{m.name}: the test suite did not run in the image (pytest exit {exit_code}): {cause}",
            log_path=str(log), log_tail=tail(log), hint=f"{hint} (exit 124/137: tests.timeout)")
    with tempfile.NamedTemporaryFile(suffix=".xml") as junit:
        junit.write(files["junit.xml"])
        junit.flush()
        tests = parse_junit(junit.name, rootdir=plan.checkout.path)  # the same tree as /work/project
    return Baseline(project=m.name, commit=plan.checkout.commit,
                    python=files.get("python_version", m.python.encode()).decode().strip(),
                    backend="docker", tests=tests, ignored=[t.test for t in m.tests.ignore],
                    timed_out=timed_out_tests(files.get("limit.log", b"").decode(errors="replace"),
                                              files.get("ended.json", b"").decode(errors="replace")),
                    duration=int(files.get("duration_ms", b"0").strip() or 0) / 1000, exit_code=exit_code)


def _image_record(plan: ImagePlan, settings: Settings, client: docker.DockerClient,
                  built: tuple[str, ...]) -> ProjectImage:
    # Parsed from the image every time (~0.2 s): the junit report in the image is the record, and a
    # newer coderun may read it differently; the JSON beside the logs is a copy for people to open.
    baseline = read_baseline(plan, client, settings)
    _baseline_path(settings, plan).write_text(baseline.model_dump_json(indent=1))
    return ProjectImage(project=plan.manifest.name, tag=plan.tag, base_tag=plan.base.tag,
                        deps_tag=plan.deps_tag, source_tag=plan.source_tag, commit=plan.checkout.commit,
                        python=baseline.python, baseline=baseline,
                        environment=image_packages(plan, settings, client), built=built)


# ---------------------------------------------------------------------------------------------
# Installed versions


def image_packages(plan: ImagePlan, settings: Settings, client: docker.DockerClient) -> ProjectEnvironment:
    """What is installed in the image: recorded on the host when the image (by id) is first seen, so an
    image built before coderun kept versions gets its record at the next run instead of failing."""
    try:
        image_id = client.images.get(plan.tag).id
    except docker.errors.DockerException as e:
        raise SandboxError(f"cannot inspect the image {plan.tag}: {e}") from None
    where = f"{plan.tag} ({image_id})"
    path = dockerlib.images_dir(settings) / "packages" / f"{plan.manifest.name}-{plan.key}.json"
    try:
        record = ProjectEnvironment.model_validate_json(path.read_text())
        if record.where == where:
            return record
    except (OSError, ValueError):
        pass  # not recorded yet: list it now
    log = _log(settings, plan, "packages", plan.key)
    output = dockerlib.run_in_image(client, plan.tag, IMAGE_USER, [PYTHON_IN_IMAGE, "-I", "-c", PACKAGES_SCRIPT])
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(output)
    record = project_environment(output, project=plan.manifest.name, backend="docker", where=where,
                                 log_path=str(log))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(record.model_dump_json(indent=1))
    return record
