"""Reading samples: both formats, problems with line numbers, completions, normalized hashes."""

from __future__ import annotations

import json

import pytest

from coderun.errors import UsageError
from coderun.evaluation.samples import (
    ProblemKind,
    SampleKind,
    TaskRef,
    default_prompt,
    normalized_hash,
    parse_samples,
    read_samples,
    resolver_from_tasks,
)
from coderun.records import Level, Task
from tests.helpers import CODEREVAL_DATA

CODEGEN = CODEREVAL_DATA / "results-CodeGen-raw.jsonl"


def make_task(task_id: str = "proj/m.py::add", aliases: tuple[str, ...] = ("62e60f43d76274f8a4026e28",)) -> Task:
    return Task(task_id=task_id, aliases=list(aliases), project="proj", commit="c0ffee", file="m.py",
                qualname="add", name="add", lineno=1, end_lineno=3, signature="def add(a, b):",
                docstring="Add two numbers.", source="def add(a, b):\n    return a + b\n",
                level=Level.SELF_CONTAINED)


RESOLVE = resolver_from_tasks([make_task()])


def lines(*records) -> list[str]:
    return [r if isinstance(r, str) else json.dumps(r) for r in records]


def test_solutions_keep_metadata_and_count_indices_per_task():
    loaded = parse_samples(lines(
        {"task_id": "proj/m.py::add", "solution": "def add(a, b):\n    return a + b\n", "model": "m1",
         "temperature": 0.6, "prompt_hash": "abc"},
        {"task_id": "62e60f43d76274f8a4026e28", "solution": "def add(a, b):\n    return 0\n"},
    ), RESOLVE)
    assert loaded.problems == []
    first, second = loaded.samples
    assert (first.task_id, first.index, first.line, first.kind) == ("proj/m.py::add", 0, 1, SampleKind.SOLUTION)
    assert first.metadata == {"model": "m1", "temperature": 0.6, "prompt_hash": "abc"}
    assert (second.task_id, second.index, second.input_id) == ("proj/m.py::add", 1, "62e60f43d76274f8a4026e28")
    assert loaded.per_task() == {"proj/m.py::add": 2}


def test_completion_uses_the_record_prompt_or_the_task_prompt():
    loaded = parse_samples(lines(
        {"task_id": "proj/m.py::add", "completion": "return a + b\n"},
        {"task_id": "proj/m.py::add", "completion": "    return 1\n", "prompt": "def add(a, b):\n"},
    ), RESOLVE)
    own, given = loaded.samples
    assert own.kind is SampleKind.COMPLETION
    assert own.code == default_prompt(make_task()) + "return a + b\n"
    namespace: dict = {}
    exec(own.code, namespace)
    assert namespace["add"](1, 2) == 3 and namespace["add"].__doc__ == "Add two numbers."
    assert given.code == "def add(a, b):\n    return 1\n"
    assert "prompt" not in given.metadata


def test_problems_are_reported_with_line_numbers_and_do_not_stop_loading():
    loaded = parse_samples(lines(
        "{not json",
        {"task_id": "proj/m.py::add", "solution": "def add(a, b): pass"},
        "",
        "[1, 2]",
        {"solution": "def add(): pass"},
        {"task_id": "nope", "solution": "def add(): pass"},
        {"task_id": "proj/m.py::add", "solution": "   \n"},
        {"task_id": "proj/m.py::add", "completion": ""},
        {"task_id": "proj/m.py::add", "solution": "x", "completion": "y"},
        {"task_id": "proj/m.py::add", "solution": 5},
        {"task_id": "proj/m.py::add"},
        {"task_id": "proj/m.py::add", "solution": "def add(a, b): return 1"},
    ), RESOLVE)
    problems = [(p.line, p.kind) for p in loaded.problems]
    assert problems == [
        (1, ProblemKind.MALFORMED), (4, ProblemKind.MALFORMED), (5, ProblemKind.MALFORMED),
        (6, ProblemKind.UNKNOWN_TASK), (7, ProblemKind.EMPTY), (8, ProblemKind.EMPTY),
        (9, ProblemKind.MALFORMED), (10, ProblemKind.MALFORMED), (11, ProblemKind.MALFORMED)]
    assert "column" in loaded.problems[0].message
    # empty samples keep their place: indices follow the input
    assert [(s.line, s.index) for s in loaded.samples] == [(2, 0), (12, 3)]


def codereval_record(_id: str, codes: list[str]) -> dict:
    return {"_id": _id, "project": "neo4j/neo4j-python-driver", "file_path": "m.py", "name": "add",
            "level": "self_contained", "docstring": "d", "code": codes,
            "generate_results": [{"generate_code": c, "is_pass": False, "return_code": 1} for c in codes]}


def test_codereval_records_are_detected_and_problems_carry_their_line():
    loaded = parse_samples(lines(
        codereval_record("62e60f43d76274f8a4026e28", ["def add(a, b):\n\treturn a\n", "", "def add(a, b): pass"]),
        codereval_record("unknown-id", ["def add(): pass"]),
        {"_id": "62e60f43d76274f8a4026e28", "generate_results": "oops"},
    ), RESOLVE)
    assert [(s.index, s.line) for s in loaded.samples] == [(0, 1), (2, 1)]
    assert loaded.samples[0].metadata["format"] == "codereval"
    assert loaded.samples[0].metadata["codereval_project"] == "neo4j/neo4j-python-driver"
    assert [(p.line, p.kind) for p in loaded.problems] == [
        (1, ProblemKind.EMPTY), (2, ProblemKind.UNKNOWN_TASK), (3, ProblemKind.MALFORMED)]


def test_codegen_release_file_loads_as_it_is():
    ids = {json.loads(line)["_id"] for line in CODEGEN.open()}
    loaded = read_samples(CODEGEN, lambda i: TaskRef(f"codereval/{i}", "") if i in ids else None)
    assert loaded.problems == []
    assert len(loaded.samples) == 2297 and len(loaded.per_task()) == 230
    assert {s.line for s in loaded.samples} == set(range(1, 231))
    assert all(s.index < 10 for s in loaded.samples)
    assert "\t" in loaded.samples[0].code    # tab-indented, taken verbatim


def test_read_samples_missing_file_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="not found"):
        read_samples(tmp_path / "nope.jsonl", RESOLVE)
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(UsageError):
        read_samples(bad, RESOLVE)


def test_normalized_hash_ignores_whitespace_only_differences():
    tabbed = "def f(x):\n\tif x:\n\t\treturn 1   \n\n\treturn 2\n"
    spaced = "    def f(x):\r\n            if x:\r\n                    return 1\r\n            return 2"
    eight = "def f(x):\n        if x:\n                return 1\n        return 2\n"
    assert normalized_hash(tabbed) == normalized_hash(eight) == normalized_hash(spaced)
    assert normalized_hash(tabbed) != normalized_hash(tabbed.replace("return 2", "return 3"))
    assert normalized_hash("def f():\n    return 1\n") != normalized_hash("def f():\nreturn 1\n")
