"""Analyze a whole project tree, and cache the result per (source commit, analyzer version)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from coderun.analyzers.functions import FileAnalyzer
from coderun.analyzers.index import ParseFailure, ProjectIndex, python_files
from coderun.analyzers.jedi_resolver import JediResolver
from coderun.analyzers.model import FunctionInfo, ProjectAnalysis, SkippedFile
from coderun.analyzers.pyfacts import python_facts, syntax_errors
from coderun.config import Settings
from coderun.errors import AnalysisError

# Bump whenever a change to the analyzer can change its output: cached analyses are keyed on it.
ANALYZER_VERSION = "5"

Progress = Callable[[str, int, int], None]   # (file, done, total)


def analyze_project(root: Path, *, import_root: str = ".", python: Path | None = None, use_jedi: bool = True,
                    files: list[str] | None = None, progress: Progress | None = None) -> ProjectAnalysis:
    """Every function and method of the project's Python files (or of `files`, repository-relative)."""
    root = Path(root)
    if not root.is_dir():
        raise AnalysisError(f"{root} is not a directory", hint="analyze a project checkout")
    facts = python_facts(python)
    all_files = python_files(root)
    index = ProjectIndex(root, import_root, all_files, invalid=syntax_errors(facts, root, all_files))
    jedi = JediResolver(root, import_root, python, facts.site_dirs) if use_jedi else None
    wanted = all_files if files is None else [_check_file(root, f) for f in files]
    functions: list[FunctionInfo] = []
    skipped: list[SkippedFile] = []
    for i, rel in enumerate(wanted):
        if progress:
            progress(rel, i, len(wanted))
        try:
            sf = index.parse(rel)
        except ParseFailure as e:
            skipped.append(SkippedFile(file=rel, reason=str(e)))
            continue
        except OSError as e:
            skipped.append(SkippedFile(file=rel, reason=f"unreadable: {e.strerror}"))
            continue
        functions += FileAnalyzer(index, sf, facts, jedi).functions()
        if jedi is not None:
            jedi.forget(rel)
    if progress:
        progress("", len(wanted), len(wanted))
    return ProjectAnalysis(analyzer_version=ANALYZER_VERSION, root=str(root), python=facts.executable,
                           jedi=use_jedi, functions=functions, skipped=skipped)


def _check_file(root: Path, rel: str) -> str:
    rel = Path(rel).as_posix()
    if not rel.endswith(".py") or not (root / rel).is_file():
        raise AnalysisError(f"{rel} is not a Python file of {root}")
    return rel


def cache_path(settings: Settings, project: str, commit: str, python: Path | None, use_jedi: bool,
               import_root: str, tree: Path | None = None) -> Path:
    """One file per (commit, analyzer version, interpreter, jedi on/off, import root), and per tree when
    it is not the plain checkout (an environment's tree after install.pre_install has more files)."""
    parts = [commit, ANALYZER_VERSION, str(python or ""), use_jedi, import_root] + ([str(tree)] if tree else [])
    key = hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]
    return settings.analysis_cache / project / f"{commit[:12]}-{key}.json"


def analyze_cached(checkout, settings: Settings, python: Path | None = None, use_jedi: bool = True, *,
                   import_root: str = ".", progress: Progress | None = None) -> ProjectAnalysis:
    """`analyze_project` on a `coderun.envs.sources.Checkout`, reusing the saved result for the same commit."""
    path = cache_path(settings, checkout.project, checkout.commit, python, use_jedi, import_root,
                      tree=None if checkout.path.parent == settings.sources else checkout.path)
    if path.is_file():
        try:
            return ProjectAnalysis.model_validate_json(path.read_text(encoding="utf-8"))
        except (ValidationError, OSError, ValueError):
            path.unlink(missing_ok=True)  # unreadable or from an older schema: analyze again
    result = analyze_project(checkout.path, import_root=import_root, python=python, use_jedi=use_jedi,
                             progress=progress)
    result = result.model_copy(update={"commit": checkout.commit})
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(result.model_dump_json(), encoding="utf-8")
    tmp.replace(path)
    return result
