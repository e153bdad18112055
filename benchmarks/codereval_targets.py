"""Data preparation: list CoderEval's task functions in manifests' `tasks.targets`.

For each CoderEval task of a mapped project (results-CodeGen-raw.jsonl gives file and name), find the
function in the project's sdist tree (a name may be defined several times in a file: the definition
whose docstring matches CoderEval's is taken), and write `function`, `aliases: [<_id>]` and the
human-labeled docstring (CEPythonHumanLabel.jsonl, question_id = _id) into the manifest's `tasks:`
section. A function that is not in the tree (or cannot be singled out) is written too, at CoderEval's path,
with a `status_note` saying so, so that every CoderEval task of a mapped project is declared and
`coderun tasks list --targets` accounts for it; a note written by hand for a target that is found is kept.

    python benchmarks/codereval_targets.py [--dry-run] [--data DIR] [--map OWNER/NAME=MANIFEST[:PREFIX] ...]
                                           [-o DIR]

Without --map, CoderEval's projects are mapped to the built-in manifests (the table below). MANIFEST is a
manifest file or a project name; PREFIX is what the project's tree puts before CoderEval's file paths. The
manifests are rewritten in place, or written to `-o DIR` under their own file names.

Not product code: coderun never reads CoderEval's data; this script writes manifests once.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import inspect
import json
import re
from collections import defaultdict
from pathlib import Path

import yaml

from coderun.config import load_settings
from coderun.envs.sources import Checkout, checkout, describe_source
from coderun.manifests.schema import Manifest, find_manifest, load_manifest

from _data import add_data_option, codereval_data

PROJECTS = {  # CoderEval's GitHub project -> (built-in manifest, prefix of file paths in the sdist)
    "pexip/os-python-cachetools": ("cachetools", ""),
    "pexip/os-python-dateutil": ("python-dateutil", ""),
    "witten/borgmatic": ("borgmatic", ""),
    "witten/atticmatic": ("borgmatic", ""),
    "cpburnz/python-sql-parameters": ("sqlparams", ""),
    "skorokithakis/shortuuid": ("shortuuid", ""),
    "jaywink/federation": ("federation", ""),
    "pexip/os-zope": ("zope.interface", ""),
}


def definitions(source: str, name: str) -> list[tuple[str, str, str]]:
    """(qualname, docstring, argument names) of every function called `name`, nested ones excluded."""
    out: list[tuple[str, str, str]] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                if child.name == name:
                    out.append((prefix + child.name, ast.get_docstring(child) or "", _args(child)))
            elif isinstance(child, ast.If | ast.Try | ast.With):
                walk(child, prefix)

    walk(ast.parse(source), "")
    return out


def _args(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    a = fn.args
    return ",".join(x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs])


def pick(defs: list[tuple[str, str, str]], docstring: str, signature: str) -> tuple[str | None, str]:
    """The definition CoderEval means: the only one, the one whose docstring matches, or whose arguments do."""
    if not defs:
        return None, "not in the file"
    if len(defs) == 1:
        return defs[0][0], ""
    want = inspect.cleandoc(docstring)
    scored = sorted(((difflib.SequenceMatcher(None, want, d).ratio(), q) for q, d, _ in defs), reverse=True)
    best, second = scored[0], scored[1]
    if best[0] >= 0.6 and best[0] - second[0] >= 0.1:
        return best[1], ""
    try:
        sig = ast.parse(signature.strip() + "\n    pass").body[0]
        same = [q for q, _, args in defs if args == _args(sig)]
    except SyntaxError:
        same = []
    if len(same) == 1:
        return same[0], ""
    return None, (f"{len(defs)} definitions and neither docstring nor signature singles one out: "
                  + ", ".join(q for _, q in scored))


def parse_map(items: list[str]) -> dict[str, tuple[str, str]]:
    """`OWNER/NAME=MANIFEST[:PREFIX]` items as CoderEval project -> (manifest, prefix)."""
    out = {}
    for item in items:
        project, sep, rest = item.partition("=")
        if not sep or not project or not rest:
            raise SystemExit(f"--map {item!r}: expected OWNER/NAME=MANIFEST[:PREFIX]")
        manifest, _, prefix = rest.partition(":")
        out[project] = (manifest, prefix)
    return out


def main(dry_run: bool, data: Path, projects: dict[str, tuple[str, str]], out_dir: Path | None) -> None:
    data_dir = codereval_data(data, "results-CodeGen-raw.jsonl", "CEPythonHumanLabel.jsonl", "CEPythonRaw.jsonl")
    rows = [json.loads(line) for line in (data_dir / "results-CodeGen-raw.jsonl").open()]
    human = {r["question_id"]: r["docstring"] for r in map(json.loads, (data_dir / "CEPythonHumanLabel.jsonl").open())}
    signature = {r["question_id"]: r["signature"] for r in map(json.loads, (data_dir / "CEPythonRaw.jsonl").open())}
    settings = load_settings()
    targets: dict[str, dict[str, dict]] = defaultdict(dict)  # manifest -> function -> target
    absent: list[str] = []
    trees: dict[str, Checkout] = {}
    manifests: dict[str, Manifest] = {}
    for r in rows:
        if r["project"] not in projects:
            continue
        ref, prefix = projects[r["project"]]
        manifest = manifests.setdefault(ref, find_manifest(ref, settings))
        co = trees.setdefault(manifest.name, checkout(manifest, settings))
        rel = prefix + r["file_path"]
        path = co.path / rel
        qual, why = (pick(definitions(path.read_text(encoding="utf-8"), r["name"]), r["docstring"],
                          signature.get(r["_id"], "")) if path.is_file() else (None, "file not in the tree"))
        key = f"{rel}::{qual or r['name']}"
        t = targets[ref].setdefault(key, {"function": key, "aliases": [], "human_docstring": None,
                                          "status_note": None})
        t["aliases"].append(r["_id"])
        t["human_docstring"] = t["human_docstring"] or human.get(r["_id"])
        if qual is None:
            t["status_note"] = absent_note(why, co, manifest)
            absent.append(f"{r['_id']} {r['project']} {key}: {t['status_note']}")
        else:
            t["status_note"] = t["status_note"] or _kept_note(manifest, key)
    for ref, found in sorted(targets.items()):
        m = manifests[ref]
        ids = sum(len(t["aliases"]) for t in found.values())
        noted = sum(len(t["aliases"]) for t in found.values() if t["status_note"])
        print(f"{m.name}: {len(found)} functions, {ids} CoderEval tasks ({noted} with a status note)")
        if not dry_run and m.origin is not None:
            write_targets(m.origin, list(found.values()), out_dir / m.origin.name if out_dir else m.origin)
    print(f"declared as not in the tree ({len(absent)}):")
    for line in absent:
        print("  " + line)


def absent_note(why: str, co: Checkout, manifest: Manifest) -> str:
    """The status note of a CoderEval function that the tree does not have (as one) at the checked-out commit."""
    where = f"{co.upstream_commit[:12]} ({describe_source(manifest)})"
    if why in ("not in the file", "file not in the tree"):
        return f"{_OWN_NOTES[0]}{where}: {why}"
    return f"{_OWN_NOTES[1]}{where}: {why.partition(': ')[0]}"


def _kept_note(manifest: Manifest, function: str) -> str | None:
    """A note the manifest already gives the target (written by hand: no test reaches it, …); this script's own
    notes are not kept for a function it now finds."""
    note = next((t.status_note for t in manifest.tasks.targets if t.function == function), None)
    return None if note and note.startswith(_OWN_NOTES) else note


_OWN_NOTES = ("function absent at ", "function not singled out at ")


class _Dumper(yaml.SafeDumper):
    """Multi-line docstrings as literal blocks, so a person can read them in the manifest."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def write_targets(path: Path, targets: list[dict], out: Path) -> None:
    """`path` with the `targets:` of its `tasks:` section (the last top-level key, or none) replaced, written to
    `out`; the rest of the section (discover, caps) stays as written, comments included."""
    text = path.read_text()
    head, sep, tail = text.partition("\ntasks:\n")
    if sep and any(line[:1].strip() and not line.startswith("#") for line in tail.splitlines()):
        raise SystemExit(f"{path}: the top-level `tasks:` section must come last to be rewritten")
    clean = [{k: v for k, v in t.items() if v} for t in targets]
    dumped = yaml.dump({"targets": clean}, Dumper=_Dumper, sort_keys=False, width=98,  # 100 once indented
                    allow_unicode=True)
    block = "".join("  " + line if line.strip() else line for line in dumped.splitlines(keepends=True))
    note = "# tasks.targets: CoderEval's tasks in this project (generated by benchmarks/codereval_targets.py)\n"
    head = head.rstrip("\n").removesuffix(note.rstrip("\n"))  # the note of an earlier run
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(head.rstrip("\n") + "\n" + note + "tasks:\n" + _with_targets(tail if sep else "", block))
    load_manifest(out)  # still valid


def _with_targets(section: str, block: str) -> str:
    """The `tasks:` section's lines with its `targets:` entry (up to the next key of the section) replaced."""
    out, skipping, placed = [], False, False
    for line in section.splitlines(keepends=True):
        if line.startswith("  targets:"):
            skipping, placed = True, True
            out.append(block)
            continue
        if skipping and re.match(r"  [A-Za-z_#]", line):
            skipping = False
        if not skipping:
            out.append(line)
    return "".join(out) if placed else block + "".join(out)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true", help="print, do not write the manifests")
    add_data_option(ap)
    ap.add_argument("--map", action="append", default=[], metavar="OWNER/NAME=MANIFEST[:PREFIX]",
                    help="a CoderEval project and its manifest (repeatable; default: the built-in table)")
    ap.add_argument("-o", "--out-dir", type=Path, help="write the manifests here instead of in place")
    args = ap.parse_args()
    main(args.dry_run, args.data, parse_map(args.map) if args.map else PROJECTS, args.out_dir)
