"""Where the registry for project images comes from (--registry, CODERUN_REGISTRY, the config file), and
what a bad one says. Nothing here talks to a registry: tests/test_registry.py does."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from coderun.cli.main import app
from coderun.config import load_settings
from coderun.envs.registry import check_registry, remote_ref
from coderun.errors import ConfigError, UsageError


@pytest.fixture
def config(tmp_path, monkeypatch):
    cfg = tmp_path / "config.toml"
    monkeypatch.setenv("CODERUN_CONFIG", str(cfg))
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CODERUN_REGISTRY", raising=False)
    return cfg


def test_config_file_then_environment(config, monkeypatch):
    assert load_settings().registry is None
    config.write_text('[images]\nregistry = "registry.example.org:5000/team"\n')
    assert load_settings().registry == "registry.example.org:5000/team"
    monkeypatch.setenv("CODERUN_REGISTRY", "127.0.0.1:5000")
    assert load_settings().registry == "127.0.0.1:5000"
    monkeypatch.setenv("CODERUN_REGISTRY", "")  # set but empty: no registry, whatever the file says
    assert load_settings().registry is None


def test_a_registry_that_is_not_a_string_is_a_config_error(config):
    config.write_text("[images]\nregistry = 5000\n")
    with pytest.raises(ConfigError, match=r"\[images\] registry must be a string"):
        load_settings()


@pytest.mark.parametrize("value", ["localhost:5000", "registry.example.org", "r.example.org:443/a/b-c",
                                   "127.0.0.1:5000/"])
def test_registry_names_docker_takes(value):
    assert check_registry(value) == value.rstrip("/")
    assert remote_ref(value, "coderun/cachetools:abc") == f"{value.rstrip('/')}/coderun/cachetools:abc"


@pytest.mark.parametrize("value", ["https://registry.example.org", "host:port", "a b", ""])
def test_registry_names_docker_refuses(value):
    with pytest.raises(UsageError, match="not a registry"):
        check_registry(value)


def test_a_bad_registry_stops_eval_before_it_starts(config, tmp_path):
    done = CliRunner().invoke(app, ["eval", "--ground-truth", "--project", "cachetools", "--backend", "local",
                                    "--registry", "http://x", "--run-dir", str(tmp_path / "run")])
    assert done.exit_code == 2 and "not a registry" in done.output
    assert not (tmp_path / "run").exists()
