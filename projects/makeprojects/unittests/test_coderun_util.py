"""coderun's tests of makeprojects.util.regex_dict, which the project's own tests do not reach.

Written for the benchmark from the function's docstring: the wildcard keys become "equivalent regexes", the
values stay. The project keeps a compiled pattern's `match` as the key (visual_studio.py calls it with a file's
base name); a compiled pattern or a regex string is a regex as much, so each is matched as what it is.
"""

import re
import unittest

from makeprojects.util import regex_dict


def _matches(key, name):
    if isinstance(key, str):
        return re.match(key, name)
    if isinstance(key, re.Pattern):
        return key.match(name)
    return key(name)


def matching(rules, name):
    """The values of the rules whose converted key matches `name`."""
    return [value for key, value in rules.items() if _matches(key, name)]


class TestRegexDict(unittest.TestCase):

    def setUp(self):
        self.cpp = {'a': 'arf', 'b': 'bark', 'c': 'coo'}
        self.header = {'h': 'help'}
        self.rules = regex_dict({'*.cpp': self.cpp, '*.h': self.header})

    def test_one_key_per_wildcard_and_values_intact(self):
        self.assertEqual(len(self.rules), 2)
        values = list(self.rules.values())
        self.assertTrue(any(value is self.cpp for value in values))
        self.assertTrue(any(value is self.header for value in values))
        self.assertEqual(self.cpp, {'a': 'arf', 'b': 'bark', 'c': 'coo'})

    def test_keys_match_file_names_like_the_wildcard(self):
        self.assertEqual(matching(self.rules, 'main.cpp'), [self.cpp])
        self.assertEqual(matching(self.rules, 'burger.h'), [self.header])
        self.assertEqual(matching(self.rules, 'readme.txt'), [])

    def test_the_whole_name_must_match(self):
        self.assertEqual(matching(self.rules, 'main.cpp.bak'), [])
        self.assertEqual(matching(self.rules, 'main.hpp'), [])
        self.assertEqual(matching(self.rules, 'main.c'), [])

    def test_other_wildcards(self):
        rules = regex_dict({'a?.c': 1, 'x[yz].glsl': 2, 'shader.hlsl': 3})
        self.assertEqual(matching(rules, 'ab.c'), [1])
        self.assertEqual(matching(rules, 'abc.c'), [])
        self.assertEqual(matching(rules, 'xz.glsl'), [2])
        self.assertEqual(matching(rules, 'xa.glsl'), [])
        self.assertEqual(matching(rules, 'shader.hlsl'), [3])
        self.assertEqual(matching(rules, 'shaderxhlsl'), [])

    def test_keys_are_not_the_wildcard_strings(self):
        self.assertFalse({'*.cpp', '*.h'} & {key for key in self.rules if isinstance(key, str)})

    def test_empty(self):
        self.assertEqual(regex_dict({}), {})


if __name__ == '__main__':
    unittest.main()
