"""Pass@k and Acc@k: the estimator, its edge cases, the policies for tasks with fewer than k samples."""

from __future__ import annotations

import math

import pytest

from coderun.errors import UsageError
from coderun.records import ContextSet
from coderun.report.metrics import (
    UnderK,
    acc_code,
    aggregate_acc_at_k,
    aggregate_pass_at_k,
    body_context,
    code_identifiers,
    module_package,
    parse_ks,
    per_task_pass_at_k,
    task_pass_at_k,
    task_token_hits,
    token_hit,
)
from coderun.stats import pass_at_k


def _binomial_pass_at_k(n: int, c: int, k: int) -> float:
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


@pytest.mark.parametrize("n,c,k", [(10, 0, 1), (10, 1, 1), (10, 3, 5), (10, 10, 10), (7, 2, 7), (200, 13, 100)])
def test_pass_at_k_matches_the_binomial_definition(n, c, k):
    assert pass_at_k(n, c, k) == pytest.approx(_binomial_pass_at_k(n, c, k), abs=1e-12)


def test_pass_at_1_is_the_fraction_correct():
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)


def test_pass_at_k_edge_cases():
    assert pass_at_k(10, 0, 10) == 0.0
    assert pass_at_k(10, 1, 10) == 1.0
    assert pass_at_k(5, 5, 1) == 1.0
    assert pass_at_k(1, 0, 1) == 0.0


def test_pass_at_k_is_stable_where_binomials_overflow_floats():
    """C(5000, 2500) does not fit in a float; the product form must still give a finite, exact value."""
    value = pass_at_k(5000, 1, 2500)
    assert value == pytest.approx(0.5)
    assert 0.0 <= pass_at_k(5000, 3, 100) <= 1.0


@pytest.mark.parametrize("n,c,k", [(10, 11, 1), (10, -1, 1), (10, 2, 0), (3, 1, 5)])
def test_pass_at_k_rejects_impossible_input(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_under_k_policies():
    assert task_pass_at_k(9, 0, 10, UnderK.EXCLUDE) is None
    assert task_pass_at_k(9, 0, 10, UnderK.CODEREVAL) == 0.0
    assert task_pass_at_k(9, 1, 10, UnderK.CODEREVAL) == 1.0
    # pad: a task with 9 samples is scored as one with 10, the missing one failing
    assert task_pass_at_k(9, 1, 1, UnderK.PAD, pad_to=10) == pytest.approx(0.1)
    assert task_pass_at_k(9, 1, 1, UnderK.CODEREVAL) == pytest.approx(1 / 9)
    assert task_pass_at_k(0, 0, 1, UnderK.EXCLUDE) is None


def test_aggregate_reports_how_many_tasks_were_left_out():
    counts = {"a": (10, 10), "b": (10, 0), "c": (3, 1)}
    table = aggregate_pass_at_k(counts, [1, 5], UnderK.EXCLUDE)
    assert table[1].value == pytest.approx((1.0 + 0.0 + 1 / 3) / 3) and table[1].excluded == 0
    assert table[5].value == pytest.approx(0.5) and table[5].tasks == 2 and table[5].excluded == 1
    codereval = aggregate_pass_at_k(counts, [5], UnderK.CODEREVAL)
    assert codereval[5].value == pytest.approx(2 / 3) and codereval[5].excluded == 0


def test_aggregate_with_no_usable_task_has_no_value():
    assert aggregate_pass_at_k({"a": (2, 1)}, [5])[5].value is None
    assert aggregate_pass_at_k({}, [1])[1].value is None


def test_per_task_vector_for_the_bootstrap():
    assert per_task_pass_at_k({"a": (10, 5), "b": (2, 1)}, 5) == {"a": pytest.approx(1 - 1 / 252)}


def test_parse_ks():
    assert parse_ks("10,1,5,5") == [1, 5, 10]
    for bad in ("", "1,x", "0", "-1"):
        with pytest.raises(UsageError):
            parse_ks(bad)


def test_identifiers_ignore_strings_and_comments_and_keep_attribute_chains():
    code = 'def f(p):\n    """uses Path"""\n    x = os.path.join(p, "Path")  # Path\n    return self._cache.get(x)\n'
    ids = code_identifiers(code)
    assert {"os.path.join", "os.path", "path.join", "join", "os", "self._cache.get", "_cache"} <= ids
    assert "Path" not in ids


def test_identifiers_of_code_that_does_not_tokenize():
    ids = code_identifiers('def f(x):\n    return Path(x, "Other"\n')
    assert "Path" in ids and "Other" not in ids


@pytest.mark.timeout(60)
def test_identifiers_of_an_unclosed_string_full_of_escapes_come_back():
    """A CodeGen sample (pysolbase extostr #8) ends inside print("\\t\\t...: the string regex once backtracked
    exponentially on it and `coderun eval` never finished its report."""
    code = 'def f(x):\n    y = "a\\tb"\n    print("' + "\\t" * 400 + '")\n    print("' + "\\t" * 300 + "\n"
    ids = code_identifiers(code)
    assert {"f", "x", "y", "print"} <= ids and "a" not in ids


def test_acc_at_k_is_token_recall_with_the_unbiased_estimator():
    ctx = ContextSet(classes=["Path"], apis=["os.path.join", "self._get"], vars=["DEFAULT"])
    samples = ["def f(x):\n    return Path(x)\n",
               "def f(x):\n    return os.path.join(x, DEFAULT)\n",
               "def f(x):\n    return self._get(x)\n",
               "def f(x):\n    return x\n"]
    hits = task_token_hits(ctx, samples)
    assert hits == {"classes": [("Path", 1)], "apis": [("os.path.join", 1), ("self._get", 1)],
                    "vars": [("DEFAULT", 1)]}
    table = aggregate_acc_at_k({"t": (4, hits)}, [1, 4])
    assert table[1].overall == pytest.approx(0.25) and table[1].tokens == 4
    assert table[4].overall == 1.0 and table[4].kinds == {"classes": 1.0, "apis": 1.0, "vars": 1.0}


def test_acc_at_k_without_oracle_tokens_is_unavailable():
    table = aggregate_acc_at_k({"t": (3, task_token_hits(ContextSet(), ["x = 1"]))}, [1])
    assert table[1].overall is None and table[1].tasks == 0


ORIGINAL = '''    @cached(key=hashkey)
    def describe(self, items: dict, timer=time.monotonic) -> str:
        """Describe the items."""
        from .render import render_items
        from ..util import width
        label = f"{self.__class__.__name__}: {len(items)}"
        super().describe(items)
        return render_items(label, self.prefix, width(items), Path(self.root))
'''
CONTEXT = ContextSet(classes=["dict", "Path"],
                     apis=["hashkey", "time.monotonic", "len", "super().describe", "pkg.view.render.render_items",
                           "pkg.util.width"],
                     vars=["self.__class__", "self.prefix", "self.root", "self.items"])


def test_the_original_recalls_its_whole_body_context_and_a_raising_body_none():
    """Ground truth scored acc@1 99.44 (f-strings, super().x and imports were not read as the analyzer
    writes them) and `--blank` 21.5% (the signature's annotations, defaults and parameter names counted)."""
    expected = body_context(CONTEXT, ORIGINAL, "describe", "pkg/view/thing.py")
    assert expected == ContextSet(classes=["Path"], apis=["len", "super().describe", "pkg.view.render.render_items",
                                                          "pkg.util.width"],
                                  vars=["self.__class__", "self.prefix", "self.root"])
    blank = "def describe(self, items: dict, timer=time.monotonic) -> str:\n    raise NotImplementedError\n"
    for code, want in ((ORIGINAL, 1.0), (blank, 0.0)):
        hits = task_token_hits(expected, [acc_code(code, "describe")], module_package("pkg/view/thing.py"))
        assert aggregate_acc_at_k({"t": (1, hits)}, [1])[1].overall == want, (want, hits)


def test_a_self_attribute_token_is_not_hit_by_a_parameter_of_that_name():
    ids = code_identifiers("if 1:\n    return items\n")
    assert not token_hit("self.items", ids)
    assert token_hit("self.items", code_identifiers("if 1:\n    return other.items\n"))
