"""Dependency analyzer: CoderEval's six runnable levels and oracle/all contexts, computed from code.

    analyze_project(root, import_root=".", python=None, use_jedi=True, files=None) -> ProjectAnalysis
    analyze_cached(checkout, settings, python=None, use_jedi=True) -> ProjectAnalysis

tree-sitter parses and scopes every file; jedi (pointed at the project's environment when one is given)
places the names the syntax tree cannot (star imports, members inherited from other files).
"""

from coderun.analyzers.model import (
    ContextKind,
    FunctionInfo,
    ProjectAnalysis,
    Reference,
    RefKind,
    SkippedFile,
)
from coderun.analyzers.project import ANALYZER_VERSION, analyze_cached, analyze_project

__all__ = ["ANALYZER_VERSION", "ContextKind", "FunctionInfo", "ProjectAnalysis", "RefKind", "Reference",
           "SkippedFile", "analyze_cached", "analyze_project"]
