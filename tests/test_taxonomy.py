"""Failure classes from real pytest runs: a small project whose functions fail in every classified way."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from xml.etree import ElementTree

import pytest

from coderun.records import Evidence, TestOutcome
from coderun.runner.taxonomy import (
    FailureClass,
    Primary,
    SpliceSite,
    classify,
    classify_syntax,
    parse_failure,
)

MODULE = '''
class Box:
    def get(self):
        return self._missing

def first(x):
    return x[0]

def ratio(a, b):
    return a / b

def name_missing():
    return MOD + 1

def lib_import():
    import surely_not_a_module_xyz
    return surely_not_a_module_xyz

def project_import():
    from pkg.nothere import thing
    return thing

def api_misuse(t):
    t.sort()
    return t

def wrong_argument():
    return len([1], [2])

def operand():
    return "a" + 1

def wrong_value():
    return 2

def raises_key():
    raise KeyError("k")

def no_raise():
    return 1

def inner_assert(x):
    assert x > 0
    return x

def returns_none():
    return None

def helper_user():
    return first([1]) + MOD
'''

TESTS = '''
import pytest
from pkg.mod import (Box, first, ratio, name_missing, lib_import, project_import, api_misuse,
                     wrong_argument, operand, wrong_value, raises_key, no_raise, inner_assert, returns_none)

def test_box(): assert Box().get() == 1
def test_first(): assert first([]) == 1
def test_ratio(): assert ratio(1, 0) == 1
def test_name(): assert name_missing() == 1
def test_lib(): assert lib_import()
def test_project_import(): assert project_import()
def test_api(): assert api_misuse((2, 1)) == (1, 2)
def test_argument(): assert wrong_argument() == 1
def test_operand(): assert operand() == "a1"
def test_value(): assert wrong_value() == 3
def test_wrong_exception():
    with pytest.raises(ValueError):
        raises_key()
def test_did_not_raise():
    with pytest.raises(ValueError):
        no_raise()
def test_inner_assert(): assert inner_assert(-1) == -1
def test_outside(): assert returns_none()["a"] == 1
def test_passes(): assert first([3]) == 3
'''

EXPECTED = {
    "test_box": ("Box.get", "runtime/definition_missing"),
    "test_first": ("first", "runtime/boundary_check"),
    "test_ratio": ("ratio", "runtime/boundary_check"),
    "test_name": ("name_missing", "runtime/definition_missing"),
    "test_lib": ("lib_import", "syntax/library_import"),
    "test_project_import": ("project_import", "runtime/definition_missing"),
    "test_api": ("api_misuse", "runtime/api_misuse"),
    "test_argument": ("wrong_argument", "runtime/incorrect_argument"),
    "test_operand": ("operand", "runtime"),
    "test_value": ("wrong_value", "functional/assertion_mismatch"),
    # --tb=short shows only the call line, not the `with pytest.raises(...)` above it: the evidence
    # says a KeyError left the generated function, nothing more
    "test_wrong_exception": ("raises_key", "runtime/boundary_check"),
    "test_did_not_raise": ("no_raise", "functional/wrong_exception"),
    "test_inner_assert": ("inner_assert", "runtime"),
    "test_outside": ("returns_none", "functional"),
}


def _ranges(source: str) -> dict[str, tuple[int, int]]:
    out = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    out[f"{node.name}.{item.name}"] = (item.lineno, item.end_lineno)
        elif isinstance(node, ast.FunctionDef) and node.col_offset == 0:
            out[node.name] = (node.lineno, node.end_lineno)
    return out


def _run_pytest(root: Path, *args: str) -> tuple[dict[str, TestOutcome], str]:
    """Run pytest like the executor does (--tb=short) and read each failure as the reporter records it:
    the crash line, then the short traceback (here taken from pytest's own junit report)."""
    junit = root / "junit.xml"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-o", "addopts=", "-q", "--tb=short",
                           "-p", "no:cacheprovider", f"--junitxml={junit}", *args], cwd=root,
                          env={**os.environ, "PYTHONPATH": str(root)}, capture_output=True, text=True,
                          timeout=300)
    outcomes = {}
    if junit.exists():
        for case in ElementTree.parse(junit).iter("testcase"):
            nodeid = f"{case.get('file') or ''}::{case.get('name')}"
            outcome, message = "passed", ""
            for tag, name in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
                el = case.find(tag)
                if el is not None:
                    outcome, message = name, f"{el.get('message') or ''}\n{el.text or ''}"
            outcomes[case.get("name")] = TestOutcome(nodeid=nodeid, outcome=outcome, message=message)
    return outcomes, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("proj")
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "mod.py").write_text(MODULE)
    (root / "tests").mkdir()
    (root / "tests" / "test_mod.py").write_text(textwrap.dedent(TESTS))
    return root


@pytest.fixture(scope="module")
def outcomes(project) -> dict[str, TestOutcome]:
    result, log = _run_pytest(project, "tests/test_mod.py")
    assert "test_passes" in result, log
    return result


@pytest.mark.slow
@pytest.mark.parametrize("test", sorted(EXPECTED))
def test_failure_class_from_a_real_pytest_run(outcomes, test):
    function, label = EXPECTED[test]
    outcome = outcomes[test]
    assert outcome.outcome in ("failed", "error")
    site = SpliceSite(file="pkg/mod.py", ranges=(_ranges(MODULE)[function],), class_name="Box",
                      project_packages=frozenset({"pkg"}))
    evidence = Evidence(expected=[outcome.nodeid], outcomes=[outcome])
    got = classify(evidence, site)
    assert got.label == label, outcome.message


@pytest.mark.slow
def test_exception_outside_the_generated_function_is_not_blamed_on_it(outcomes):
    """A NameError raised by the test-facing code, not by the spliced function, is not the sample's."""
    outcome = outcomes["test_name"]
    site = SpliceSite(file="pkg/mod.py", ranges=(_ranges(MODULE)["first"],))
    got = classify(Evidence(expected=[outcome.nodeid], outcomes=[outcome]), site)
    assert got.primary is Primary.FUNCTIONAL and got.secondary is None


@pytest.mark.slow
def test_without_a_splice_site_runtime_errors_are_other_but_test_assertions_are_functional(outcomes):
    def label(test):
        o = outcomes[test]
        return classify(Evidence(expected=[o.nodeid], outcomes=[o])).label

    assert label("test_first") == "other"
    assert label("test_value") == "functional/assertion_mismatch"


@pytest.mark.slow
def test_syntax_error_in_the_spliced_file_is_read_from_the_log(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "mod.py").write_text("def f(x):\n    return (x + 1\n\ndef g():\n    return 2\n")
    (tmp_path / "test_mod.py").write_text("from pkg.mod import f\n\ndef test_f():\n    assert f(1) == 2\n")
    result, log = _run_pytest(tmp_path, "test_mod.py::test_f")
    assert "test_f" not in result
    evidence = Evidence(expected=["test_mod.py::test_f"], exit_code=2, log_tail=log)
    got = classify(evidence, SpliceSite(file="pkg/mod.py", ranges=((1, 2),)))
    assert got.primary is Primary.SYNTAX, log
    other_file = classify(evidence, SpliceSite(file="pkg/other.py", ranges=((1, 2),)))
    assert other_file.primary is Primary.OTHER


def test_timeout_and_infrastructure_come_first():
    ev = Evidence(expected=["t"], timed_out=True, infra_error="docker daemon went away")
    assert classify(ev).primary is Primary.INFRASTRUCTURE
    assert classify(Evidence(expected=["t"], timed_out=True)).label == "timeout"


def test_no_traceback_is_other_never_a_guess():
    ev = Evidence(expected=["t::a"], outcomes=[TestOutcome(nodeid="t::a", outcome="skipped")])
    assert classify(ev, SpliceSite("m.py", ((1, 3),))) == FailureClass(Primary.OTHER, None,
                                                                        "no traceback in the evidence")


def test_wrong_exception_type_when_the_traceback_shows_the_raises_context():
    text = ("KeyError: 'k'\n    def test_w():\n        with pytest.raises(ValueError):\n>           raises_key()\n\n"
            "tests/test_mod.py:18: \n_ _ _\n\n    def raises_key():\n>       raise KeyError('k')\nE       KeyError: 'k'\n\n"
            "pkg/mod.py:37: KeyError")
    site = SpliceSite("pkg/mod.py", ((36, 37),))
    got = classify(Evidence(expected=["t"], outcomes=[TestOutcome(nodeid="t", outcome="failed", message=text)]), site)
    assert got.label == "functional/wrong_exception"


def test_native_traceback_frames_and_exception():
    text = ('Traceback (most recent call last):\n  File "/tmp/w/src/pkg/mod.py", line 7, in f\n'
            '    return d[k]\nKeyError: \'k\'\n')
    parsed = parse_failure(text)
    assert parsed.exc_type == "KeyError" and parsed.frames[-1].line == 7
    site = SpliceSite("src/pkg/mod.py", ((5, 9),))
    assert classify(Evidence(expected=["x"], log_tail=text), site).label == "runtime/boundary_check"


@pytest.mark.parametrize("message,label", [
    ("unexpected indent (mod.py, line 3)", "syntax"),
    ("IndentationError: unindent does not match any outer indentation level", "syntax/indentation"),
    ("'(' was never closed", "syntax/incomplete_syntax"),
    ("unterminated string literal (detected at line 2)", "syntax/incomplete_syntax"),
    ("invalid syntax", "syntax"),
])
def test_syntax_secondaries(message, label):
    assert classify_syntax(message).label == label
