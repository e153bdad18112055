"""The prompt record: one line of prompts.jsonl, what `coderun generate` reads.

Each record carries both renderings of the same content: `prompt` for completion endpoints (it ends with
the function header, indented `indent` columns, so a continuation is the body) and `messages` for chat
endpoints. `prompt_hash` covers both, so samples can be grouped by the exact prompt they answered.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from coderun.errors import UsageError


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: str
    content: str


class PromptRecord(BaseModel):
    model_config = ConfigDict(extra="ignore")

    prompt_id: str                   # "<task_id>@<variant>"
    task_id: str
    project: str
    level: str
    file: str
    qualname: str
    name: str                        # the function's name, to find it in a chat answer
    context: str                     # e.g. "oracle+class"
    docstring: str                   # "original" | "human"
    prompt: str                      # completion rendering
    messages: list[ChatMessage]      # chat rendering
    header: str                      # the function header `prompt` ends with
    indent: int = 0                  # columns the header's `def` is indented in `prompt`
    tokens: int = 0                  # of the longer rendering, counted with `tokenizer`
    tokenizer: str = ""
    max_tokens: int | None = None
    truncated: list[str] = Field(default_factory=list)   # context blocks cut to fit the budget
    over_budget: bool = False        # the header alone is longer than the budget
    prompt_hash: str = ""

    @property
    def variant(self) -> str:
        return variant_name(self.context, self.docstring)

    def with_hash(self) -> PromptRecord:
        return self.model_copy(update={"prompt_hash": prompt_hash(self.prompt, self.messages)})


def variant_name(context: str, docstring: str) -> str:
    return f"{context}:{docstring}"


def prompt_hash(prompt: str, messages: list[ChatMessage]) -> str:
    payload = json.dumps({"prompt": prompt, "messages": [m.model_dump() for m in messages]}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def read_prompts(path: Path) -> list[PromptRecord]:
    """Every record of a prompts file; a bad line is reported with its number."""
    if not path.is_file():
        raise UsageError(f"prompts file not found: {path}", hint="create it with `coderun prompts -o FILE`")
    out: list[PromptRecord] = []
    seen: set[str] = set()
    for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = PromptRecord.model_validate_json(line)
        except ValidationError as e:
            raise UsageError(f"{path}:{no}: not a prompt record: {e.errors()[0]['msg']} "
                             f"at {'.'.join(map(str, e.errors()[0]['loc']))}") from None
        if rec.prompt_id in seen:
            raise UsageError(f"{path}:{no}: duplicate prompt_id {rec.prompt_id!r}")
        seen.add(rec.prompt_id)
        out.append(rec if rec.prompt_hash else rec.with_hash())
    if not out:
        raise UsageError(f"{path} holds no prompts")
    return out


def write_prompts(records: list[PromptRecord], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for rec in records:
            f.write(rec.model_dump_json() + "\n")
