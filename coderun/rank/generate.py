"""`--tests model`: test cases of the target asked of the model, in its project context, and parsed.

The prompt is the code-generation prompt's context (the oracle context: what the original uses of its
file and class, `coderun prompts --context oracle`), the function's header with its docstring, and a
request for pytest test functions importing it from its module. The model is asked through the same
OpenAI-compatible client as `coderun generate` (chat endpoint), `requests` times per task, once: the
answers are kept in the run store (`rank_tests`), so a resumed ranking does not ask again.

Parsing: every ```python block of an answer (the whole answer without one); its top-level imports, and each
top-level `def test_*` (with its decorators) as one test, renamed `test_gen<i>_<name>` so that tests of
several answers do not shadow each other. A test is dropped, and counted by why, when it does not parse,
when it reads source files (inspect.getsource..., __file__, a `.py` path or the target's file name; files of
its own, e.g. under tmp_path, are fine: in the sandbox the target's file holds the sample, so such a test could
only be reading what it tests), or
when it is parametrized (the run selects tests by node id, and a parametrized test's ids are pytest's).
"""

from __future__ import annotations

import ast
import hashlib
import posixpath
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from string import Template

from coderun.generate.base import Endpoint, GenerationRequest, Provider
from coderun.prompts.build import PromptSpec, build_prompt
from coderun.prompts.source import ProjectSource
from coderun.prompts.templates import DEFAULT_COMPLETION, Templates
from coderun.rank.records import GeneratedTest, GeneratedTests
from coderun.records import Task

TEST_FILE = "test_coderun_rank_generated.py"
DOES_NOT_PARSE = "does not parse"
READS_SOURCE = "reads a source file (the original's)"
PARAMETRIZED = "parametrized (its ids are unknown before collection)"
_FENCE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.S)
_TEST_DEF = re.compile(r"^(?:async\s+)?def\s+(test\w*)\s*\(", re.M)
# inspect's readers of code; a test may open files of its own (tmp_path), but not a .py file or __file__
_READERS = {"getsource", "getsourcelines", "getsourcefile", "getfile", "findsource", "getmodule"}
SYSTEM = ("You are an expert Python tester. You write pytest test functions for one function of an existing "
          "project, checking what it should do according to its docstring and its context.")
USER = ("${context_section}Write pytest test functions (named test_...) for the following function of "
        "`${file}` in project ${project}. Do not implement it. Each test calls it on concrete inputs and "
        "asserts on the result. Reply with the tests in a single ```python code block.\n\n"
        "```python\n${header}```\n")


def module_name(task: Task, import_root: str) -> str:
    """The dotted module of the task's file, as the project's tests import it."""
    rel = posixpath.relpath(task.file, import_root) if import_root and import_root != "." else task.file
    parts = rel[:-3].split("/") if rel.endswith(".py") else rel.split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def messages(task: Task, root: Path, import_root: str) -> tuple[tuple[str, str], ...]:
    templates = Templates(*(Template(t) for t in (DEFAULT_COMPLETION, SYSTEM, USER)))
    record = build_prompt(task, ProjectSource(root), PromptSpec(context="oracle", templates=templates),
                          task.docstring or task.human_docstring or "")
    holder = task.class_name or task.name
    user = (record.messages[-1].content + f"\nImport it as `from {module_name(task, import_root)} import "
            f"{holder}`" + (f" (it is a method of {holder})." if task.class_name else "."))
    return (("system", record.messages[0].content), ("user", user))


def ask(provider: Provider, model: str, task: Task, root: Path, import_root: str, requests: int,
        max_tokens: int = 1024, temperature: float = 0.8) -> GeneratedTests:
    msgs = messages(task, root, import_root)
    answers = [provider.generate(GenerationRequest(endpoint=Endpoint.CHAT, model=model, messages=msgs,
                                                   temperature=temperature, max_tokens=max_tokens)).text
               for _ in range(requests)]
    return parse(task, model, answers)


def parse(task: Task, model: str, answers: Sequence[str]) -> GeneratedTests:
    kept: list[GeneratedTest] = []
    dropped: Counter[str] = Counter()
    for a, answer in enumerate(answers):
        for block in _FENCE.findall(answer) or [answer]:
            imports = [line for line in block.splitlines() if line.startswith(("import ", "from "))]
            for name, body in _tests(block):
                source = "\n".join(imports) + "\n\n\n" + _renamed(body, name, f"test_gen{a}_{name}")
                why = _unusable(source, task)
                if why:
                    dropped[why] += 1
                else:
                    kept.append(GeneratedTest(name=f"test_gen{a}_{name}", source=source))
    kept = list({t.name: t for t in kept}.values())
    key = hashlib.sha256(generated_file(kept).encode("utf-8")).hexdigest()[:16]
    return GeneratedTests(task_id=task.task_id, model=model, completions=list(answers), tests=kept,
                          dropped=dict(dropped), key=key)


def _tests(block: str) -> list[tuple[str, str]]:
    """(name, text) of each top-level test function of a block, with the decorators just above it."""
    lines = block.splitlines()
    out = []
    for m in _TEST_DEF.finditer(block):
        start = block.count("\n", 0, m.start())
        while start > 0 and lines[start - 1].startswith("@"):
            start -= 1
        end = block.count("\n", 0, m.start()) + 1
        while end < len(lines) and (not lines[end].strip() or lines[end][:1] in (" ", "\t", ")", "#")):
            end += 1
        out.append((m.group(1), "\n".join(lines[start:end]).rstrip() + "\n"))
    return out


def _renamed(body: str, old: str, new: str) -> str:
    return re.sub(rf"^((?:async\s+)?def\s+){re.escape(old)}\b", rf"\g<1>{new}", body, count=1, flags=re.M)


def _unusable(source: str, task: Task) -> str | None:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return DOES_NOT_PARSE
    target_file = posixpath.basename(task.file)
    if "parametrize" in source:
        return PARAMETRIZED
    for node in ast.walk(tree):
        called = node.func if isinstance(node, ast.Call) else None
        name = getattr(called, "id", None) or getattr(called, "attr", None)
        if name in _READERS or (isinstance(node, ast.Name) and node.id == "__file__"):
            return READS_SOURCE
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and (
                target_file in node.value or node.value.strip().endswith(".py")):
            return READS_SOURCE
    return None


def generated_file(tests: Sequence[GeneratedTest]) -> str:
    """One pytest file of the kept tests: each test's imports above it (a failing import fails its tests)."""
    parts = ["import pytest  # noqa: F401  (generated tests by coderun rank --tests model)\n"]
    for t in tests:
        imports, _, body = t.source.partition("\n\n\n")
        guarded = "\n".join(f"try:\n    {line}\nexcept Exception:\n    pass" for line in imports.splitlines())
        parts.append(f"{guarded}\n\n\n{body}")
    return "\n\n".join(parts)


def generated_path(task: Task) -> str:
    """Where the generated file goes in the copy: beside the task's first test file (its conftest applies)."""
    first = task.runs()[0].tests[0].split("::", 1)[0]
    return posixpath.join(posixpath.dirname(first), TEST_FILE)
