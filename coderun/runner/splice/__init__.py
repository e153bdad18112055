"""The injector: put a generated function into the original file, in place of the original one.

Everything is located with tree-sitter byte ranges (on the original file and on the sample), never by
searching text. Python's own parser is the judge of syntax: tree-sitter recovers from errors, so a sample
only counts as parsed when `ast.parse` accepts it (with the target's Python version where it is older than
the host's), and the spliced file must `compile`.

What `splice` does with a sample, in order:

1. Extraction: the fenced markdown block that defines the target (or the first Python block), else the
   whole text; an indented sample is dedented; leading prose lines and trailing top-level lines that do not
   parse (models keep generating after the function; CodeGen's samples are cut at a token limit) are
   dropped, each noted in `SpliceResult.notes`. The function itself must parse: nothing inside it is fixed.
2. Indentation: tabs in indentation become spaces (4 per tab when that keeps the same syntax tree, else
   Python's own 8), so a tab-indented sample (CoderEval's) fits a space-indented file. Lines inside
   multi-line strings are never touched, so docstrings and string values stay exactly as generated.
3. The definition: for `f`, the last module-level `def f` (the one Python would bind); for `C.m`, a
   module-level `def m`, or `m` inside a sample `class C` (or a class named like the last class of the
   qualname, or any class that defines `m`).
4. Replacement: the original definition's byte range is replaced by the sample's, re-indented to the
   original's depth. A method's `self`/`cls` that the sample's signature leaves out (CoderEval's prompts
   do, for some methods) is put back when the sample's parameters are exactly the method's others.
   Decorators: the sample's when it has any, else the original's stay untouched.
   `async`: an async original stays async (a sync sample gets `async` prefixed, since callers await it);
   an async sample for a sync original is kept as written.
5. Helpers: other definitions of the sample (functions, classes, simple `NAME = ...` assignments) are
   kept right after the target, at the target's depth. For a method target, helpers that came from the
   sample's class body, or that the method reaches as `self.x` / `cls.x` / `Class.x`, go into the class;
   other module-level helpers go right after the outermost enclosing class. A helper whose name already
   exists in the destination scope is dropped (the sample is graded on its target, not on rewriting the
   project's other code), and so are other top-level statements (calls, `if __name__ == ...` blocks).
6. Imports at the sample's top level are hoisted to the module top, after the module docstring and
   `from __future__` imports, unless the file already has the same import. A sample's `from __future__`
   imports are dropped: they would change the semantics of the whole module.

Where each step lives: `extract` (1-3), `place` (4-6), `receiver` (4's `self`), `replace` (the entry points),
with `nodes` (tree-sitter), `pyparse` (Python's parser) and `result` (what a splice gives).
"""

from coderun.runner.splice.extract import extract_code, fenced_blocks, prepare_sample
from coderun.runner.splice.pyparse import host_feature_version
from coderun.runner.splice.replace import blank_body, splice
from coderun.runner.splice.result import SampleSyntaxError, SpliceErrorKind, SpliceResult

__all__ = ["SampleSyntaxError", "SpliceErrorKind", "SpliceResult", "blank_body", "extract_code", "fenced_blocks",
           "host_feature_version", "prepare_sample", "splice"]
