"""`coderun analyze` in-process, and the per-commit analysis cache, on a path-sourced project."""

from __future__ import annotations

import json
import textwrap

import pytest
from typer.testing import CliRunner

from coderun.analyzers import analyze_cached
from coderun.analyzers.project import cache_path
from coderun.cli.main import app
from coderun.config import load_settings
from coderun.envs.sources import checkout
from coderun.manifests.schema import load_manifest
from tests.helpers import write_tree


@pytest.fixture
def manifest_path(tmp_path, monkeypatch):
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    write_tree(tmp_path / "proj", {
        "lib/__init__.py": "",
        "lib/core.py": textwrap.dedent('''
            import os
            from lib.helpers import twice

            SCALE = 2

            def scaled(x):
                """Scale x."""
                return twice(x) * SCALE

            class Box:
                def size(self):
                    return self.width * os.sep.count("/")
        '''),
        "lib/helpers.py": "def twice(x):\n    return 2 * x\n",
        "lib/legacy.py": "print 'py2'\n",
    })
    m = tmp_path / "demo.yaml"
    m.write_text("name: demo\nsource:\n  path: proj\npython: '3.11'\n")
    return m


def test_analyze_json_prints_one_object_per_function(manifest_path):
    result = CliRunner().invoke(app, ["analyze", str(manifest_path), "--json"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    by_name = {r["qualname"]: r for r in rows}
    assert set(by_name) == {"scaled", "Box.size", "twice"}
    scaled = by_name["scaled"]
    assert scaled["file"] == "lib/core.py" and scaled["lineno"] == 7
    assert scaled["level"] == "project_runnable"
    assert scaled["oracle_context"] == {"classes": [], "apis": ["twice"], "vars": ["SCALE"]}
    assert "Box" in scaled["all_context"]["classes"]
    assert by_name["Box.size"]["level"] == "class_runnable"


def test_analyze_one_function_as_table(manifest_path):
    result = CliRunner().invoke(app, ["analyze", str(manifest_path), "--function", "lib/core.py::Box.size"])
    assert result.exit_code == 0, result.output
    assert "class_runnable" in result.stdout and "self.width" in result.stdout
    assert "scaled" not in result.stdout


def test_analyze_unknown_function_is_a_usage_error(manifest_path):
    result = CliRunner().invoke(app, ["analyze", str(manifest_path), "--function", "Box.nope"])
    assert result.exit_code == 2
    assert "no function 'Box.nope'" in result.output


def test_cache_is_reused_for_the_same_commit(manifest_path):
    settings = load_settings()
    manifest = load_manifest(manifest_path)
    co = checkout(manifest, settings)
    first = analyze_cached(co, settings, use_jedi=False)
    path = cache_path(settings, co.project, co.commit, None, False, ".")
    assert path.is_file() and first.commit == co.commit
    assert [s.file for s in first.skipped] == ["lib/legacy.py"]
    # A cached result is read back, not recomputed: a marker written into it survives.
    data = json.loads(path.read_text())
    data["functions"][0]["docstring"] = "from the cache"
    path.write_text(json.dumps(data))
    again = analyze_cached(co, settings, use_jedi=False)
    assert again.functions[0].docstring == "from the cache"


def test_unreadable_cache_is_recomputed(manifest_path):
    """A cache file from an older schema or a crash must not break the analysis."""
    settings = load_settings()
    co = checkout(load_manifest(manifest_path), settings)
    path = cache_path(settings, co.project, co.commit, None, False, ".")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{not json")
    result = analyze_cached(co, settings, use_jedi=False)
    assert {f.qualname for f in result.functions} == {"scaled", "Box.size", "twice"}
    assert json.loads(path.read_text())["commit"] == co.commit
