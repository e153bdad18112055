"""Tasks -> prompt records: header, context blocks, templates, token budget.

The header is the function's decorators and signature as written in the file, moved to column 0, with
the chosen docstring (original or human-labeled) re-rendered beneath it. A task without a human-labeled
docstring is skipped, with the reason, for `--docstring human`.

Token budget (`max_tokens`): the longer of the two renderings (completion prompt; chat system + user)
must fit. While it does not, the lowest-priority context block with lines left is cut from its end by
about the excess (whole lines), a `# ...` marker noting the cut; a block with no lines left is dropped.
The order is the one in variants.PRIORITY: all, file, oracle:project, oracle:file, oracle:imports,
class, oracle:class. The header is never cut: a prompt whose header alone exceeds the budget is kept
and marked `over_budget`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from coderun.errors import TaskError, UsageError
from coderun.prompts.records import ChatMessage, PromptRecord, variant_name
from coderun.prompts.source import ProjectSource, docstring_lines, reindent
from coderun.prompts.templates import Templates, default_templates
from coderun.prompts.tokens import APPROX, Tokenizer
from coderun.prompts.variants import ContextBlock, TaskView, context_blocks, parse_context
from coderun.records import Task

DocstringKind = Literal["original", "human"]
CUT_MARKER = "# ... (cut to fit the token budget)"


@dataclass(frozen=True)
class PromptSpec:
    context: str = "none"
    docstring: DocstringKind = "original"
    max_tokens: int | None = None
    templates: Templates = field(default_factory=default_templates)
    tokenizer: Tokenizer = APPROX

    def __post_init__(self) -> None:
        parse_context(self.context)
        if self.docstring not in ("original", "human"):
            raise UsageError(f"--docstring must be original or human, not {self.docstring!r}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise UsageError(f"--max-tokens must be positive, not {self.max_tokens}")


@dataclass
class PromptBuild:
    records: list[PromptRecord] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)   # (task_id, why)


def build_prompts(tasks: list[Task], checkout: Callable[[Task], Path], spec: PromptSpec,
                  human: dict[str, str] | None = None) -> PromptBuild:
    """One prompt per task; `checkout(task)` gives the project's source tree (read only)."""
    out = PromptBuild()
    projects: dict[Path, ProjectSource] = {}
    for task in tasks:
        doc = _docstring(task, spec.docstring, human or {})
        if doc is None:
            out.skipped.append((task.task_id, "no human-labeled docstring (manifest or --human-docstrings)"))
            continue
        root = checkout(task)
        project = projects.setdefault(root, ProjectSource(root))
        out.records.append(build_prompt(task, project, spec, doc))
    return out


def _docstring(task: Task, kind: DocstringKind, human: dict[str, str]) -> str | None:
    if kind == "original":
        return task.docstring
    if task.human_docstring:
        return task.human_docstring
    return next((human[k] for k in (task.task_id, *task.aliases) if k in human), None)


def build_prompt(task: Task, project: ProjectSource, spec: PromptSpec, docstring: str) -> PromptRecord:
    source = project.file(task.file)
    if source is None:
        raise TaskError(f"{task.task_id}: cannot read or parse {task.file} in {project.root}")
    node = source.find_function(task.qualname, task.lineno)
    view = TaskView(task=task, file=source, node=node, project=project)
    header = function_header(view, docstring)
    blocks = context_blocks(view, spec.context)
    fitted = _fit(blocks, lambda bs: _render(spec.templates, view, header, docstring, bs), spec)
    completion, system, user = fitted.rendered
    record = PromptRecord(
        prompt_id=f"{task.task_id}@{variant_name(spec.context, spec.docstring)}", task_id=task.task_id,
        project=task.project, level=task.level.value, file=task.file, qualname=task.qualname, name=task.name,
        context=spec.context, docstring=spec.docstring, prompt=completion,
        messages=[ChatMessage(role="system", content=system), ChatMessage(role="user", content=user)],
        header=header, indent=0, tokens=fitted.tokens, tokenizer=spec.tokenizer.name,
        max_tokens=spec.max_tokens, truncated=fitted.notes, over_budget=fitted.over)
    return record.with_hash()


def function_header(view: TaskView, docstring: str) -> str:
    f, node = view.file, view.node
    head = reindent(f.segment(f.start_line(node), f.header_end(node)), " " * node.col_offset, "")
    doc = docstring_lines(docstring, " " * 4) + "\n" if docstring.strip() else ""
    return head + "\n" + doc


def _render(t: Templates, view: TaskView, header: str, docstring: str,
            blocks: list[ContextBlock]) -> tuple[str, str, str]:
    joined = "\n\n".join(f"# {b.title}\n{b.text.rstrip()}" for b in blocks)
    task = view.task
    values = {
        "context": joined + "\n\n\n" if joined else "",
        "context_section": (f"Context from `{task.file}` in project {task.project}:\n\n```python\n{joined}\n```\n\n"
                            if joined else ""),
        "header": header, "signature": task.signature, "docstring": docstring, "name": task.name,
        "qualname": task.qualname, "class_name": task.class_name or "", "file": task.file,
        "project": task.project}
    return t.render(values)


@dataclass
class _Fitted:
    rendered: tuple[str, str, str]
    tokens: int
    notes: list[str]
    over: bool


def _fit(blocks: list[ContextBlock], render: Callable[[list[ContextBlock]], tuple[str, str, str]],
         spec: PromptSpec) -> _Fitted:
    count = spec.tokenizer.count
    lines = [b.text.splitlines() for b in blocks]
    kept = [len(ls) for ls in lines]

    def current() -> list[ContextBlock]:
        out = []
        for b, ls, k in zip(blocks, lines, kept, strict=True):
            if k:
                text = "\n".join(ls[:k]) + ("\n" + CUT_MARKER if k < len(ls) else "")
                out.append(ContextBlock(b.kind, b.title, text))
        return out

    def size(rendered: tuple[str, str, str]) -> int:
        return max(count(rendered[0]), count(rendered[1]) + count(rendered[2]))

    rendered = render(blocks)
    tokens = size(rendered)
    while spec.max_tokens is not None and tokens > spec.max_tokens:
        live = [i for i, k in enumerate(kept) if k]
        if not live:
            break
        i = min(live, key=lambda j: (blocks[j].priority, -j))
        excess, removed = tokens - spec.max_tokens, 0
        while kept[i] and removed < excess:
            kept[i] -= 1
            removed += count(lines[i][kept[i]] + "\n")
        rendered = render(current())
        tokens = size(rendered)
    notes = [f"{b.kind}: {'dropped' if not k else f'{k} of {len(ls)} lines kept'}"
             for b, ls, k in zip(blocks, lines, kept, strict=True) if k < len(ls)]
    return _Fitted(rendered, tokens, notes, spec.max_tokens is not None and tokens > spec.max_tokens)


def load_human_docstrings(path: Path) -> dict[str, str]:
    """CoderEval's CEPythonHumanLabel.jsonl shape: one {"question_id", "docstring"} object per line."""
    if not path.is_file():
        raise UsageError(f"human docstrings file not found: {path}")
    out: dict[str, str] = {}
    for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            key, doc = row["question_id"], row["docstring"]
        except (ValueError, KeyError, TypeError):
            raise UsageError(f"{path}:{no}: expected a JSON object with question_id and docstring") from None
        if not isinstance(key, str) or not isinstance(doc, str):
            raise UsageError(f"{path}:{no}: question_id and docstring must be strings")
        out[key] = doc
    return out
