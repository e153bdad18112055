"""Reading generated samples (JSON lines) into typed `InputSample` records.

Two formats, detected per line:

- coderun's: `{"task_id": ..., "solution": "<whole function>"}` or `{"task_id": ..., "completion": "<text
  continuing the prompt>", "prompt": "<optional>"}`; every other field (model, variant, temperature,
  prompt_hash, ...) is kept as metadata. A completion's function is prompt + completion, the prompt being
  the record's own `prompt` or, without one, the task's (signature + docstring, from the resolver).
- CoderEval's released result files: one record per task with `_id` and `generate_results[].generate_code`;
  each generated code is a solution. CoderEval's own fields are kept as metadata under `codereval_*`
  for reports; grading never reads them.

Bad lines do not stop loading: malformed JSON or records, unknown task ids and empty samples become
`SampleProblem`s with their line numbers; so do known ids whose task cannot be evaluated (the resolver
answers `Unavailable` with the reason, e.g. the task was declared but not verified). A sample's `index` is
its position among the samples of its task in input order, counting the empty ones, so indices match the
input (CoderEval's `generate_results` order).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from coderun.errors import UsageError
from coderun.records import Task
from coderun.tasks.resolve import ProblemKind, Resolver, TaskRef, Unavailable, default_prompt


class SampleKind(str, Enum):
    SOLUTION = "solution"      # a whole function
    COMPLETION = "completion"  # prompt + completion is the function


class InputSample(BaseModel):
    """One sample as read from an input samples file, resolved to its task (before it joins a run)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task_id: str                   # canonical coderun task id
    index: int                     # position among the samples of this task, in input order
    line: int                      # 1-based line of the input file
    code: str                      # the whole function text (prompt + completion for completions)
    kind: SampleKind
    input_id: str                  # the id as written in the input (an alias such as a CoderEval _id)
    metadata: dict[str, JsonValue] = Field(default_factory=dict)


class SampleProblem(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    line: int
    kind: ProblemKind
    message: str
    task_id: str | None = None


class LoadedSamples(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    samples: list[InputSample] = Field(default_factory=list)
    problems: list[SampleProblem] = Field(default_factory=list)

    def per_task(self) -> dict[str, int]:
        return dict(Counter(s.task_id for s in self.samples))


def resolver_from_tasks(tasks: Iterable[Task], prompt: Callable[[Task], str] = default_prompt) -> Resolver:
    """A resolver that knows tasks by id and by every alias."""
    table: dict[str, TaskRef] = {}
    for task in tasks:
        ref = TaskRef(task.task_id, prompt(task))
        for key in (task.task_id, *task.aliases):
            table[key] = ref
    return table.get


def first_of(*resolvers: Resolver) -> Resolver:
    """A resolver asking each of `resolvers` in turn; the first answer that is not None wins."""
    def resolve(task_id: str) -> TaskRef | Unavailable | None:
        for r in resolvers:
            if (ref := r(task_id)) is not None:
                return ref
        return None
    return resolve


_T = TypeVar("_T")
_CODE_FIELDS = ("solution", "completion")
_CODEREVAL_KEEP = ("project", "file_path", "name", "level")


class _Bad(Exception):
    def __init__(self, kind: ProblemKind, message: str, task_id: str | None = None):
        super().__init__(message)
        self.problem = (kind, message, task_id)


@dataclass(frozen=True)
class _Raw:
    input_id: str
    code: str
    kind: SampleKind
    metadata: dict[str, JsonValue]


def _coderun_record(record: dict, resolver: Resolver) -> list[_Raw]:
    task_id = record.get("task_id")
    if not isinstance(task_id, str) or not task_id:
        raise _Bad(ProblemKind.MALFORMED, "no 'task_id' (a string)")
    fields = [f for f in _CODE_FIELDS if f in record]
    if len(fields) != 1:
        raise _Bad(ProblemKind.MALFORMED, "needs exactly one of 'solution' or 'completion'", task_id)
    kind = SampleKind(fields[0])
    text = record[fields[0]]
    if not isinstance(text, str):
        raise _Bad(ProblemKind.MALFORMED, f"'{fields[0]}' must be a string", task_id)
    prompt = record.get("prompt")
    if prompt is not None and not isinstance(prompt, str):
        raise _Bad(ProblemKind.MALFORMED, "'prompt' must be a string", task_id)
    metadata = {k: v for k, v in record.items() if k not in ("task_id", "prompt", *_CODE_FIELDS)}
    if kind is SampleKind.COMPLETION and text.strip():
        if prompt is None:
            ref = resolver(task_id)
            prompt = ref.prompt if isinstance(ref, TaskRef) else ""
        text = prompt + text
    return [_Raw(task_id, text, kind, metadata)]


def _codereval_record(record: dict) -> list[_Raw]:
    task_id = record.get("_id")
    results = record.get("generate_results")
    if not isinstance(task_id, str) or not task_id:
        raise _Bad(ProblemKind.MALFORMED, "CoderEval record without an '_id' (a string)")
    if not isinstance(results, list) or not all(isinstance(r, dict) for r in results):
        raise _Bad(ProblemKind.MALFORMED, "'generate_results' must be a list of objects", task_id)
    common = {f"codereval_{k}": record[k] for k in _CODEREVAL_KEEP if k in record}
    out = []
    for result in results:
        code = result.get("generate_code")
        if not isinstance(code, str):
            raise _Bad(ProblemKind.MALFORMED, "'generate_code' must be a string", task_id)
        extra = {f"codereval_{k}": v for k, v in result.items() if k != "generate_code"}
        out.append(_Raw(task_id, code, SampleKind.SOLUTION, {"format": "codereval", **common, **extra}))
    return out


def _records(line: str, resolver: Resolver) -> list[_Raw]:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise _Bad(ProblemKind.MALFORMED, f"not JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(record, dict):
        raise _Bad(ProblemKind.MALFORMED, f"expected a JSON object, got {type(record).__name__}")
    if "generate_results" in record:
        return _codereval_record(record)
    return _coderun_record(record, resolver)


def parse_samples(lines: Iterable[str], resolver: Resolver) -> LoadedSamples:
    """Samples and problems from JSON lines (blank lines are skipped)."""
    samples: list[InputSample] = []
    problems: list[SampleProblem] = []
    counters: Counter[str] = Counter()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            raws = _records(line, resolver)
        except _Bad as bad:
            kind, message, task_id = bad.problem
            problems.append(SampleProblem(line=number, kind=kind, message=message, task_id=task_id))
            continue
        for raw in raws:
            ref = resolver(raw.input_id)
            if ref is None:
                problems.append(SampleProblem(line=number, kind=ProblemKind.UNKNOWN_TASK, task_id=raw.input_id,
                                              message=f"unknown task id {raw.input_id!r}"))
                break   # every sample of this line has the same id
            if isinstance(ref, Unavailable):
                problems.append(SampleProblem(line=number, kind=ref.kind, task_id=ref.task_id, message=ref.reason))
                break
            index = counters[ref.task_id]
            counters[ref.task_id] += 1
            if not raw.code.strip():
                problems.append(SampleProblem(line=number, kind=ProblemKind.EMPTY, task_id=ref.task_id,
                                              message=f"empty sample (#{index} of {ref.task_id})"))
                continue
            samples.append(InputSample(task_id=ref.task_id, index=index, line=number, code=raw.code,
                                  kind=raw.kind, input_id=raw.input_id, metadata=raw.metadata))
    return LoadedSamples(samples=samples, problems=problems)


def read_samples(path: Path, resolver: Resolver) -> LoadedSamples:
    """Samples of a JSON-lines file; a missing or unreadable file is a usage error."""
    return _read(path, lambda handle: parse_samples(handle, resolver))


def read_lines(path: Path) -> list[str]:
    """A samples file's lines, read once (its ids decide what to build before its samples are resolved)."""
    return _read(path, list)


def sample_ids(lines: Iterable[str]) -> list[str]:
    """The task ids JSON-lines samples name, as written, in order, once each (bad lines skipped): what to
    build before the samples can be resolved."""
    seen: dict[str, None] = {}
    for line in lines:
        try:
            raws = _records(line, lambda _id: None) if line.strip() else []
        except _Bad:
            continue
        seen.update((r.input_id, None) for r in raws)
    return list(seen)


def _read(path: Path, read: Callable[[Iterable[str]], _T]) -> _T:
    try:
        with path.open(encoding="utf-8") as handle:
            return read(handle)
    except FileNotFoundError:
        raise UsageError(f"samples file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read samples file {path}: {exc}",
                         hint="samples are JSON lines in UTF-8") from None


def normalized_hash(code: str) -> str:
    """A hash equal for samples that differ only in whitespace: trailing spaces, blank lines, tabs in
    indentation (expanded as Python does, 8 columns), a common indentation, line endings."""
    lines = []
    for line in code.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        body = line.lstrip(" \t")
        if body.rstrip():
            lines.append(line[: len(line) - len(body)].expandtabs(8) + body.rstrip())
    common = min((len(ln) - len(ln.lstrip(" ")) for ln in lines), default=0)
    text = "\n".join(ln[common:] for ln in lines)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
