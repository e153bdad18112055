"""_dictsum of contrib/planb-swiftsync.py, tested for coderun's benchmark from its docstring.

The script's name is not a module name, so it is loaded from its file. _dictsum adds up the values of
dictionaries that share their keys (per-thread counters, say) into a new dictionary.
"""

import importlib.util
import warnings
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("planb-swiftsync.py")


@pytest.fixture(scope="module")
def dictsum():
    spec = importlib.util.spec_from_file_location("planb_swiftsync", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "No swiftclient?": the sync itself is not under test
        spec.loader.exec_module(module)
    return module._dictsum


def test_docstring_example(dictsum):
    assert dictsum([{"a": 1, "b": 2}, {"a": 5, "b": 0}]) == {"a": 6, "b": 2}


def test_many_dictionaries(dictsum):
    parts = [{"files": 3, "bytes": 100, "errors": 0},
             {"files": 1, "bytes": 50, "errors": 2},
             {"files": 0, "bytes": 7, "errors": 1}]
    assert dictsum(parts) == {"files": 4, "bytes": 157, "errors": 3}


def test_any_iterable(dictsum):
    assert dictsum({"n": i, "m": 2 * i} for i in range(1, 5)) == {"n": 10, "m": 20}
    assert dictsum(iter([{"x": 1.5}, {"x": 2.25}])) == {"x": 3.75}


def test_one_dictionary(dictsum):
    assert dictsum([{"a": 1, "b": -2}]) == {"a": 1, "b": -2}
