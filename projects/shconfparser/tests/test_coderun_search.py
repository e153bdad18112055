"""Written for the coderun benchmark (not part of shconfparser): the project's tests pass get_pattern only
plain strings without surrounding spaces. These follow its docstring (a string or a compiled pattern in, a
compiled pattern out, spaces stripped unless strip=False) and its callers, the search_* methods."""

import re
from collections import OrderedDict

from shconfparser.search import Search


def tree():
    return OrderedDict([("hostname R1", None), ("interface FastEthernet0/0", OrderedDict()),
                        ("interface Serial0/1", OrderedDict())])


class TestGetPattern:
    def test_a_string_becomes_a_compiled_pattern(self):
        p = Search().get_pattern(r"interface\s+\S+")
        assert isinstance(p, re.Pattern)
        assert p.match("interface Serial0/1")
        assert not p.match("hostname R1")

    def test_surrounding_spaces_are_stripped_by_default(self):
        p = Search().get_pattern("  hostname R1  ")
        assert p.pattern == "hostname R1"
        assert p.match("hostname R1")

    def test_strip_false_keeps_the_spaces(self):
        p = Search().get_pattern("  hostname", strip=False)
        assert p.pattern == "  hostname"
        assert not p.match("hostname R1")
        assert p.match("  hostname R1")

    def test_a_compiled_pattern_is_returned_as_it_is(self):
        compiled = re.compile(" interface ", re.IGNORECASE)
        assert Search().get_pattern(compiled) is compiled
        assert Search().get_pattern(compiled, strip=False) is compiled

    def test_searching_with_a_padded_pattern(self):
        s = Search()
        assert s.search_in_tree("  interface Fast.*  ", tree()) == "interface FastEthernet0/0"
        found = s.search_all_in_tree(re.compile(r"interface \w+0/\d"), tree())
        assert list(found) == ["interface FastEthernet0/0", "interface Serial0/1"]
