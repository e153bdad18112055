"""Completion and chat templates (string.Template: `${name}` placeholders, `$$` for a dollar sign).

A user template file is YAML with any of the keys `completion`, `system`, `user`; a missing key keeps
the default. Placeholders:

    ${context}          the context blocks as Python source, each under a `# title` comment, followed by
                        a blank line (empty for the `none` variant)
    ${context_section}  chat: "Context from <file> ...:\n```python\n<context>```\n\n" (empty when none)
    ${header}           the function header: decorators, signature, docstring (ends with a newline)
    ${signature} ${docstring} ${name} ${qualname} ${class_name} ${file} ${project}

An unknown placeholder is an error when the template is loaded, not when the first prompt is rendered.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from string import Template

import yaml

from coderun.errors import UsageError

PLACEHOLDERS = ("context", "context_section", "header", "signature", "docstring", "name", "qualname",
                "class_name", "file", "project")

DEFAULT_COMPLETION = "${context}${header}"
DEFAULT_SYSTEM = ("You are an expert Python programmer. You write the body of a function inside an "
                  "existing project, using the project's own code where it helps.")
DEFAULT_USER = ("${context_section}Complete the following Python function. Reply with the whole function "
                "(signature included) in a single ```python code block.\n\n```python\n${header}```\n")


@dataclass(frozen=True)
class Templates:
    completion: Template
    system: Template
    user: Template

    def render(self, values: dict[str, str]) -> tuple[str, str, str]:
        return (self.completion.substitute(values), self.system.substitute(values),
                self.user.substitute(values))


def default_templates() -> Templates:
    return Templates(Template(DEFAULT_COMPLETION), Template(DEFAULT_SYSTEM), Template(DEFAULT_USER))


def load_templates(path: Path | None) -> Templates:
    if path is None:
        return default_templates()
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise UsageError(f"cannot read template file {path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise UsageError(f"template file {path} is not YAML: {e}") from None
    if not isinstance(data, dict) or not data or set(data) - {"completion", "system", "user"}:
        raise UsageError(f"template file {path}: expected a mapping with keys completion, system, user "
                         f"(any of them); got {sorted(data) if isinstance(data, dict) else type(data).__name__}")
    chosen = {"completion": DEFAULT_COMPLETION, "system": DEFAULT_SYSTEM, "user": DEFAULT_USER}
    for key, text in data.items():
        if not isinstance(text, str):
            raise UsageError(f"template file {path}: `{key}` must be a string")
        chosen[key] = text
        _check(path, key, Template(text))
    return Templates(*(Template(chosen[k]) for k in ("completion", "system", "user")))


def _check(path: Path, key: str, template: Template) -> None:
    names: set[str] = set()
    for m in template.pattern.finditer(template.template):  # Template.get_identifiers is 3.11+
        if m.group("invalid") is not None:
            raise UsageError(f"template file {path}: `{key}` has a malformed placeholder "
                             "(write $$ for a dollar sign)")
        names.add(m.group("named") or m.group("braced") or "")
    unknown = names - set(PLACEHOLDERS) - {""}
    if unknown:
        raise UsageError(f"template file {path}: `{key}` uses unknown placeholder(s) "
                         f"{', '.join(sorted(unknown))}; known: {', '.join(PLACEHOLDERS)}")
