"""Docker environment builder against a real engine: base image, layered project image, cache hits,
no network inside, non-root user. Skipped with the reason when no engine answers."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import uuid

import pytest
from typer.testing import CliRunner

from coderun.cli.main import app
from coderun.config import load_settings
from coderun.envs import dockerlib
from coderun.envs.base_image import BaseStrategy, RootfsRecipe, base_spec, build_base_image, choose_strategy
from coderun.envs.docker import PRISTINE_DIR, PROJECT_DIR, build_project_image, find_project_image
from coderun.envs.local import find_python
from coderun.errors import EnvironmentBuildError, UsageError
from coderun.manifests.schema import load_manifest
from tests.helpers import HANGING_TESTS, TINY_PROJECT, write_tree

HOST_PYTHON = f"{sys.version_info[0]}.{sys.version_info[1]}"
pytestmark = [pytest.mark.docker, pytest.mark.slow]
runner = CliRunner()


def _manifest(root, extra_tests=""):
    """The tiny project under a name of its own per test session: image tags are global to the
    engine, so a fixed name would make a later session's "first build" a cache hit."""
    name = (root / "name").read_text()
    f = root / f"{name}.yaml"
    f.write_text(f"name: {name}\nsource: {{path: calc}}\npython: '{HOST_PYTHON}'\n"
                 f"tests:\n  paths: [tests]\n{extra_tests}")
    return load_manifest(f)


def _run(client, tag, command, user=None):
    """Run `command` in a throwaway container with networking disabled (as the image's user unless `user`
    is given); its output, errors included."""
    container = client.containers.create(tag, command, network_mode="none", user=user or "")
    try:
        container.start()
        container.wait()
        return container.logs(stdout=True, stderr=True).decode().strip()
    finally:
        container.remove(force=True)


@pytest.fixture(scope="module")
def project(tmp_path_factory, docker_engine):
    """A tiny local project and the first build of its image (home and project in a temp dir)."""
    root = tmp_path_factory.mktemp("docker-project")
    write_tree(root / "calc", TINY_PROJECT)
    (root / "name").write_text(f"calc-{uuid.uuid4().hex[:8]}")
    mp = pytest.MonkeyPatch()
    mp.setenv("CODERUN_HOME", str(root / "home"))
    settings = load_settings()
    manifest = _manifest(root)
    first = build_project_image(manifest, settings, client=docker_engine)
    yield root, settings, manifest, first
    mp.undo()
    for image in docker_engine.images.list(name=first.tag.split(":")[0]):
        for tag in image.tags:
            docker_engine.images.remove(tag, force=True)


def test_base_image_for_host_python(docker_engine, tmp_path):
    settings = load_settings()
    image = build_base_image(HOST_PYTHON, settings, client=docker_engine)
    version = _run(docker_engine, image.tag,
                   ["/opt/venv/bin/python", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"])
    assert version == HOST_PYTHON
    assert build_base_image(HOST_PYTHON, settings, client=docker_engine).built is False


def _copyable_python() -> str:
    """A Python on this machine that no Debian suite ships (rootfs.yaml), or a skip."""
    for version in ("3.10", "3.8", "3.7", "3.12"):
        if version not in RootfsRecipe.load().suites and find_python(version)[1]:
            return version
    pytest.skip("no Python here that no Debian suite ships (3.7, 3.8, 3.10, 3.12)")


def test_base_image_for_a_python_no_debian_suite_ships(docker_engine):
    """The Python 3.7, 3.8 and 3.10 projects had no base image: the rootfs strategy knew only 3.9, 3.11, 3.13."""
    version = _copyable_python()
    host, _ = find_python(version)
    settings = load_settings()
    image = build_base_image(version, settings, strategy=BaseStrategy.ROOTFS, client=docker_engine)
    code = "import sys, ssl, sqlite3, ctypes, lzma; print(sys.version)"
    inside = _run(docker_engine, image.tag, ["/opt/venv/bin/python", "-c", code])
    assert inside == subprocess.run([str(host), "-c", code], capture_output=True, text=True).stdout.strip()
    assert build_base_image(version, settings, strategy=BaseStrategy.ROOTFS, client=docker_engine).built is False


def test_first_build_records_baseline_from_inside_the_image(project):
    _, _, _, first = project
    assert set(first.built) >= {"deps", "source", "project"}
    assert first.baseline.backend == "docker"
    assert first.baseline.python.startswith(HOST_PYTHON + ".")
    assert {t.nodeid: t.outcome for t in first.baseline.tests} == {
        "tests/test_ops.py::test_add": "passed", "tests/test_ops.py::test_add_negative": "passed",
        "tests/test_ops.py::test_unrelated": "passed"}


def test_second_build_is_a_cache_hit(project, docker_engine):
    _, settings, manifest, first = project
    again = build_project_image(manifest, settings, client=docker_engine)
    assert again.built == () and again.tag == first.tag and again.baseline == first.baseline
    assert find_project_image(manifest, settings, client=docker_engine).tag == first.tag


def test_image_records_its_installed_versions(project, docker_engine):
    """Each image's packages are listed by its own python; an image built before coderun recorded them
    (no record on the host) gets one when next used instead of failing."""
    _, settings, manifest, first = project
    env = first.environment
    in_image = _run(docker_engine, first.tag, ["/opt/venv/bin/python", "-c", "import pytest; print(pytest.__version__)"])
    image_id = docker_engine.images.get(first.tag).id
    assert env.backend == "docker" and env.where == f"{first.tag} ({image_id})"
    assert env.version_of("pytest") == in_image and env.python == first.baseline.python
    record = settings.home / "images" / "packages" / f"{manifest.name}-{first.tag.split(':')[-1]}.json"
    assert record.is_file()
    assert build_project_image(manifest, settings, client=docker_engine).environment == env  # read back
    record.unlink()
    again = find_project_image(manifest, settings, client=docker_engine).environment
    assert record.is_file() and again.packages == env.packages


def test_changed_test_command_rebuilds_only_the_baseline(project, docker_engine):
    root, settings, _, first = project
    changed = _manifest(root, extra_tests="  args: ['-k', 'not unrelated']\n")
    image = build_project_image(changed, settings, client=docker_engine)
    assert image.built == ("project",)
    assert image.tag != first.tag
    assert (image.deps_tag, image.source_tag) == (first.deps_tag, first.source_tag)
    assert image.baseline.counts()["passed"] == 2


def test_baseline_layer_stops_a_hanging_test_and_leaves_it_out(tmp_path, monkeypatch, docker_engine):
    """The image's baseline ran the suite without a per-test limit, so one hanging test stalled the build."""
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    write_tree(tmp_path / "calc", TINY_PROJECT)
    write_tree(tmp_path, HANGING_TESTS)
    (tmp_path / "name").write_text(f"calc-hang-{uuid.uuid4().hex[:8]}")
    manifest = _manifest(tmp_path, "  timeout_per_test: 2\n  timeout: 300\n")
    try:
        image = build_project_image(manifest, load_settings(), client=docker_engine)
        assert set(image.baseline.timed_out) == {"tests/test_hang.py::test_sleeps_forever",
                                                 "tests/test_hang.py::test_swallows_the_alarm"}
        assert image.baseline.counts()["passed"] == 3
    finally:
        for im in docker_engine.images.list(name=dockerlib.repo_name(manifest.name)):
            for tag in im.tags:
                docker_engine.images.remove(tag, force=True)


def test_changed_source_keeps_the_dependencies_layer(project, docker_engine):
    root, settings, manifest, first = project
    ops = root / "calc" / "calc" / "ops.py"
    ops.write_text(ops.read_text().replace("result = total", "result = total  # touched"))
    image = build_project_image(manifest, settings, client=docker_engine)
    assert image.built == ("source", "project")
    assert image.deps_tag == first.deps_tag and image.commit != first.commit
    assert "# touched" in _run(docker_engine, image.tag, ["cat", f"{PRISTINE_DIR}/calc/ops.py"], user="root")


def test_container_has_only_loopback_and_runs_as_non_root(project, docker_engine):
    _, _, _, first = project
    assert _run(docker_engine, first.tag, ["ls", "/sys/class/net"]).split() == ["lo"]
    assert _run(docker_engine, first.tag, ["id", "-un"]) == "coderun"
    assert _run(docker_engine, first.tag, ["id", "-u"]) != "0"
    # The tree is pristine (no test artefacts), where only root reads it: no answer key for a sample (issue 34).
    assert "__pycache__" not in _run(docker_engine, first.tag, ["find", PRISTINE_DIR], user="root")
    assert "calc/ops.py" in _run(docker_engine, first.tag, ["find", PRISTINE_DIR], user="root")
    assert "Permission denied" in _run(docker_engine, first.tag, ["cat", f"{PRISTINE_DIR}/calc/ops.py"])
    assert _run(docker_engine, first.tag, ["ls", "-A", PROJECT_DIR]) == ""


def test_failed_baseline_shows_log_tail_and_leaves_no_tag(project, docker_engine):
    """A tag must never name an image without a usable baseline, or the next build is a false hit."""
    root, settings, _, _ = project
    broken = _manifest(root, extra_tests="  args: ['--no-such-pytest-option']\n")
    with pytest.raises(EnvironmentBuildError) as info:
        build_project_image(broken, settings, client=docker_engine)
    err = info.value
    assert "did not run" in err.message and err.log_path and "no-such-pytest-option" in err.log_tail
    assert find_project_image(broken, settings, client=docker_engine) is None


def test_images_cli_lists_and_dry_run_prunes(project):
    _, _, _, first = project
    listed = runner.invoke(app, ["images", "list", "--json"])
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.stdout)
    mine = [r for r in rows if first.tag in r["tags"]]
    assert mine and mine[0]["layer"] == "project" and mine[0]["size_mb"] > 0
    pruned = runner.invoke(app, ["images", "prune", "--dry-run", "--json"])
    assert pruned.exit_code == 0, pruned.output
    assert json.loads(pruned.stdout)["dry_run"] is True


def test_version_no_strategy_provides_is_a_clear_error(docker_engine):
    """3.4: no Debian suite ships it and no machine here has it to copy."""
    with pytest.raises(UsageError) as info:
        choose_strategy(docker_engine, "3.4", BaseStrategy.ROOTFS)
    assert "3.9 (bullseye)" in info.value.message and "no python3.4 on this machine" in info.value.message
    assert "--base pull" in info.value.hint
    if not docker_engine.images.list(name="python:3.4-slim"):
        with pytest.raises(EnvironmentBuildError, match="no base image strategy can provide Python 3.4"):
            base_spec(docker_engine, "3.4")


STAND_IN_LABEL = "coderun.test-stand-in"


def _stand_in_slim(client, version: str) -> str:
    """A stand-in python:X.Y-slim: the host suite's rootfs image under a label that marks it as ours, so
    the leftover of a killed run is removed, never mistaken for a real image (which makes the test skip).
    3.13: rootfs can provide it but no other docker test builds it, so tests running beside this one in
    the same engine never see the stand-in (with 3.11 one did, and chose `pull`)."""
    ref = f"python:{version}-slim"
    for image in client.images.list(name=ref):
        if STAND_IN_LABEL not in (image.labels or {}):
            pytest.skip(f"{ref} is a real image here; the test does not touch it")
        client.images.remove(ref, force=True)
    rootfs = base_spec(client, HOST_PYTHON, BaseStrategy.ROOTFS).parent
    build_base_image(HOST_PYTHON, load_settings(), strategy=BaseStrategy.ROOTFS, client=client)
    dockerfile = f"FROM {rootfs}\nLABEL {STAND_IN_LABEL}=1\n".encode()
    client.images.build(fileobj=io.BytesIO(dockerfile), tag=ref, network_mode="none", rm=True)
    return ref


def test_pull_strategy_uses_a_python_slim_image_already_in_the_engine(docker_engine):
    """Auto-selection never contacts a registry: `pull` is chosen only when python:X.Y-slim is local,
    and not for a project that needs Debian packages, which only a rootfs can provide offline."""
    version = "3.13"
    ref = _stand_in_slim(docker_engine, version)
    try:
        assert choose_strategy(docker_engine, version, None) is BaseStrategy.PULL
        assert choose_strategy(docker_engine, version, None, ("redis-server",)) is BaseStrategy.ROOTFS
        with pytest.raises(UsageError, match="redis-server .* need the rootfs base strategy"):
            base_spec(docker_engine, version, BaseStrategy.PULL, ("redis-server",))
        image = build_base_image(version, load_settings(), client=docker_engine)
        assert image.strategy is BaseStrategy.PULL and image.parent == ref
        assert _run(docker_engine, image.tag, ["sh", "-c", "id -u coderun && test -x /opt/venv/bin/python"])
        docker_engine.images.remove(image.tag)
    finally:
        docker_engine.images.remove(ref, force=True)
    assert choose_strategy(docker_engine, version, None) is BaseStrategy.ROOTFS


def test_pre_install_change_to_a_task_file_survives_docker_evaluation(tmp_path, monkeypatch, docker_engine):
    """eval on docker read a task's original file from the bare checkout, so pre_install's edit was undone."""
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    write_tree(tmp_path / "gen", {
        "gen/__init__.py": "",
        "gen/scale.py": 'FACTOR = 1\n\n\ndef scale(values):\n    """Return every value multiplied by FACTOR."""\n'
                        "    out = []\n    for v in values:\n        out.append(v * FACTOR)\n    return out\n",
        "tests/test_scale.py": "from gen.scale import scale\n\n\ndef test_scale():\n    assert scale([1, 2]) == [3, 6]\n"})
    name = f"gen-{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.yaml").write_text(
        f"name: {name}\nsource: {{path: gen}}\npython: '{HOST_PYTHON}'\n"
        "install:\n  pre_install: [\"sed -i 's/^FACTOR = 1$/FACTOR = 3/' gen/scale.py\"]\ntests:\n  paths: [tests]\n")
    try:
        res = runner.invoke(app, ["tasks", "build", str(tmp_path / f"{name}.yaml"), "--backend", "docker"])
        assert res.exit_code == 0, res.output
        res = runner.invoke(app, ["eval", "--backend", "docker", "--ground-truth", "--run-dir", str(tmp_path / "gt"),
                                  "--projects", str(tmp_path), "--project", name])
        assert res.exit_code == 0, res.output
        report = json.loads((tmp_path / "gt" / "report.json").read_text())
        assert report["overall"]["tasks"] == 1 and report["overall"]["pass@k"]["1"] == 1.0
    finally:
        for image in docker_engine.images.list(name=f"coderun/{name}"):
            for tag in image.tags:
                docker_engine.images.remove(tag, force=True)


def test_an_installed_project_leaves_no_copy_in_the_image(tmp_path, monkeypatch, docker_engine):
    """install.project puts the project's modules in the venv: the originals, readable by every sample even
    though the tests import the project from their copy (issue 34). The image's last layer deletes them; the
    distribution's metadata stays."""
    write_tree(tmp_path / "calc", {**TINY_PROJECT, "pyproject.toml": (
        "[build-system]\nrequires = ['setuptools']\nbuild-backend = 'setuptools.build_meta'\n"
        "[project]\nname = 'calc'\nversion = '1.0'\n[tool.setuptools]\npackages = ['calc']\n")})
    name = f"calc-installed-{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.yaml").write_text(f"name: {name}\nsource: {{path: calc}}\npython: '{HOST_PYTHON}'\n"
                                           "install:\n  project: true\ntests:\n  paths: [tests]\n")
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    image = build_project_image(load_manifest(tmp_path / f"{name}.yaml"), load_settings(), client=docker_engine)
    try:
        assert image.baseline.counts()["passed"] == 3
        found = _run(docker_engine, image.tag, ["python", "-c", "import importlib.metadata as m, glob, site; "
                     "print(m.version('calc'), glob.glob(site.getsitepackages()[0] + '/calc*'))"])
        assert found.startswith("1.0 ") and "/calc'" not in found and "calc-1.0.dist-info" in found, found
    finally:
        for tag in {image.tag, image.source_tag, image.deps_tag}:
            docker_engine.images.remove(tag, force=True)
