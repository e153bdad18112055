"""The draft as YAML, each section after the comments that say where its values came from."""

from __future__ import annotations

import textwrap

import yaml

_ORDER = ("name", "description", "source", "python", "import_root", "install", "tests", "tasks")


def render(data: dict, notes: dict[str, list[str]], *, source: str, kind: str, commit: str,
           warnings: list[str]) -> str:
    """The manifest `data` as commented YAML; `kind` and `commit` say what was read (a Checkout's)."""
    head = [f"# Drafted by `coderun projects add {source}` from {kind} source at commit {commit[:12]}.",
            "# Every value below was read from the project's files; check them, then run",
            "# `coderun env build <this file>` and look at the baseline.",
            "# Reference of every field: docs/manifests.md (coderun's documentation)."]
    head += [f"# WARNING: {w}" for w in warnings]
    out = ["\n".join(head), ""]
    for key in _ORDER:
        if key not in data:
            continue
        section = {"description": "name", "source": "name", "import_root": "import_root"}.get(key, key)
        for note in notes.get(key, []) if section == key else []:
            out.append(_comment(note))
        out.append(yaml.dump({key: data[key]}, Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                             width=110, allow_unicode=True).rstrip())
    return "\n".join(out) + "\n"


class _Dumper(yaml.SafeDumper):
    """Block style, except that a short list of plain strings stays on one line (as people write it)."""


def _represent_list(dumper: yaml.SafeDumper, value: list) -> yaml.Node:
    flow = all(isinstance(v, str) for v in value) and sum(len(v) + 4 for v in value) < 90
    return dumper.represent_sequence("tag:yaml.org,2002:seq", value, flow_style=flow)


_Dumper.add_representer(list, _represent_list)


def _comment(text: str) -> str:
    return "\n".join("# " + line for line in textwrap.wrap(text, 106))
