"""`--cluster` values and what a user without Ray is told (fast: no cluster is started here; the runs through
a real multi-node Ray cluster are in tests/test_cluster.py)."""

from __future__ import annotations

import sys

import pytest

from coderun.errors import UsageError
from coderun.evaluation.evaluate import EvalRequest
from coderun.runner.executors import make_pool
from coderun.runner.executors.cluster import parse_cluster


@pytest.mark.parametrize("spec, args", [
    ("ray", {}),
    ("auto", {"address": "auto"}),
    ("ray://10.0.0.5:10001", {"address": "ray://10.0.0.5:10001"}),
    ("127.0.0.1:6379", {"address": "127.0.0.1:6379"}),
])
def test_cluster_values_become_ray_init_arguments(spec, args):
    assert parse_cluster(spec) == args


@pytest.mark.parametrize("spec", ["bogus", "host:", ":6379", "ray:/x"])
def test_an_unknown_cluster_value_names_the_choices(spec):
    with pytest.raises(UsageError, match="give ray, auto, ray://HOST:PORT"):
        parse_cluster(spec)


def test_without_ray_the_request_says_how_to_install_it_before_any_run_starts(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)   # `import ray` raises ImportError
    with pytest.raises(UsageError) as e:
        EvalRequest(samples=tmp_path / "s.jsonl", cluster="ray")
    assert "pip install 'coderun[ray]'" in str(e.value)


def test_the_cluster_runs_the_workers_executor_only():
    with pytest.raises(UsageError, match="workers executor"):
        make_pool("naive", "local", {}, 1, cluster="ray")
