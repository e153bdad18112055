"""coderun rank --tests model|both (issue 24): tests asked of a fake OpenAI-compatible server on 127.0.0.1,
parsed, and run against every sample in the project's sandboxes; wrong, unparsable, hanging and
source-reading tests are each handled and counted."""

from __future__ import annotations

import shutil

import pytest
from typer.testing import CliRunner

from coderun.cli.main import app
from coderun.evaluation.store import RunStore
from coderun.rank.generate import DOES_NOT_PARSE, PARAMETRIZED, READS_SOURCE, module_name, parse
from coderun.rank.records import ExecStatus, RankTests
from coderun.rank.store import RankStore
from tests.fake_openai import FakeOpenAI, last_user_message
from tests.test_rank import evaluated  # noqa: F401  (the module-scoped project, built and evaluated once)

ANSWER = '''Here are the tests.

```python
import pytest
from lib.calc import double


def test_right():
    assert double(3) == 6


def test_wrong():
    assert double(3) == 7


def test_hangs():
    while True:
        pass


def test_reads_the_original():
    with open("lib/calc.py") as f:
        assert "x + x" in f.read()


def test_broken(:
    pass


@pytest.mark.parametrize("x", [0, 5])
def test_twice(x):
    assert double(x) - x == x
```
'''


def test_parsing_keeps_tests_that_parse_and_do_not_read_sources():
    from coderun.records import Level, Task

    task = Task(task_id="lib/lib/calc.py::double", project="lib", file="lib/calc.py", qualname="double",
                name="double", lineno=1, end_lineno=5, level=Level.SELF_CONTAINED, commit="c", source="", docstring="",
                signature="def double(x):", tests=["tests/test_calc.py::test_double"])
    g = parse(task, "m", [ANSWER, "no code at all"])
    assert [t.name for t in g.tests] == ["test_gen0_test_right", "test_gen0_test_wrong", "test_gen0_test_hangs"]
    assert g.dropped == {READS_SOURCE: 1, DOES_NOT_PARSE: 1, PARAMETRIZED: 1}
    assert "from lib.calc import double" in g.tests[0].source and "while True" in g.tests[2].source
    assert module_name(task, ".") == "lib.calc" and module_name(task, "lib") == "calc"


def test_a_test_may_open_files_of_its_own_but_not_source_files():
    from coderun.records import Level, Task

    task = Task(task_id="lib/lib/calc.py::double", project="lib", file="lib/calc.py", qualname="double",
                name="double", lineno=1, end_lineno=5, level=Level.SELF_CONTAINED, commit="c", source="", docstring="",
                signature="def double(x):", tests=["tests/test_calc.py::test_double"])
    answer = '''```python
from lib.calc import double


def test_own_file(tmp_path):
    (tmp_path / "n.txt").write_text("3")
    with open(tmp_path / "n.txt") as f:
        assert double(int(f.read())) == 6


def test_other_source():
    assert "def" in open("lib/helpers.py").read()


def test_inspects():
    import inspect
    assert "x" in inspect.getsource(double)
```'''
    g = parse(task, "m", [answer])
    assert [t.name for t in g.tests] == ["test_gen0_test_own_file"]
    assert g.dropped == {READS_SOURCE: 2}


@pytest.mark.slow
def test_rank_model_and_both_against_a_fake_server(evaluated, monkeypatch):  # noqa: F811
    tmp, task = evaluated
    monkeypatch.setenv("CODERUN_HOME", str(tmp / "home"))
    run = tmp / "model-run"
    shutil.copytree(tmp / "run", run)
    with FakeOpenAI(answer=lambda _endpoint, _body: ANSWER) as fake:
        server = ["--base-url", fake.base_url, "--model", "fake-model"]
        out = CliRunner().invoke(app, ["rank", str(run), "--tests", "model", *server], env={"COLUMNS": "200"})
        assert out.exit_code == 0, out.output
        prompt = last_user_message(fake.requests[0]["body"])
        assert len(fake.requests) == 1 and "def double(x):" in prompt and "from lib.calc import double" in prompt
        both = CliRunner().invoke(app, ["rank", str(run), "--tests", "both", *server], env={"COLUMNS": "200"})
        assert both.exit_code == 0, both.output
        assert len(fake.requests) == 1                      # the tests are kept in the run store
    assert ("generated tests: 6 generated, 3 kept, 1 does not parse, 1 reads a source file (the original's), "
            "1 parametrized (its ids are unknown before collection), 1 timed out, 2 fail on every sample"
            ) in " ".join(out.output.split())
    md = CliRunner().invoke(app, ["report", str(run), "--format", "md"]).output
    assert "## Ranked pass@1 (--tests model)" in md and "## Ranked pass@1 (--tests both)" in md
    assert "generated tests: 6 generated, 3 kept" in md
    with RunStore.open(run) as store:
        ranks = RankStore(store)
        rankings = {tests: rs for tests, (_s, rs) in ranks.rankings().items()}
        model_execs = ranks.executions(RankTests.MODEL)
        samples = {s.index: s for s in store.samples()}
    right = {1, 2, 6}
    for tests in (RankTests.MODEL, RankTests.BOTH):
        [r] = rankings[tests]
        assert {s.index for s in r.samples[:3]} == right and r.top.cluster_size == 3, (tests, r)
    [m] = rankings[RankTests.MODEL]
    assert m.top.agreement == 1 and m.checks == 3 and m.top.score == 3      # test_right, by 3 samples
    by_hash = {e.hash: e for e in model_execs.values()}
    wrong = by_hash[samples[0].hash]
    assert wrong.status is ExecStatus.RAN and wrong.timed_out == ["test_gen0_test_hangs"]
    assert by_hash[samples[3].hash].status is ExecStatus.UNSPLICEABLE
    [b] = rankings[RankTests.BOTH]
    assert b.checks == 3 + task.rigor.inputs and b.top.agreement == 1 + task.rigor.inputs


def test_model_tests_need_a_server(tmp_path, monkeypatch):
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    out = CliRunner().invoke(app, ["rank", str(tmp_path), "--tests", "model", "--model", "m"])
    assert out.exit_code == 2 and "--base-url and --model go together" in out.output
