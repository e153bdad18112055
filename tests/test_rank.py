"""coderun rank (issue 24): clustering and scoring (pure), and `--tests inputs` end to end on a real project
built with pass+ inputs, evaluated with `--rigor plus`, then ranked in its sandboxes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from sandbox_fixtures import sandbox as sandbox  # noqa: F401  (the parametrized fixture)
from typer.testing import CliRunner

from coderun.cli.main import app
from coderun.config import load_settings
from coderun.evaluation.store import Result, RunStore
from coderun.manifests.schema import load_manifest
from coderun.rank.clustering import Member, rank_task
from coderun.rank.metrics import summarize
from coderun.rank.records import ExecStatus, Execution, RankTests
from coderun.rank.store import RankStore
from coderun.records import VerdictKind
from coderun.runner.evidence import SampleRun
from coderun.runner.execute import run_sample
from coderun.tasks import build_tasks, load_tasks
from tests.helpers import write_tree
from tests.shared_home import built_once, home_view


def obs(value, outcome="return"):
    return {"outcome": outcome, "value": value, "args": ["list", [1]], "kwargs": ["dict", []], "seconds": 0.001}


def ran(h, *values, status=ExecStatus.RAN):
    return Execution(task_id="t", hash=h, tests=RankTests.INPUTS, key="k", status=status,
                     observations=[obs(v) if v != "raise" else obs("ValueError", "raise") for v in values])


def test_the_largest_agreeing_cluster_that_runs_without_error_ranks_first():
    execs = {"a": ran("a", 1, 2), "b": ran("b", 1, 2), "c": ran("c", 5, 6), "d": ran("d", "raise", "raise"),
             "e": ran("e", ["float", "1.0000000001"], 2)}
    members = [Member(0, "c"), Member(1, "d"), Member(2, "a"), Member(3, "b"), Member(4, "e"), Member(5, "c")]
    r = rank_task("t", "self_contained", RankTests.INPUTS, members, execs, checks=2, method="m")
    assert [s.index for s in r.samples] == [2, 3, 4, 0, 5, 1]
    assert r.top.score == 3 * 2 and r.top.cluster_size == 3        # a, b and e agree (floats within tolerance)
    assert [(s.cluster, s.score) for s in r.samples[3:]] == [(1, 4.0), (1, 4.0), (2, 0.0)]  # c twice; d raised


def test_ties_go_to_the_larger_cluster_then_the_lowest_index():
    """Deterministic picks: nothing to tell samples apart means the most repeated code, then the first."""
    members = [Member(0, "x"), Member(1, "y"), Member(2, "y"), Member(3, "z")]
    r = rank_task("t", "self_contained", RankTests.INPUTS, members, {}, checks=0, method="m")
    assert [s.index for s in r.samples] == [1, 2, 0, 3] and r.top.score == 0
    tied = rank_task("t", "self_contained", RankTests.INPUTS, [Member(3, "p"), Member(1, "q")],
                     {"p": ran("p", 1), "q": ran("q", 2)}, checks=1, method="m")
    assert tied.top.index == 1


def test_samples_that_did_not_run_never_join_a_cluster():
    execs = {"a": ran("a", status=ExecStatus.NO_OBSERVATIONS), "b": ran("b", status=ExecStatus.UNSPLICEABLE)}
    r = rank_task("t", "self_contained", RankTests.INPUTS, [Member(0, "a"), Member(1, "b")], execs, 3, "m")
    assert [s.cluster for s in r.samples] == [0, 1] and {s.score for s in r.samples} == {0.0}


def test_the_lift_is_paired_over_tasks_with_a_seeded_interval():
    members = [Member(i, h) for i, h in enumerate("aab")]
    execs = {"a": ran("a", 1), "b": ran("b", 2)}
    rankings = [rank_task(t, "self_contained", RankTests.INPUTS, members, execs, 1, "m") for t in ("t1", "t2")]
    verdicts = {0: VerdictKind.PASS, 1: VerdictKind.PASS, 2: VerdictKind.FAIL}
    results = [Result(task_id=t, index=i, verdict=v) for t in ("t1", "t2") for i, v in verdicts.items()]
    s = summarize("run", RankTests.INPUTS, "plus", rankings, results, iters=200)
    assert s.overall.tasks == 2 and s.overall.ranked1 == 1.0 and s.overall.pass1 == pytest.approx(2 / 3)
    assert s.overall.lift == pytest.approx(1 / 3) and s.overall.lo == s.overall.hi == pytest.approx(1 / 3)
    assert s.overall.pass10 is None and s.levels["self_contained"].tasks == 2


def test_files_given_beside_the_sample_are_in_its_copy_only(sandbox):
    """Generated tests (--tests model) go into one sample's copy; the next sample's copy is pristine."""
    generated = ("tests/test_generated.py", "from pkg.mod import add\n\n\ndef test_g():\n    assert add(2, 2) == 4\n")
    args = dict(relfile="pkg/mod.py", new_source="def add(a, b):\n    return a + b\n",
                nodeids=["tests/test_generated.py::test_g"], timeout=60, per_test_timeout=3, env={})
    ev = run_sample(sandbox, SampleRun(**args, files=(generated,)))
    assert [(o.nodeid, o.outcome) for o in ev.outcomes] == [("tests/test_generated.py::test_g", "passed")], ev
    again = run_sample(sandbox, SampleRun(**args))
    assert not any(o.outcome == "passed" for o in again.outcomes)


# -- end to end ---------------------------------------------------------------------------------

PROJECT = {
    "lib/__init__.py": "",
    "lib/calc.py": '''def double(x):
    """Return the double of x, computed step by step for the caller."""
    twice = x
    twice = twice + x
    result = twice
    return result
''',
    "tests/test_calc.py": '''from lib.calc import double


def test_double():
    assert double(3) == 6
    assert double(-2) == -4
''',
}
HEADER = 'def double(x):\n    """Return the double of x, computed step by step for the caller."""\n'
SAMPLES = {   # index: body; the right ones (1, 2, 6) agree on every input without sharing code
    0: "    return x * 3\n", 1: "    return x + x\n", 2: "    return 2 * x\n", 3: "    return (\n",
    4: "    raise ValueError(x)\n", 5: "    return x * 3\n", 6: "    return x * 2\n",
}   # the wrong x * 3 twice: the right ones win by the size of their cluster (3), not by a tie


def _build_and_evaluate(tmp: Path) -> None:
    write_tree(tmp / "lib", PROJECT)
    (tmp / "lib.yaml").write_text(f"name: lib\nsource: {{path: {tmp / 'lib'}}}\npython: '3.11'\n"
                                  "tests:\n  paths: [tests]\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CODERUN_HOME", str(tmp / "home"))
        built = build_tasks(load_manifest(tmp / "lib.yaml"), load_settings())
        task = _double(built)
        assert task.rigor is not None and task.rigor.inputs >= 2, task.rigor
        (tmp / "s.jsonl").write_text("".join(json.dumps({"task_id": task.task_id, "solution": HEADER + body})
                                             + "\n" for body in SAMPLES.values()))
        res = CliRunner().invoke(app, ["eval", "--samples", str(tmp / "s.jsonl"), "--backend", "local", "--rigor",
                                       "plus", "--run-dir", str(tmp / "run"), "-k", "1", "--projects", str(tmp)])
        assert res.exit_code == 0, res.output


def _double(built=None):
    tasks = load_tasks(load_settings(), status="all")
    task = next((t for t in tasks if t.name == "double"), None)
    assert task is not None and task.status.value == "verified", (built, tasks)
    return task


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    """A project built with pass+ inputs, its samples evaluated with --rigor plus: once per session (this file
    and test_rank_model.py use it), each module with a home and a copy of the run of its own."""
    shared = built_once(tmp_path_factory, "rank", _build_and_evaluate)
    tmp = tmp_path_factory.mktemp("rank")
    home_view(shared / "home", tmp / "home")
    shutil.copytree(shared / "run", tmp / "run")
    shutil.copy2(shared / "lib.yaml", tmp / "lib.yaml")   # its source is shared/lib, by absolute path
    mp = pytest.MonkeyPatch()
    mp.setenv("CODERUN_HOME", str(tmp / "home"))
    yield tmp, _double()
    mp.undo()


@pytest.mark.slow
def test_rank_inputs_picks_a_right_sample_and_resumes_from_the_store(evaluated, monkeypatch):
    tmp, task = evaluated
    monkeypatch.setenv("CODERUN_HOME", str(tmp / "home"))
    run = tmp / "ranked-run"
    shutil.copytree(tmp / "run", run)
    out = CliRunner().invoke(app, ["rank", str(run), "--tests", "inputs", "-o", str(tmp / "ranked.jsonl")],
                             env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    assert "executions: 6 run now, 0 from the run store" in out.output   # sample 5 repeats sample 0's code
    with RunStore.open(run) as store:
        ranks = RankStore(store)
        (summary, [ranking]), = ranks.rankings().values()
        execs = {e.hash: e for e in ranks.executions(RankTests.INPUTS).values()}
        samples = {s.index: s for s in store.samples()}
    assert [s.index for s in ranking.samples[:3]] == [1, 2, 6]
    assert ranking.top.score == 3 * ranking.checks
    assert execs[samples[3].hash].status is ExecStatus.UNSPLICEABLE
    raised = execs[samples[4].hash]
    assert raised.status is ExecStatus.RAN and {o["outcome"] for o in raised.observations} == {"raise"}
    assert summary.overall.ranked1 == 1.0 and summary.overall.pass1 == pytest.approx(3 / 7)
    assert "| overall | 1 | 42.86 | 100.00 | +57.14" in (run / "rank" / "summary-inputs.md").read_text()
    md = CliRunner().invoke(app, ["report", str(run), "--format", "md"])
    assert "## Ranked pass@1 (--tests inputs)" in md.output and "| overall | 1 | 42.86 | 100.00 |" in md.output
    page = CliRunner().invoke(app, ["report", str(run), "--format", "html", "-o", str(tmp / "r.html")])
    assert page.exit_code == 0, page.output
    html = (tmp / "r.html").read_text()
    assert html.count('class="chip pass top"') == 1 and "top-ranked by coderun rank --tests inputs" in html
    again = CliRunner().invoke(app, ["rank", str(run)], env={"COLUMNS": "200"})
    assert again.exit_code == 0 and "executions: 0 run now, 6 from the run store" in again.output
    # The ranked samples file is a samples file: eval reads it, in rank order.
    lines = [json.loads(line) for line in (tmp / "ranked.jsonl").read_text().splitlines()]
    assert [(r["run_index"], r["rank"]) for r in lines][:2] == [(1, 1), (2, 2)] and "score" in lines[0]
    res = CliRunner().invoke(app, ["eval", "--samples", str(tmp / "ranked.jsonl"), "--backend", "local",
                                   "--run-dir", str(tmp / "rerun"), "-k", "1", "--projects", str(tmp)])
    assert res.exit_code == 0, res.output
    with RunStore.open(tmp / "rerun") as store:
        rerun = {r.index: r.verdict for r in store.results()}
        meta = {s.index: s.metadata for s in store.samples()}
    assert rerun[0] is VerdictKind.PASS and meta[0]["cluster"] == 0 and len(rerun) == len(SAMPLES)


def test_rank_refuses_what_is_not_a_finished_run(tmp_path, monkeypatch):
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    out = CliRunner().invoke(app, ["rank", str(tmp_path)])
    assert out.exit_code == 7 and "not a run folder" in out.output.replace("\n", "")  # a long path may wrap
    out = CliRunner().invoke(app, ["rank", str(tmp_path), "--tests", "nonsense"])
    assert out.exit_code == 2
