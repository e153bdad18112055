"""The entry points: splice a sample in place of the original definition; blank a function's body."""

from __future__ import annotations

from dataclasses import dataclass

from coderun.errors import TaskError
from coderun.runner.splice.docstring import keep_original_docstring
from coderun.runner.splice.extract import prepare_sample
from coderun.runner.splice.nodes import (
    find_original,
    is_async,
    multiline_string_rows,
    name_of,
    parse_tree,
    text_of,
)
from coderun.runner.splice.place import (
    assigned_names,
    import_point,
    is_docstring_or_noise,
    line_prefix,
    new_imports,
    plan_helpers,
    statement_text,
    top_level,
)
from coderun.runner.splice.pyparse import compile_error, original_compiles
from coderun.runner.splice.receiver import restore_receiver
from coderun.runner.splice.result import SampleSyntaxError, SpliceErrorKind, SpliceResult


@dataclass(frozen=True)
class _Edit:
    start: int
    end: int
    text: bytes


def _apply(data: bytes, edits: list[_Edit]) -> bytes:
    for edit in sorted(edits, key=lambda e: (e.start, e.end), reverse=True):
        data = data[:edit.start] + edit.text + data[edit.end:]
    return data


def _shifted(offset: int, edits: list[_Edit]) -> int:
    """Where `offset` of the original lands after the edits that come before it."""
    return offset + sum(len(e.text) - (e.end - e.start) for e in edits if e.end <= offset
                        and (e.start < offset or e.start == e.end))


def splice(original_file_source: str, target_qualname: str, sample_code: str, *, python: tuple[int, int] | None
           = None, lineno: int | None = None, keep_docstring: bool = False) -> SpliceResult:
    """Replace the definition of `target_qualname` in a file by the sample's definition.

    `python` is the target interpreter's (major, minor), used to reject syntax it does not have; `lineno` picks
    one of several definitions of the same name (a property's getter and setter); `keep_docstring`: the original's
    docstring replaces the sample's (its doctests are the task's: `Task.own_doctests`). Raises TaskError when
    the original file has no such function (a task problem, not the sample's)."""
    data = original_file_source.encode("utf-8")
    orig_root = parse_tree(data)
    target = find_original(orig_root, target_qualname, lineno)
    try:
        prep = prepare_sample(sample_code, target_qualname, python)
    except SampleSyntaxError as exc:
        return SpliceResult(ok=False, error=exc.kind, message=exc.message, notes=exc.notes)
    rows = multiline_string_rows(prep.root)
    prefix = line_prefix(data, target.outer)
    own_decorators = prep.found.outer.type == "decorated_definition"
    sample_node = prep.found.outer if own_decorators else prep.found.func
    replaced = target.outer if own_decorators else target.func
    make_async = is_async(target.func) and not is_async(prep.found.func)
    plan = plan_helpers(prep, target, orig_root)
    notes = prep.notes + plan.notes + (["made the sample async: the original is async"] if make_async else [])
    function_code = restore_receiver(statement_text(prep, sample_node, prefix, rows, make_async), target,
                                     prep.found, notes)
    if keep_docstring:
        function_code = keep_original_docstring(function_code, prefix, target.func, notes)

    gap = "\n\n" if target.classes else "\n\n\n"
    scope_text = "".join(gap + prefix + statement_text(prep, h, prefix, rows) for h in plan.in_scope)
    edits = [_Edit(replaced.start_byte, replaced.end_byte, (function_code + scope_text).encode())]
    if plan.after_class:
        outer_class = top_level(target.classes[0])
        class_prefix = line_prefix(data, outer_class)
        text = "".join("\n\n\n" + class_prefix + statement_text(prep, h, class_prefix, rows)
                       for h in plan.after_class)
        edits.append(_Edit(outer_class.end_byte, outer_class.end_byte, text.encode()))
    imports = new_imports(plan, orig_root)
    if imports:
        at = import_point(data, orig_root)
        lead = "\n" if at == len(data) and data and not data.endswith(b"\n") else ""
        edits.append(_Edit(at, at, (lead + "".join(i + "\n" for i in imports)).encode()))

    new = _apply(data, edits)
    start = _shifted(replaced.start_byte, [e for e in edits if e.start < replaced.start_byte])
    first_line = new[:start].count(b"\n") + 1
    lines = (first_line, first_line + function_code.count("\n"))
    new_source = new.decode("utf-8")
    helper_names = [name_of(h) or ", ".join(assigned_names(h) or []) for h in plan.in_scope + plan.after_class]
    common = dict(function_code=function_code, helper_names=helper_names, hoisted_imports=imports,
                  notes=notes)
    if original_compiles(original_file_source, python):
        error = compile_error(new_source, python)
        if error is not None:
            return SpliceResult(ok=False, error=SpliceErrorKind.SYNTAX, new_source=new_source,
                                message=f"spliced file does not compile: {error}", **common)
    else:
        notes.append("the original file does not compile on this host's Python: spliced file not checked")
    return SpliceResult(ok=True, new_source=new_source, function_lines=lines, **common)


def blank_body(original_file_source: str, qualname: str, *, lineno: int | None = None,
               statement: str = "raise NotImplementedError") -> str:
    """The file with the function's body replaced by `statement` (docstring kept).

    Used to check that a task's tests notice the function missing (and, with `pass`, that they look at
    what it returns).
    """
    data = original_file_source.encode("utf-8")
    target = find_original(parse_tree(data), qualname, lineno)
    body = target.func.child_by_field_name("body")
    if body is None:
        raise TaskError(f"function {qualname!r} has no body")
    same_line = body.start_point[0] == target.func.start_point[0]   # def f(): return 1
    if same_line:
        indent = "\n" + line_prefix(data, target.outer) + "    "
    else:
        indent = "\n" + data[data.rfind(b"\n", 0, body.start_byte) + 1:body.start_byte].decode()
    first = next((c for c in body.named_children if c.type != "comment"), None)
    keep = indent if same_line else ""
    if first is not None and first.type == "expression_statement" and is_docstring_or_noise(first):
        keep += text_of(first) + indent
    replacement = (keep + statement).encode()
    return (data[:body.start_byte] + replacement + data[body.end_byte:]).decode("utf-8")
