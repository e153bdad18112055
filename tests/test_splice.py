"""The injector: samples spliced into real-looking files, checked by compiling and running the result."""

from __future__ import annotations

import ast
import doctest
import json
import re
import warnings
from collections import Counter

import pytest

from coderun.errors import TaskError
from coderun.runner.splice import SpliceErrorKind, blank_body, splice
from tests.helpers import CODEREVAL_DATA

CODEREVAL = CODEREVAL_DATA

ORIGINAL = '''#!/usr/bin/env python
"""Module docstring."""
from __future__ import annotations

import os

LIMIT = 3


def deco(fn):
    fn.decorated = True
    return fn


class Box:
    """A box."""

    size = 2

    @staticmethod
    def make(n):
        return Box()

    @deco
    def grow(self, by):
        """Grow the box."""
        return self.size + by

    async def fetch(self, key):
        return key

    class Inner:
        def depth(self):
            return 1


@deco
def add(a, b=2):
    return a + b


async def get(x):
    return x
'''


def run(source: str) -> dict:
    namespace: dict = {"__name__": "spliced"}
    exec(compile(source, "<spliced>", "exec"), namespace)
    return namespace


def test_module_function_with_tabs_and_column0_docstring_compiles_and_runs():
    """CoderEval samples are tab-indented with docstring lines at column 0 inside the function."""
    sample = 'def add(a, b=2):\n\t"""\n\tAdd.\n\n:param a:\n\t"""\n\tif a:\n\t\treturn a * 10 + b\n\treturn b\n'
    result = splice(ORIGINAL, "add", sample)
    assert result.ok, result.message
    ns = run(result.new_source)
    assert ns["add"](1) == 12
    assert ns["add"].decorated                      # the original decorator is kept
    assert ns["add"].__doc__ == "\n\tAdd.\n\n:param a:\n\t"  # string content untouched
    assert "\t" not in result.function_code.replace(ns["add"].__doc__, "")
    lines = result.new_source.splitlines()
    first, last = result.function_lines
    assert lines[first - 1].startswith("def add(") and lines[last - 1].strip() == "return b"


def test_method_is_reindented_into_its_class_and_keeps_decorator():
    result = splice(ORIGINAL, "Box.grow", "def grow(self, by):\n    return self.size * by\n")
    assert result.ok, result.message
    ns = run(result.new_source)
    box = ns["Box"]()
    assert box.grow(5) == 10
    assert ns["Box"].grow.decorated
    assert ns["Box"].make(1).size == 2 and ns["Box"]().fetch  # neighbours intact


@pytest.mark.parametrize("sample, calls", [
    ("def grow(by):\n    return by * 3\n", True),                     # the prompt's signature, without self
    ("def grow(\n    by,\n):\n    return by * 3\n", True),
    ("def grow(self, by):\n    return by * 3\n", False),              # as the method has it
    ("def grow(by, twice=False):\n    return by * 3\n", False),       # other parameters: as written
])
def test_a_methods_receiver_the_sample_leaves_out_is_put_back(sample, calls):
    """CoderEval's prompt for shconfparser's Search.get_pattern(self, pattern, strip=True) is
    `def get_pattern(pattern, strip=True):`; spliced as written, every sample got the instance as `pattern`
    and failed with an AttributeError, whatever its body."""
    result = splice(ORIGINAL, "Box.grow", sample)
    assert result.ok, result.message
    added = any("added the receiver 'self'" in n for n in result.notes)
    assert added is calls
    if calls:
        assert run(result.new_source)["Box"]().grow(5) == 15


def test_a_static_or_module_level_target_gets_no_receiver():
    for qualname, sample in (("Box.make", "def make(n):\n    return n\n"), ("add", "def add(b=2):\n    return b\n"),
                             ("Box.grow", "@staticmethod\ndef grow(by):\n    return by\n")):
        result = splice(ORIGINAL, qualname, sample)
        assert result.ok and not any("receiver" in n for n in result.notes), (qualname, result.notes)


def test_sample_decorators_replace_the_originals():
    sample = "@staticmethod\ndef grow(by):\n    return by + 100\n"
    result = splice(ORIGINAL, "Box.grow", sample)
    assert result.ok
    ns = run(result.new_source)
    assert ns["Box"].grow(1) == 101
    assert not hasattr(ns["Box"].grow, "decorated")


def test_whole_class_sample_gives_its_method_and_new_helpers():
    sample = (
        "class Box:\n"
        "    size = 99\n"                         # exists in the class: dropped
        "    def grow(self, by):\n"
        "        return self._twice(by)\n"
        "    def _twice(self, v):\n"
        "        return 2 * v\n")
    result = splice(ORIGINAL, "Box.grow", sample)
    assert result.ok, result.message
    ns = run(result.new_source)
    assert ns["Box"]().grow(4) == 8
    assert ns["Box"].size == 2
    assert result.helper_names == ["_twice"]
    assert any("size" in note for note in result.notes)


def test_module_level_helper_of_a_method_goes_after_the_class_or_into_it():
    sample = ("def grow(self, by):\n    return scale(by) + self.bonus()\n\n"
              "def scale(v):\n    return v * 3\n\n"
              "def bonus(self):\n    return 1\n")
    result = splice(ORIGINAL, "Box.grow", sample)
    assert result.ok, result.message
    ns = run(result.new_source)
    assert ns["Box"]().grow(2) == 7
    tree = ast.parse(result.new_source)
    top = [n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)]
    assert top.index("scale") == top.index("Box") + 1
    box = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Box")
    assert "bonus" in [n.name for n in box.body if isinstance(n, ast.FunctionDef)]


def test_helpers_of_a_module_function_follow_it_and_imports_are_hoisted():
    sample = ("import math\nfrom os import path as p\nimport os\n\n"
              "def add(a, b=2):\n    return _h(a) + math.floor(b)\n\n"
              "def _h(x):\n    return x + 1\n\nprint('side effect')\n")
    result = splice(ORIGINAL, "add", sample)
    assert result.ok, result.message
    assert result.hoisted_imports == ["import math", "from os import path as p"]  # `import os` exists
    assert result.helper_names == ["_h"]
    assert any("top-level statement" in n for n in result.notes)
    src = result.new_source
    assert src.index("from __future__") < src.index("import math") < src.index("import os")
    assert "print('side effect')" not in src
    ns = run(src)
    assert ns["add"](1, 2.5) == 4
    first, _ = result.function_lines
    assert src.splitlines()[first - 2] == "@deco"   # line numbers account for hoisted imports


def test_hoisting_after_header_comments_when_no_docstring():
    original = "# -*- coding: utf-8 -*-\n# licence\nimport os\n\n\ndef f():\n    return 1\n"
    result = splice(original, "f", "import json\ndef f():\n    return json.dumps(1)\n")
    assert result.new_source.startswith("# -*- coding: utf-8 -*-\n# licence\nimport json\nimport os\n")
    assert run(result.new_source)["f"]() == "1"


def test_future_import_in_sample_is_dropped():
    result = splice(ORIGINAL, "add", "from __future__ import division\ndef add(a, b=2):\n    return a\n")
    assert result.ok and "division" not in result.new_source
    assert any("__future__" in n for n in result.notes)


def test_helper_redefining_a_project_name_is_dropped():
    sample = "def add(a, b=2):\n    return LIMIT\n\nLIMIT = 100\n\ndef deco(fn):\n    return None\n"
    result = splice(ORIGINAL, "add", sample)
    ns = run(result.new_source)
    assert ns["add"](0) == 3 and ns["add"].decorated
    assert result.helper_names == []


def test_async_original_stays_async():
    result = splice(ORIGINAL, "get", "def get(x):\n    return x + 1\n")
    assert result.ok and result.function_code.startswith("async def get")
    ns = run(result.new_source)
    import asyncio
    assert asyncio.run(ns["get"](1)) == 2


def test_async_method_with_await_in_sync_sample_compiles_once_made_async():
    result = splice(ORIGINAL, "Box.fetch", "def fetch(self, key):\n    return await self.other(key)\n")
    assert result.ok, result.message
    assert "async def fetch" in result.new_source


def test_async_sample_for_a_sync_original_is_kept_as_written():
    result = splice(ORIGINAL, "Box.grow", "async def grow(self, by):\n    return by\n")
    assert result.ok and result.function_code.startswith("async def grow")


def test_nested_class_target():
    sample = "class Box:\n    class Inner:\n        def depth(self):\n            return 42\n"
    result = splice(ORIGINAL, "Box.Inner.depth", sample)
    assert result.ok, result.message
    assert run(result.new_source)["Box"].Inner().depth() == 42


def test_markdown_fences_and_prose():
    answer = ("Sure! Here is a helper first:\n\n```python\nprint('not it')\n```\n\n"
              "And the function:\n\n```python\ndef add(a, b=2):\n    return a - b\n```\n"
              "This subtracts. Hope it helps!\n")
    result = splice(ORIGINAL, "add", answer)
    assert result.ok, result.message
    assert run(result.new_source)["add"](5) == 3


def test_unterminated_fence_and_fences_inside_a_docstring():
    truncated = "```python\ndef add(a, b=2):\n    return 0\n"
    assert run(splice(ORIGINAL, "add", truncated).new_source)["add"](1) == 0
    docstring_fence = 'def add(a, b=2):\n    """Example:\n```\nadd(1)\n```\n    """\n    return 7\n'
    result = splice(ORIGINAL, "add", docstring_fence)
    assert result.ok and run(result.new_source)["add"](1) == 7


def test_leading_prose_without_fences_and_trailing_junk_are_dropped():
    sample = "Here is the code you asked for\ndef add(a, b=2):\n    return 5\n\n@classmethod\n"
    result = splice(ORIGINAL, "add", sample)
    assert result.ok, result.message
    assert run(result.new_source)["add"](1) == 5
    assert len(result.notes) == 2


def test_truncated_function_body_is_a_syntax_failure():
    """A sample cut inside its own body is not repaired: it is graded as a syntax failure."""
    result = splice(ORIGINAL, "add", "def add(a, b=2):\n\tx = foo(a,\n\t\tb\n")
    assert not result.ok and result.error is SpliceErrorKind.SYNTAX and result.new_source is None
    assert "line" in result.message


def test_missing_definition():
    result = splice(ORIGINAL, "add", "def plus(a, b=2):\n    return a + b\n")
    assert not result.ok and result.error is SpliceErrorKind.MISSING_DEFINITION
    method_in_module_target = splice(ORIGINAL, "add", "class X:\n    def add(self):\n        pass\n")
    assert method_in_module_target.error is SpliceErrorKind.MISSING_DEFINITION


def test_empty_sample_is_a_syntax_failure():
    assert splice(ORIGINAL, "add", "  \n\n").error is SpliceErrorKind.SYNTAX


def test_python_version_of_the_target_is_respected():
    sample = "def add(a, b=2):\n    if (n := a):\n        return n\n    return b\n"
    assert splice(ORIGINAL, "add", sample).ok
    old = splice(ORIGINAL, "add", sample, python=(3, 7))
    assert not old.ok and old.error is SpliceErrorKind.SYNTAX


def test_spliced_file_that_does_not_compile_is_a_syntax_failure():
    """`return` outside a function passes ast.parse of the sample but not compile of the file."""
    sample = "def add(a, b=2):\n    yield a\n    return b\n"
    result = splice(ORIGINAL, "get", sample.replace("add(a, b=2)", "get(x)").replace("a\n", "x\n")
                    .replace("return b", "return 1"))
    assert not result.ok and "does not compile" in result.message   # async generator with a return value


def test_indented_sample_copied_out_of_a_class():
    result = splice(ORIGINAL, "Box.grow", "    def grow(self, by):\n        return -by\n")
    assert result.ok and run(result.new_source)["Box"]().grow(1) == -1


def test_target_missing_from_the_original_is_a_task_error():
    with pytest.raises(TaskError):
        splice(ORIGINAL, "Box.nothing", "def nothing(self):\n    pass\n")
    with pytest.raises(TaskError):
        splice(ORIGINAL, "Nope.grow", "def grow(self):\n    pass\n")


def test_lineno_picks_a_property_setter():
    original = ("class T:\n    @property\n    def v(self):\n        return self._v\n\n"
                "    @v.setter\n    def v(self, value):\n        self._v = value\n")
    result = splice(original, "T.v", "def v(self, value):\n    self._v = value * 2\n", lineno=6)
    ns = run(result.new_source)
    t = ns["T"]()
    t.v = 2
    assert t.v == 4


def test_splicing_the_original_function_gives_the_original_file():
    """Ground-truth runs splice each task's own source back: the file must not change."""
    tree = ast.parse(ORIGINAL)
    box = next(n for n in tree.body if isinstance(n, ast.ClassDef))
    grow = next(n for n in box.body if isinstance(n, ast.FunctionDef) and n.name == "grow")
    source = "\n".join(line[4:] for line in ORIGINAL.splitlines()[grow.decorator_list[0].lineno - 1:grow.end_lineno])
    assert splice(ORIGINAL, "Box.grow", source).new_source == ORIGINAL
    add = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "add")
    source = "\n".join(ORIGINAL.splitlines()[add.decorator_list[0].lineno - 1:add.end_lineno])
    assert splice(ORIGINAL, "add", source).new_source == ORIGINAL


def test_conditional_definition_is_found():
    original = "import sys\nif sys.version_info >= (3,):\n    def f():\n        return 1\nelse:\n    def f():\n        return 2\n"
    result = splice(original, "f", "def f():\n    return 3\n")
    assert result.ok and run(result.new_source)["f"]() == 3


def test_blank_body_keeps_docstring_and_raises():
    ns = run(blank_body(ORIGINAL, "Box.grow"))
    assert ns["Box"].grow.__doc__ == "Grow the box."
    with pytest.raises(NotImplementedError):
        ns["Box"]().grow(1)
    assert ns["Box"].grow.decorated
    one_liner = run(blank_body("def f(): return 1\n", "f"))
    with pytest.raises(NotImplementedError):
        one_liner["f"]()
    with pytest.raises(NotImplementedError):
        run(blank_body(ORIGINAL, "add"))["add"](1)


def _synthetic_original(prompt: str, name: str) -> tuple[str, str]:
    """A file holding the task's signature, in a class when its first parameter is self/cls."""
    try:
        with warnings.catch_warnings():   # invalid escapes in CoderEval's docstrings
            warnings.simplefilter("ignore")
            fdef = ast.parse(prompt + "pass").body[0]
    except SyntaxError:   # one CoderEval prompt has a truncated signature
        fdef = ast.parse(f"def {name}(*args, **kwargs): pass").body[0]
    fdef.body = [ast.Expr(ast.Constant("Doc.")), ast.Return(ast.Constant(None))]
    params = fdef.args.posonlyargs + fdef.args.args
    code = ast.unparse(fdef)
    if params and params[0].arg in ("self", "cls"):
        body = "\n".join("    " + line for line in code.split("\n"))
        return f"import os\n\n\nclass Owner:\n    def other(self):\n        pass\n\n{body}\n", f"Owner.{name}"
    return f"import os\n\n\n{code}\n", name


@pytest.mark.slow
def test_every_codegen_sample_of_codereval_splices_or_is_a_syntax_failure():
    """Figures over CodeGen's 2297 released samples; every spliced file compiles, and every sample
    CoderEval's harness ran to a pass splices."""
    prompts = {json.loads(line)["question_id"]: json.loads(line)["input"]
               for line in (CODEREVAL / "CEPythonRaw.jsonl").open()}
    counts: Counter[str] = Counter()
    for line in (CODEREVAL / "results-CodeGen-raw.jsonl").open():
        record = json.loads(line)
        original, qualname = _synthetic_original(prompts[record["_id"]], record["name"])
        for generated in record["generate_results"]:
            result = splice(original, qualname, generated["generate_code"])
            counts["ok" if result.ok else result.error.value] += 1
            if result.ok:
                with warnings.catch_warnings():   # invalid escapes in generated code
                    warnings.simplefilter("ignore")
                    compile(result.new_source, qualname, "exec")
                assert re.search(rf"def {record['name']}\(", result.function_code)
            else:
                assert not generated["is_pass"], (record["name"], result.message)
    print("\nsplice over CodeGen raw samples:", dict(counts))
    assert sum(counts.values()) == 2297
    assert counts["ok"] > 1800


STACKED = '''def experimental(note):
    def wrap(f):
        return f
    return wrap


class Conn:
    def __init__(self, url):
        self.url = url

    @classmethod
    @experimental("new in 2.0")
    def open(cls, url):
        return cls(url)
'''


def test_stacked_classmethod_from_its_column_keeps_every_decorator():
    """A task's source starts where its first decorator does: only that line lost its indentation."""
    source = STACKED[STACKED.index("@classmethod"):]
    assert source.startswith("@classmethod\n    @experimental")
    result = splice(STACKED, "Conn.open", source)
    assert result.ok and result.new_source == STACKED
    assert run(result.new_source)["Conn"].open("bolt://x").url == "bolt://x"
    changed = splice(STACKED, "Conn.open", source.replace("cls(url)", "cls(url + '/db')"))
    assert run(changed.new_source)["Conn"].open("bolt://x").url == "bolt://x/db"


DOCTESTED = '''class Sums:
    @staticmethod
    def dictsum(a, b):
        """Sum two dicts key by key.

            >>> Sums.dictsum({'x': 1}, {'x': 2, 'y': 3})
            {'x': 3, 'y': 3}
        """
        out = dict(a)
        for k, v in b.items():
            out[k] = out.get(k, 0) + v
        return out


def first(xs):
    r"""The first item.

    >>> first([4, 5])
    4
    """
    return xs[0]
'''


def _doc_of(source: str, qualname: str) -> str | None:
    scope = ast.parse(source)
    for part in qualname.split("."):
        scope = next(n for n in scope.body if getattr(n, "name", None) == part)
    return ast.get_docstring(scope, clean=False)


@pytest.mark.parametrize("qualname, sample", [
    ("Sums.dictsum", "def dictsum(a, b):\n    '''Adds them.'''\n    return {k: a.get(k, 0) + b.get(k, 0) for k in {**a, **b}}\n"),
    ("Sums.dictsum", "@staticmethod\ndef dictsum(a, b):\n    # no docstring\n    return {k: a.get(k, 0) + b.get(k, 0) for k in {**a, **b}}\n"),
    ("first", "def first(xs): return xs[0]\n"),
    ("first", "def first(xs):\n\t'''Mine.\n\n\t>>> first([1])\n\t1\n\t'''\n\treturn next(iter(xs))\n"),
], ids=["own-docstring", "none-decorated", "one-line-body", "tabs"])
def test_a_sample_keeps_the_docstring_whose_doctests_the_task_runs(qualname, sample):
    """planb `_dictsum`: the task's tests include the doctest of the original's docstring; a sample with a
    docstring of its own dropped it, and every such sample failed with "1 expected tests did not run"."""
    res = splice(DOCTESTED, qualname, sample, keep_docstring=True)
    assert res.ok, res.message
    assert _doc_of(res.new_source, qualname) == _doc_of(DOCTESTED, qualname)
    assert any("docstring" in n for n in res.notes)
    namespace: dict = {}
    exec(compile(res.new_source, "spliced.py", "exec"), namespace)
    func = namespace[qualname.split(".")[0]]
    for part in qualname.split(".")[1:]:
        func = getattr(func, part)
    (test,) = doctest.DocTestFinder().find(func, qualname, module=False, globs=namespace)
    assert len(test.examples) == 1 and doctest.DocTestRunner().run(test).failed == 0
    start, end = res.function_lines
    assert "return" in res.new_source.splitlines()[end - 1]
    assert _doc_of(splice(DOCTESTED, qualname, sample).new_source, qualname) != _doc_of(DOCTESTED, qualname)
