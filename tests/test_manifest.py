import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from coderun.cli.main import app
from coderun.config import load_settings
from coderun.errors import ManifestError
from coderun.manifests.schema import all_manifests, find_manifest, load_manifest, parse_manifest

runner = CliRunner()

GOOD = """\
name: demo
source:
  pypi: "demo==1.0"
python: "3.11"
tests:
  paths: [tests]
tasks:
  targets:
    - function: demo/mod.py::Klass.method
      aliases: [abc123]
"""


def test_good_manifest_parses_with_defaults():
    m = parse_manifest(GOOD, Path("demo.yaml"))
    assert m.source.kind == "pypi"
    assert m.tests.runner == "pytest" and m.tests.timeout > 0
    assert m.tasks.targets[0].file == "demo/mod.py"
    assert m.tasks.targets[0].qualname == "Klass.method"


@pytest.mark.parametrize("text, field, line", [
    (GOOD.replace("python:", "colour: red\npython:"), "colour", 4),
    (GOOD.replace('tests:\n  paths: [tests]', "tests:\n  timeout: soon"), "tests.timeout", 6),
    (GOOD.replace('  pypi: "demo==1.0"', '  pypi: "demo==1.0"\n  path: ../demo'), "source", 3),
    (GOOD.replace('python: "3.11"\n', ""), "python", None),
    (GOOD.replace("demo/mod.py::Klass.method", "demo/mod.py"), "tasks.targets.0.function", 9),
])
def test_malformed_manifest_names_field_and_line(text, field, line):
    with pytest.raises(ManifestError) as info:
        parse_manifest(text, Path("bad.yaml"))
    msg = str(info.value)
    assert f"field '{field}'" in msg
    if line:
        assert f"bad.yaml:{line}:" in msg


@pytest.mark.parametrize("mutation", [
    lambda t: t.replace("python:", "colour: red\npython:"),                     # unknown key
    lambda t: t.replace('tests:\n  paths: [tests]', "tests:\n  timeout: soon"),  # bad type
    lambda t: t.replace('  pypi: "demo==1.0"', '  pypi: "demo==1.0"\n  path: x'),  # two sources
])
def test_validate_command_exits_2_on_malformed(tmp_path, mutation):
    f = tmp_path / "bad.yaml"
    f.write_text(mutation(GOOD))
    result = runner.invoke(app, ["projects", "validate", str(f)])
    assert result.exit_code == 2
    assert "field '" in result.output


def test_every_builtin_manifest_validates():
    result = runner.invoke(app, ["projects", "validate"])
    assert result.exit_code == 0, result.output
    names = {m.name for m in all_manifests(load_settings())}
    assert {"cachetools", "python-dateutil", "borgmatic", "sqlparams", "shortuuid"} <= names


def test_user_manifest_dir_and_path_lookup(tmp_path, monkeypatch):
    (tmp_path / "demo.yaml").write_text(GOOD)
    monkeypatch.setenv("CODERUN_PROJECTS", str(tmp_path))
    assert find_manifest("demo", load_settings()).name == "demo"
    assert find_manifest(str(tmp_path / "demo.yaml"), load_settings()).name == "demo"
    result = runner.invoke(app, ["projects", "show", "demo", "--json"])
    assert result.exit_code == 0 and '"name": "demo"' in result.output


def test_unknown_project_is_a_clear_error():
    result = runner.invoke(app, ["projects", "show", "no-such-project"])
    assert result.exit_code == 2
    assert "no project named 'no-such-project'" in result.output


@pytest.mark.parametrize("other", ["demo.yml", "copy.yaml"])
def test_two_manifests_with_one_name_in_a_folder_is_an_error_naming_both(tmp_path, monkeypatch, other):
    """With two `demo` manifests in one folder, the lookup silently took whichever came first."""
    (tmp_path / "demo.yaml").write_text(GOOD)
    (tmp_path / other).write_text(GOOD.replace('"3.11"', '"3.10"'))
    monkeypatch.setenv("CODERUN_PROJECTS", str(tmp_path))
    with pytest.raises(ManifestError) as e:
        find_manifest("demo", load_settings())
    assert str(tmp_path / "demo.yaml") in e.value.message and str(tmp_path / other) in e.value.message
    result = runner.invoke(app, ["projects", "show", "demo"])
    assert result.exit_code == 2 and other in result.output.replace("\n", "")  # a long path may wrap
    # One left: found, as before.
    (tmp_path / other).unlink()
    assert find_manifest("demo", load_settings()).python == "3.11"


@pytest.mark.parametrize("value, ok", [("2021-05-05", True), ("false", True), ("true", False), ("soon", False)])
def test_resolve_as_of_is_a_date_or_false(value, ok):
    text = GOOD.replace("tests:\n", f"install:\n  resolve_as_of: {value}\ntests:\n", 1)
    if ok:
        parse_manifest(text, Path("demo.yaml"))
    else:
        with pytest.raises(ManifestError, match="install.resolve_as_of"):
            parse_manifest(text, Path("demo.yaml"))


def test_debian_packages_leave_the_venv_key_alone(tmp_path):
    """install.apt goes into images only: adding gcc for lithium's image must not rebuild its venv (its
    pre_install tree went missing for docker runs), while what pip installs still does. A manifest without
    apt keeps the key it had."""
    base = "name: m\nsource: {path: .}\npython: '3.11'\ninstall:\n  requirements: [pytest]\n"
    plain, apt, more = tmp_path / "a.yaml", tmp_path / "b.yaml", tmp_path / "c.yaml"
    plain.write_text(base)
    apt.write_text(base + "  apt: [gcc, libc6-dev]\n")
    more.write_text(base.replace("[pytest]", "[pytest, six]"))
    key = load_manifest(plain).install_hash("commit")
    assert load_manifest(apt).install_hash("commit") == key != load_manifest(more).install_hash("commit")
    m = load_manifest(plain)
    before = json.dumps({"python": m.python, "install": m.install.key_data()}, sort_keys=True) + "commit"
    assert key == hashlib.sha256(before.encode()).hexdigest()[:16]
