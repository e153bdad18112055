"""Prompts: a task, a context variant and a docstring choice rendered for completion and chat models.

    source.py     the checkout's files parsed with ast; definitions rendered as stubs
    variants.py   the context-variant registry (none, oracle, class, file, all; compose with +)
    oracle.py     the oracle variant: stubs of exactly what the original body uses
    templates.py  completion/chat templates (string.Template), overridable by a YAML file
    tokens.py     token counting: tiktoken when available, a documented approximation otherwise
    build.py      header + blocks + templates + token budget -> PromptRecord; human docstrings
    records.py    PromptRecord, read/write prompts.jsonl
"""

from coderun.prompts.build import PromptBuild, PromptSpec, build_prompt, build_prompts, load_human_docstrings
from coderun.prompts.records import ChatMessage, PromptRecord, read_prompts, write_prompts
from coderun.prompts.templates import load_templates
from coderun.prompts.tokens import get_tokenizer
from coderun.prompts.variants import ContextBlock, TaskView, parse_context, variant, variant_names

__all__ = [
    "ChatMessage", "ContextBlock", "PromptBuild", "PromptRecord", "PromptSpec", "TaskView", "build_prompt",
    "build_prompts", "get_tokenizer", "load_human_docstrings", "load_templates", "parse_context",
    "read_prompts", "variant", "variant_names", "write_prompts",
]
