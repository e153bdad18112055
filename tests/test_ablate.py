"""`coderun ablate` on the built-in cachetools tasks, against a fake OpenAI-compatible server on 127.0.0.1.

The fake plays a model that only succeeds with context: for a prompt that shows context it answers the
task's original function, for one without it a body that raises. Tasks are the real built-in ones,
in the real $CODERUN_HOME (built here when missing); evaluation uses the local backend with two workers.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from coderun.cli.main import app
from coderun.config import load_settings
from coderun.generate.records import GeneratedSample
from coderun.manifests.schema import find_manifest
from coderun.prompts import PromptSpec, build_prompts
from coderun.prompts.checkouts import checkout_resolver
from coderun.records import Task
from coderun.tasks import build_tasks, load_tasks
from tests.fake_openai import FakeOpenAI, last_user_message

CONTEXT_MARK = "Context from `"


@pytest.fixture(scope="module")
def cachetools():
    """The built-in cachetools tasks, and each task's prompt header (how the fake recognises a task)."""
    settings = load_settings()
    tasks = load_tasks(settings, project="cachetools")
    if not tasks:
        build_tasks(find_manifest("cachetools", settings), settings)
        tasks = load_tasks(settings, project="cachetools")
    prompts = build_prompts(tasks, checkout_resolver(settings), PromptSpec(context="none")).records
    by_header = {p.header: next(t for t in tasks if t.task_id == p.task_id) for p in prompts}
    assert len(by_header) == len(tasks), "two tasks share a header: the fake could not tell them apart"
    return tasks, by_header


def _context_model(by_header: dict[str, Task]):
    """Original function when the prompt shows context, a body that raises otherwise (a body returning None
    would make a cache's eviction loop spin until the test timeout)."""
    def answer(endpoint: str, body: dict) -> str:
        user = last_user_message(body)
        header = user.rsplit("```python\n", 1)[1].rsplit("```", 1)[0]
        task = by_header[header]
        code = task.source.rstrip() + "\n" if CONTEXT_MARK in user else header + "    raise NotImplementedError\n"
        return f"Here it is:\n```python\n{code}```\n"
    return answer


def _ablate(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["ablate", "--backend", "local", "-j", "2", *args])
    return result.exit_code, result.output + (str(result.exception) if result.exit_code not in (0, 2, 8) else "")


def _comparison(out: Path) -> dict:
    return json.loads((out / "comparison.json").read_text())


def _overall(c: dict, label: str, k: str = "1") -> dict:
    arm = next(d for d in c["deltas"] if d["label"] == label)
    return next(d for d in arm["groups"]["overall"]["deltas"] if d["k"] == int(k))


@pytest.mark.slow
def test_oracle_context_beats_none_with_a_ci_excluding_zero(cachetools, tmp_path):
    """The issue's done-when: the built-in benchmark, oracle answered right and none wrong."""
    tasks, by_header = cachetools
    out = tmp_path / "abl"
    with FakeOpenAI(_context_model(by_header)) as fake:
        code, output = _ablate("--variants", "none,oracle", "--model", "fake", "--base-url", fake.base_url,
                               "-n", "2", "-k", "1,2", "--project", "cachetools", "--out-dir", str(out))
    assert code == 0, output
    assert len(fake.requests) == 2 * 2 * len(tasks)
    c = _comparison(out)
    assert c["baseline"] == "none:original" and [a["label"] for a in c["arms"]] == ["none:original",
                                                                                   "oracle:original"]
    with_context = sum(CONTEXT_MARK in p.read_text() for p in [out / "prompts" / "oracle_original.jsonl"])
    assert with_context
    d = _overall(c, "oracle:original")
    assert d["tasks"] == len(tasks)
    assert d["b"] > 0.8 and d["a"] < 0.2, d
    assert d["lo"] > 0 and d["hi"] >= d["delta"] >= d["lo"], d
    assert d["p_value"] < 0.01
    levels = c["groups"][1:]
    assert "project_runnable" in levels and set(levels) <= {"self_contained", "slib_runnable", "plib_runnable",
                                                            "class_runnable", "file_runnable", "project_runnable"}
    oracle = next(a for a in c["arms"] if a["label"] == "oracle:original")
    assert oracle["groups"]["overall"]["acc@k"]["1"] is not None
    assert "minus none:original" in output and "95% CI" in output
    md = (out / "comparison.md").read_text()
    assert "| overall | oracle:original | 1 |" in md


@pytest.mark.slow
def test_interrupted_ablation_resumes_generation_and_runs(cachetools, tmp_path):
    """A re-run in the same folder asks only for missing samples, reuses finished runs, finishes the rest."""
    _, by_header = cachetools
    out = tmp_path / "abl"
    args = ["--variants", "none,oracle", "--model", "fake", "-n", "2", "-k", "1", "--project", "cachetools",
            "--level", "file_runnable", "--out-dir", str(out), "--concurrency", "1"]
    with FakeOpenAI(_context_model(by_header)) as fake:
        fake.fault("401")                                   # not retryable: the first arm stops
        code, output = _ablate(*args, "--base-url", fake.base_url)
        assert code == 8, output
        assert "re-run the same command to resume" in output
        code, output = _ablate(*args, "--base-url", fake.base_url)
        assert code == 0, output
        assert len(fake.requests) == 1 + 2 * 2 * 2           # the refused request, then each sample once
        first = _comparison(out)
        oracle_db = out / "runs" / "oracle_original" / "run.sqlite"
        with sqlite3.connect(oracle_db) as db:
            db.execute("DELETE FROM results WHERE rowid = (SELECT min(rowid) FROM results)")
        none_db = out / "runs" / "none_original" / "run.sqlite"
        none_before = _results(none_db)
        code, output = _ablate(*args, "--base-url", fake.base_url)
        assert code == 0, output
        assert len(fake.requests) == 9                      # nothing generated again
    assert _results(none_db) == none_before                 # a finished run is reused as it was
    assert len(_results(oracle_db)) == 4                    # the unfinished one was completed
    assert _comparison(out)["deltas"] == first["deltas"]
    samples = [GeneratedSample.model_validate_json(line) for line in (out / "samples" / "none_original.jsonl").open()]
    assert sorted((s.prompt_id, s.index) for s in samples) == sorted({(s.prompt_id, s.index) for s in samples})


def _results(db: Path) -> list[tuple]:
    with sqlite3.connect(db) as c:
        return c.execute("SELECT task_id, idx, verdict, finished_at FROM results ORDER BY task_id, idx").fetchall()


@pytest.mark.integration
def test_samples_mode_compares_given_files_without_generating(cachetools, tmp_path):
    """--samples VARIANT=FILE: samples produced elsewhere are evaluated and compared, no server needed."""
    tasks, _ = cachetools
    chosen = [t for t in tasks if t.level.value == "file_runnable"]
    wrong, right = tmp_path / "wrong.jsonl", tmp_path / "right.jsonl"
    wrong.write_text("".join(json.dumps({"task_id": t.task_id, "solution": t.signature.strip() + "\n    pass\n"})
                             + "\n" for t in chosen))
    right.write_text("".join(json.dumps({"task_id": t.task_id, "solution": t.source}) + "\n" for t in chosen))
    out = tmp_path / "abl"
    code, output = _ablate("--samples", f"blank={wrong}", "--samples", f"original={right}", "-k", "1",
                           "--project", "cachetools", "--level", "file_runnable", "--out-dir", str(out))
    assert code == 0, output
    c = _comparison(out)
    assert [a["label"] for a in c["arms"]] == ["blank", "original"]
    d = _overall(c, "original")
    assert (d["tasks"], d["a"], d["b"], d["delta"]) == (len(chosen), 0.0, 1.0, 1.0)
    assert c["groups"] == ["overall", "file_runnable"]
    assert not (out / "prompts").exists() and not (out / "samples").exists()
    assert (out / "runs" / "blank" / "run.sqlite").is_file() and (out / "comparison.md").is_file()
    for arm in ("blank", "original"):   # each arm's run folder is written as `coderun eval` writes one
        report = json.loads((out / "runs" / arm / "report.json").read_text())
        assert (out / "runs" / arm / "report.md").is_file() and report


@pytest.mark.parametrize(("args", "message"), [
    (["--variants", "none,orcale", "--model", "m", "--base-url", "http://127.0.0.1:9/v1"],
     "unknown context variant 'orcale'"),
    (["--variants", "none", "--model", "m", "--base-url", "http://127.0.0.1:9/v1"], "at least two arms"),
    (["--variants", "none,oracle"], "give --model and --base-url"),
    (["--variants", "none,oracle", "--docstring", "humane", "--model", "m", "--base-url", "u"],
     "--docstring takes original and/or human"),
    (["--variants", "none,none", "--model", "m", "--base-url", "u"], "are the same"),
    ([], "give either --variants"),
    (["--samples", "none"], "--samples takes VARIANT=FILE"),
    (["--samples", "none=/nonexistent/s.jsonl", "--samples", "oracle=/nonexistent/t.jsonl"], "no such file"),
])
def test_bad_input_exits_2_with_a_clear_message(args, message, tmp_path):
    result = CliRunner().invoke(app, ["ablate", "--out-dir", str(tmp_path / "abl"), *args])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert not (tmp_path / "abl").exists()


def test_rerun_with_other_settings_is_refused(tmp_path):
    """Resuming into a folder made with different settings would mix results: refused, nothing touched."""
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    for f in (a, b):
        f.write_text('{"task_id": "x", "solution": "def x():\\n    pass\\n"}\n')
    out = tmp_path / "abl"
    out.mkdir()
    (out / "ablation.json").write_text(json.dumps({"arms": [
        {"label": "one", "context": None, "docstring": None, "samples": str(a)},
        {"label": "two", "context": None, "docstring": None, "samples": str(b)}], "backend": "local"}))
    result = CliRunner().invoke(app, ["ablate", "--backend", "local", "--samples", f"one={a}", "--samples",
                                      f"three={b}", "--out-dir", str(out)])
    assert result.exit_code == 2, result.output
    assert "different arms" in result.output
