"""Dependency analyzer on small hand-written projects: each runnable level and the tricky cases."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from coderun.analyzers import FunctionInfo, ProjectAnalysis, RefKind, analyze_project
from coderun.records import Level
from tests.helpers import write_tree

PKG = {
    "pkg/__init__.py": "from .util import helper as reexported_helper\n",
    "pkg/util.py": '''
        import os

        LIMIT = 3

        def helper(x):
            return x + 1

        def uses_limit(x):
            return min(x, LIMIT)

        class Base:
            kind = "base"

            def shared(self):
                return 1

            def greet(self):
                return "hi"
    ''',
    "pkg/levels.py": '''
        import json
        import os.path
        import requests
        import pkg.util
        from collections import OrderedDict as OD
        from os.path import *
        from . import util
        from .util import helper, Base
        from .util import helper as h2
        from .stars import *

        GREETING = "hello"

        def len(x):
            return 0

        def only_builtins(xs):
            """Sum things.

            Second line.
            """
            total = 0
            for x in xs:
                total += abs(x)
            return sorted([total, max(xs)])

        def uses_shadowed_builtin(xs):
            return len(xs)

        def local_shadow(xs):
            list = [1]
            return list

        def stdlib_call(p):
            return os.path.join(p, json.dumps({}))

        def stdlib_alias():
            return OD()

        def local_import():
            import hashlib
            return hashlib.sha1(b"").hexdigest()

        def third_party(url):
            return requests.get(url)

        def file_level():
            return GREETING

        def project_from_import(x):
            return helper(x)

        def project_aliased(x):
            return h2(x)

        def project_module_attr(x):
            return util.helper(x) + pkg.util.LIMIT

        def star_stdlib(p):
            return basename(p)

        def star_project():
            return STAR_CONSTANT

        @staticmethod
        def decorated(x):
            return x

        def with_default(x, sep=GREETING):
            return x

        def scoping(xs, y):
            global GREETING
            g = lambda v: v * 2
            pairs = [g(a) for a in xs if a]
            try:
                pass
            except ValueError as err:
                return err
            with open(y) as fh:
                fh.read()
            return pairs

        def outer(n):
            def inner(k):
                return k + n
            return inner

        def recursive(n):
            return recursive(n - 1) if n else 0

        class Local(Base):
            label = "x"

            def __init__(self):
                self.value = 1

            def uses_self(self):
                return self.value

            def uses_class_attr(self):
                return Local.label

            @classmethod
            def uses_cls(cls):
                return cls.label

            def uses_inherited_other_file(self):
                return self.shared()

            def uses_super(self):
                return super().greet()

            def bare_self(self):
                return len(self) if False else self

        class SameFileBase:
            def base_method(self):
                return 1

        class Child(SameFileBase):
            def calls_base(self):
                return self.base_method()

            def calls_super(self):
                return super().base_method()
    ''',
    "pkg/stars.py": "STAR_CONSTANT = 1\n",
    "pkg/py2.py": "print 'hello'\n",
}


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("proj")
    return write_tree(root, {k: textwrap.dedent(v).lstrip("\n") for k, v in PKG.items()})


@pytest.fixture(scope="module")
def analysis(project) -> ProjectAnalysis:
    return analyze_project(project)


@pytest.fixture(scope="module")
def syntax_only(project) -> ProjectAnalysis:
    return analyze_project(project, use_jedi=False)


def fn(analysis: ProjectAnalysis, qualname: str, file: str = "pkg/levels.py") -> FunctionInfo:
    f = analysis.find(file, qualname)
    assert f is not None, f"{file}::{qualname} not analyzed"
    return f


def kinds(f: FunctionInfo) -> dict[str, RefKind]:
    return {r.name: r.kind for r in f.references}


@pytest.mark.parametrize("qualname, level", [
    ("only_builtins", Level.SELF_CONTAINED),
    ("local_shadow", Level.SELF_CONTAINED),
    ("uses_shadowed_builtin", Level.FILE_RUNNABLE),
    ("stdlib_call", Level.SLIB_RUNNABLE),
    ("stdlib_alias", Level.SLIB_RUNNABLE),
    ("local_import", Level.SLIB_RUNNABLE),
    ("third_party", Level.PLIB_RUNNABLE),
    ("file_level", Level.FILE_RUNNABLE),
    ("project_from_import", Level.PROJECT_RUNNABLE),
    ("project_aliased", Level.PROJECT_RUNNABLE),
    ("project_module_attr", Level.PROJECT_RUNNABLE),
    ("star_stdlib", Level.SLIB_RUNNABLE),
    ("star_project", Level.PROJECT_RUNNABLE),
    ("decorated", Level.SELF_CONTAINED),
    ("with_default", Level.FILE_RUNNABLE),
    ("outer", Level.SELF_CONTAINED),
    ("outer.<locals>.inner", Level.FILE_RUNNABLE),
    ("recursive", Level.SELF_CONTAINED),
    ("Local.uses_self", Level.CLASS_RUNNABLE),
    ("Local.uses_class_attr", Level.CLASS_RUNNABLE),
    ("Local.uses_cls", Level.CLASS_RUNNABLE),
    ("Local.uses_inherited_other_file", Level.PROJECT_RUNNABLE),
    ("Local.uses_super", Level.PROJECT_RUNNABLE),
    ("Child.calls_base", Level.CLASS_RUNNABLE),
    ("Child.calls_super", Level.CLASS_RUNNABLE),
])
def test_levels(analysis, qualname, level):
    assert fn(analysis, qualname).level is level, kinds(fn(analysis, qualname))


def test_shadowed_builtin_is_the_files_definition(analysis):
    """A module-level `def len` shadows the builtin: the body depends on the file, not on builtins."""
    assert kinds(fn(analysis, "uses_shadowed_builtin"))["len"] is RefKind.FILE


def test_scoping_binds_lambda_comprehension_exception_and_with_names(analysis):
    f = fn(analysis, "scoping")
    names = {r.name for r in f.references}
    assert not names & {"g", "v", "a", "err", "fh", "pairs", "xs", "y"}
    assert {"ValueError", "open"} <= names
    assert f.level is Level.SELF_CONTAINED and not f.unresolved


def test_closure_variable_is_outside_the_nested_function(analysis):
    inner = fn(analysis, "outer.<locals>.inner")
    assert kinds(inner) == {"n": RefKind.FILE}
    assert inner.class_name is None


def test_decorators_are_not_part_of_the_body_but_defaults_are(analysis):
    assert "staticmethod" not in kinds(fn(analysis, "decorated"))
    assert kinds(fn(analysis, "with_default"))["GREETING"] is RefKind.FILE


def test_bare_self_is_not_a_member_reference(analysis):
    f = fn(analysis, "Local.bare_self")
    assert f.level is Level.FILE_RUNNABLE  # `len` is the file's own len()
    assert not [r for r in f.references if r.kind is RefKind.CLASS]


def test_inherited_member_targets_its_defining_class(analysis):
    ref = next(r for r in fn(analysis, "Local.uses_inherited_other_file").references if r.name == "self.shared")
    assert ref.kind is RefKind.PROJECT and ref.target == "pkg.util.Base.shared"


def test_star_import_without_jedi_still_classifies(syntax_only):
    assert fn(syntax_only, "star_project").level is Level.PROJECT_RUNNABLE
    assert fn(syntax_only, "stdlib_call").level is Level.SLIB_RUNNABLE


def test_star_import_from_stdlib_resolved_by_jedi(analysis):
    ref = next(r for r in fn(analysis, "star_stdlib").references if r.name == "basename")
    assert ref.kind is RefKind.STDLIB and ref.via == "jedi"


def test_oracle_context_splits_types_apis_and_vars(analysis):
    ctx = fn(analysis, "stdlib_call").oracle_context
    assert "os.path.join" in ctx.apis and "json.dumps" in ctx.apis
    assert {"os", "json"} <= set(ctx.classes)
    assert fn(analysis, "file_level").oracle_context.vars == ["GREETING"]
    assert "Local.label" in fn(analysis, "Local.uses_class_attr").oracle_context.vars


def test_builtin_types_are_type_references(tmp_path):
    write_tree(tmp_path, {"m.py": "def f(x):\n    return isinstance(x, str) and len(x)\n"})
    ctx = fn(analyze_project(tmp_path, use_jedi=False), "f", "m.py").oracle_context
    assert ctx.classes == ["str"] and ctx.apis == ["isinstance", "len"] and ctx.vars == []


def test_all_context_lists_the_file_and_the_class(analysis):
    ctx = fn(analysis, "Local.uses_self").all_context
    assert {"GREETING"} <= set(ctx.vars) and "self.value" in ctx.vars
    assert {"Local", "Child", "Base"} <= set(ctx.classes)
    assert {"helper", "only_builtins", "self.uses_cls"} <= set(ctx.apis)
    assert "self.value" not in fn(analysis, "file_level").all_context.vars


def test_local_imports_name_what_they_import(analysis):
    assert kinds(fn(analysis, "local_import"))["hashlib"] is RefKind.STDLIB
    assert "hashlib.sha1" in fn(analysis, "local_import").oracle_context.apis


def test_function_record_fields(analysis, project):
    f = fn(analysis, "only_builtins")
    assert f.signature == "def only_builtins(xs):"
    assert f.docstring == "Sum things.\n\nSecond line."
    assert f.body_lines == 4
    data = (project / f.file).read_bytes()
    assert data[f.start_byte:f.end_byte].decode() == f.source
    assert data[f.body_start_byte:f.body_end_byte].decode().startswith('"""Sum things.')
    d = fn(analysis, "decorated")
    assert d.start_lineno == d.lineno - 1 and d.source.startswith("@staticmethod")
    assert d.decorators == ["@staticmethod"]
    m = fn(analysis, "Local.uses_cls")
    assert m.class_name == "Local" and m.name == "uses_cls"


def test_python2_file_is_skipped_not_fatal(analysis):
    assert [s.file for s in analysis.skipped] == ["pkg/py2.py"]
    assert "line 1" in analysis.skipped[0].reason


def test_files_restricts_the_analysis(project):
    result = analyze_project(project, files=["pkg/util.py"], use_jedi=False)
    assert {f.file for f in result.functions} == {"pkg/util.py"}
    assert fn(result, "uses_limit", "pkg/util.py").level is Level.FILE_RUNNABLE


def test_namespace_package_does_not_claim_its_siblings(tmp_path):
    """`zope` is shared by many distributions: zope.event is third-party for zope.interface."""
    write_tree(tmp_path, {
        "src/zope/__init__.py": "__import__('pkg_resources').declare_namespace(__name__)\n",
        "src/zope/iface/__init__.py": "",
        "src/zope/iface/core.py": "def base():\n    return 1\n",
        "src/zope/iface/api.py": textwrap.dedent('''
            import zope.event
            from zope.iface.core import base

            def notify(e):
                return zope.event.notify(e)

            def ours():
                return base()
        '''),
    })
    result = analyze_project(tmp_path, import_root="src", use_jedi=False)
    assert fn(result, "notify", "src/zope/iface/api.py").level is Level.PLIB_RUNNABLE
    assert fn(result, "ours", "src/zope/iface/api.py").level is Level.PROJECT_RUNNABLE


@pytest.mark.integration
def test_builtins_come_from_the_given_python(tmp_path):
    """`anext` is a builtin from 3.10 on: under 3.9 it is an unresolved name, not a builtin."""
    from coderun.envs.local import find_python

    py39, exact = find_python("3.9")
    if not exact:
        pytest.skip("no Python 3.9 installed")
    write_tree(tmp_path, {"m.py": "def f(it):\n    return anext(it)\n",
                          "new.py": "def g(x):\n    match x:\n        case _:\n            return 1\n"})
    host = analyze_project(tmp_path, use_jedi=False)
    assert fn(host, "f", "m.py").level is Level.SELF_CONTAINED and not host.skipped
    old = analyze_project(tmp_path, python=py39)
    assert fn(old, "f", "m.py").unresolved == ["anext"]
    assert old.python == str(py39)
    assert [(s.file, "3.9" in s.reason) for s in old.skipped] == [("new.py", True)]
