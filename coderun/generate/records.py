"""The sample record: one line of samples.jsonl, what `coderun eval` reads.

`solution` is a whole function ready to splice (chat: extracted from the answer; completion: the prompt's
function header + the continuation, cut where the body ends); `raw` is the model's output text as
received (for the completion endpoint: the continuation itself). There is deliberately no `completion`
field: `coderun eval` takes exactly one of solution/completion per line, and `solution` is already
assembled. The server's full JSON responses go to the sibling `*.raw.jsonl`.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict


class GeneratedSample(BaseModel):
    """A model's answer to one prompt as `coderun generate` writes it (read back as an input sample)."""

    model_config = ConfigDict(extra="ignore")

    task_id: str
    prompt_id: str
    index: int
    solution: str
    raw: str
    extraction: str                  # how `solution` was obtained (see extract.Extraction)
    model: str
    endpoint: str
    variant: str                     # "<context>:<docstring>", e.g. "oracle+class:human"
    context: str
    docstring: str
    temperature: float
    top_p: float
    max_tokens: int
    prompt_hash: str
    finish_reason: str | None = None
    attempts: int = 1


class RawResponse(BaseModel):
    """One line of `*.raw.jsonl`: the server's JSON response for one sample."""

    model_config = ConfigDict(extra="ignore")

    prompt_id: str
    index: int
    response: dict


def raw_path_for(samples: Path) -> Path:
    """samples.jsonl -> samples.raw.jsonl (any other name gets `.raw.jsonl` appended)."""
    name = samples.name
    stem = name[: -len(".jsonl")] if name.endswith(".jsonl") else name
    return samples.with_name(stem + ".raw.jsonl")
