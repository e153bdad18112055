"""Which functions become tasks: the manifest's explicit targets, then CoderEval's selection rules.

CoderEval §3.1.1 keeps functions that are not a test, an interface or deprecated, that carry a
function-level comment in English, that have more than three lines of code, and (optionally) that
depend on few contextual tokens. Explicit targets bypass the rules: a manifest that names a function
wants it whatever the heuristics say.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from coderun.analyzers.model import FunctionInfo, ProjectAnalysis
from coderun.manifests.schema import Discovery, Manifest

_TEST_DIRS = {"test", "tests", "testing"}
# Common English function words: a docstring in English uses some of them, a parameter list does not.
_ENGLISH_WORDS = """a an the of to in on for from by with and or not no is are be been was were it its
this that these those if when then else return returns returned given use used using as at into whether
which will can should must may each all any one only new get set create make check"""
_ENGLISH = frozenset(_ENGLISH_WORDS.split())


@dataclass(frozen=True)
class Candidate:
    """A function chosen to become a task."""

    function: FunctionInfo
    explicit: bool = False
    aliases: tuple[str, ...] = ()
    human_docstring: str | None = None


@dataclass(frozen=True)
class Selection:
    candidates: tuple[Candidate, ...]
    unresolved: tuple[str, ...] = ()                      # explicit targets the analysis lacks
    rejected: dict[str, int] = field(default_factory=dict)  # discovery rule -> functions it dropped


def select(manifest: Manifest, analysis: ProjectAnalysis) -> Selection:
    """Explicit targets (in manifest order) followed by discovered functions (by file and line)."""
    chosen: list[Candidate] = []
    unresolved: list[str] = []
    seen: set[str] = set()
    for target in manifest.tasks.targets:
        fn = analysis.find(target.file, target.qualname)
        if fn is None:
            unresolved.append(target.function)
        elif fn.key not in seen:
            seen.add(fn.key)
            chosen.append(Candidate(fn, True, tuple(target.aliases), target.human_docstring))
    rules = manifest.tasks.discover
    rejected: Counter[str] = Counter()
    if rules.enabled:
        found = 0
        for fn in sorted(analysis.functions, key=lambda f: (f.file, f.lineno)):
            if fn.key in seen:
                continue
            reason = rejection(fn, rules, test_code_paths(manifest.tests.paths, rules.include))
            if reason is None and rules.limit is not None and found >= rules.limit:
                reason = "over the discovery limit"
            if reason:
                rejected[reason] += 1
                continue
            found += 1
            seen.add(fn.key)
            chosen.append(Candidate(fn))
    return Selection(tuple(chosen), tuple(unresolved), dict(rejected))


def test_code_paths(test_paths: list[str] | tuple[str, ...], include: list[str] | tuple[str, ...]) -> list[str]:
    """The test paths whose code is all test code: not a package the discovery globs look inside (a project
    whose `testpaths` names its package, for its doctests, still has its functions discovered)."""
    return [tp for tp in test_paths
            if tp.endswith(".py") or not any(g.startswith(tp.rstrip("/") + "/") for g in include)]


def rejection(fn: FunctionInfo, rules: Discovery, test_paths: list[str] | tuple[str, ...] = ()) -> str | None:
    """Why discovery skips `fn` (None: it is kept). The first rule that applies is given."""
    if not _file_selected(fn.file, rules):
        return "file not included"
    if is_test(fn, test_paths):
        return "test code"
    if "<locals>" in fn.qualname:
        return "nested function"
    if is_interface(fn):
        return "interface or abstract method"
    if is_deprecated(fn):
        return "deprecated"
    if not rules.undocumented and not is_english(fn.docstring):
        return "no English docstring"
    if fn.body_lines < rules.min_body_lines:
        return f"body shorter than {rules.min_body_lines} lines"
    if rules.max_context_tokens is not None and len(fn.oracle_context.tokens()) > rules.max_context_tokens:
        return f"more than {rules.max_context_tokens} context tokens"
    return None


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A path glob where `*` and `?` stay inside one directory and `**/` spans any number of them."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def _matches(path: str, patterns: list[str]) -> bool:
    return any(glob_regex(p).match(path) for p in patterns)


def _file_selected(path: str, rules: Discovery) -> bool:
    if rules.include and not _matches(path, rules.include):
        return False
    return not _matches(path, rules.exclude)


def is_test(fn: FunctionInfo, test_paths: list[str] | tuple[str, ...] = ()) -> bool:
    """Test code: in a test directory, test module or the manifest's test paths, or in a test class.

    A library function merely named `test_*` (federation's `test_tag`) is not a test.
    """
    path = PurePosixPath(fn.file)
    if _TEST_DIRS & set(path.parts[:-1]) or path.name == "conftest.py":
        return True
    if re.match(r"(test_.*|.*_tests?|tests?)\.py$", path.name):
        return True
    for tp in test_paths:
        tp = tp.rstrip("/")
        if tp.endswith(".py") and fn.file == tp:
            return True
        if not tp.endswith(".py") and tp not in ("", ".") and fn.file.startswith(tp + "/"):
            return True
    cls = (fn.class_name or "").rsplit(".", 1)[-1]
    return bool(re.match(r"Test|.*Tests?$", cls))


def is_interface(fn: FunctionInfo) -> bool:
    return any(re.search(r"\babstract(method|property)\b", d) for d in fn.decorators)


def is_deprecated(fn: FunctionInfo) -> bool:
    """The name, a decorator, the docstring or a DeprecationWarning in the body says so."""
    if "deprecat" in fn.name.lower() or any("deprecat" in d.lower() for d in fn.decorators):
        return True
    if re.search(r"\bdeprecated\b", fn.docstring, re.IGNORECASE):
        return True
    return "DeprecationWarning" in fn.source


def is_english(docstring: str) -> bool:
    """At least three words, mostly Latin letters, and some common English function words."""
    text = docstring.strip()
    if not text:
        return False
    letters = [c for c in text if c.isalpha()]
    if not letters or sum(c.isascii() for c in letters) / len(letters) < 0.9:
        return False
    words = re.findall(r"[A-Za-z][A-Za-z']+", text)
    return len(words) >= 3 and any(w.lower() in _ENGLISH for w in words)
