"""How a task id written in a samples file resolves: to a task (`TaskRef`), to a known task that cannot
be evaluated (`Unavailable`, with the kind of problem and why), or to nothing (None, an unknown id).

The tasks stage answers (tasks.declared.explaining_resolver); evaluation asks while reading samples
(evaluation.samples), so these live here, below both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from coderun.records import Task


class ProblemKind(str, Enum):
    MALFORMED = "malformed"        # not JSON, not an object, no task id, no code field, wrong types
    UNKNOWN_TASK = "unknown_task"  # the resolver does not know the task id
    UNVERIFIED = "unverified_task"  # a known task whose tests were not verified (weak, flaky, uncovered...)
    UNBUILT = "unbuilt_task"       # a declared task whose project's tasks failed to build or lack it
    EMPTY = "empty"                # the code is blank


@dataclass(frozen=True)
class TaskRef:
    """What loading needs to know about a task: its canonical id and its default prompt."""

    task_id: str
    prompt: str


@dataclass(frozen=True)
class Unavailable:
    """A task id the resolver knows but cannot evaluate, and why (one line, shown as the problem)."""

    task_id: str
    kind: ProblemKind
    reason: str


Resolver = Callable[[str], TaskRef | Unavailable | None]


def default_prompt(task: Task) -> str:
    """Signature + docstring, ending where the body starts (CoderEval's completion prompt)."""
    indent = " " * 4
    doc = (task.docstring or "").replace('"""', r"\"\"\"")
    return f'{task.signature.rstrip()}\n{indent}"""{doc}"""\n{indent}'
