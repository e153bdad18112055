"""coderun's tests of cinder.api.api_utils.is_none_string.

The project's own tests reach it only through the is_public filter of volume and group types. Written for
the benchmark from its docstring ("Check if a string represents a None value") and that caller, which
treats is_public=none (any case) as "public and private alike".
"""

import unittest

from cinder.api import api_utils


class TestIsNoneString(unittest.TestCase):

    def test_none_in_any_case(self):
        for value in ('none', 'None', 'NONE', 'nOnE'):
            self.assertIs(True, api_utils.is_none_string(value), value)

    def test_other_strings(self):
        # Not 'null' or ' none': whether those "represent a None value" the docstring leaves open.
        for value in ('', 'no', 'nones', 'false', '0'):
            self.assertIs(False, api_utils.is_none_string(value), value)

    def test_non_strings(self):
        for value in (0, 1.5, True, b'none', ['none']):
            self.assertIs(False, api_utils.is_none_string(value), value)
