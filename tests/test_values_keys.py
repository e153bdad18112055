"""Canonical forms sort a dict's items as the JSON text of each [key, value] form orders them (the order the
recorder's input keys and the differential step's comparisons rely on), whatever shortcut makes them."""

from __future__ import annotations

import enum
import json
import sys

import pytest

from coderun.harness import HARNESS_DIR

sys.path.insert(0, str(HARNESS_DIR))
import coderun_values as values  # noqa: E402  (standalone harness module, shipped beside coderun)


class Colour(enum.IntEnum):
    RED = 1


class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y

    def __hash__(self):
        return id(self)


def _nested(depth: int) -> dict:
    return {"leaf": [1.5, None, True]} if depth == 0 else {f"k{depth}": _nested(depth - 1), depth: {"s", depth}}


VALUES = [
    {},
    {1: "a", 12: "b", -1: "c", -12: "d", 2 ** 60: "e", 3: "f", 10: "g"},
    {"a": 1, "ab": 2, "a\"": 3, "a\\": 4, "é": 5, "\x01": 6, "": 7, "A": 8, "a b": 9},
    {True: 1, None: 2, "true": 3, "null": 4, 1.5: 5, (1, 2): 6, (1,): 7, frozenset({1}): 8, Colour.RED: 9},
    {Point(1, 2): "first", Point(1, 2): "second", Point(0, 0): "third"},   # alike keys: the values decide
    _nested(6),
    {i: str(i) for i in range(300)},
]


def _dict_orders_of(form) -> list[list]:
    """Every dict node's items in a form."""
    if not isinstance(form, list):
        return []
    found = [form[1]] if len(form) == 2 and form[0] == "dict" else []
    return found + [d for item in form for d in _dict_orders_of(item)]


@pytest.mark.parametrize("value", VALUES)
def test_a_dicts_items_are_in_the_order_of_their_json_texts(value):
    dicts = _dict_orders_of(values.canonical(value))
    assert dicts
    for items in dicts:
        assert items == sorted(items, key=lambda item: json.dumps(item, sort_keys=True))


def test_alike_keys_are_ordered_by_their_values():
    items = _dict_orders_of(values.canonical({Point(1, 2): "b", Point(1, 2): "a"}))[0]
    assert [v for _, v in items] == ["a", "b"]
