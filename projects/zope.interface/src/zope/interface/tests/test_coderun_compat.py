"""Tests of zope.interface._compat's configuration functions, written for the coderun benchmark (they are
not zope.interface's own; see tests.supplementary in projects/zope.interface.yaml).

The project's own tests reach these functions only through `test_optimizations`, which compares two
answers of the same functions, so a body returning None passes there. Each test here checks the
documented answer for the PURE_PYTHON setting it runs in; the manifest runs them in every setting
(tests.configurations: PURE_PYTHON=1, unset, and 0, with the C extension built), so together they
cover every branch.
"""

import os
import sys
import unittest

from zope.interface import _compat


def _pure_python():
    return os.environ.get("PURE_PYTHON")


class TestConfigurationFunctions(unittest.TestCase):

    def test_c_optimizations_required(self):
        # "Return a true value if the C optimizations are required": PURE_PYTHON=0 requires them.
        self.assertEqual(bool(_compat._c_optimizations_required()), _pure_python() == "0")

    def test_c_optimizations_ignored(self):
        # PURE_PYTHON set to anything but "0" ignores them (`_use_c_impl`); set to "0" it requires them. Unset,
        # "the opposite of _c_optimizations_required" (its docstring) and `_use_c_impl` (the C code is
        # attempted) disagree: not tested.
        value = _pure_python()
        if value is None:
            self.skipTest("PURE_PYTHON unset: the docstrings disagree")
        self.assertEqual(bool(_compat._c_optimizations_ignored()), value != "0")

    def test_should_attempt_c_optimizations(self):
        # Required ones are always attempted; otherwise not on PyPy, nor when PURE_PYTHON ignores them.
        value = _pure_python()
        ignored = value is not None and value != "0"
        expected = value == "0" or (not hasattr(sys, "pypy_version_info") and not ignored)
        self.assertEqual(bool(_compat._should_attempt_c_optimizations()), expected)

    def test_c_optimizations_available(self):
        # "If available, return the C optimization module": the manifest builds it (install.pre_install).
        from zope.interface import _zope_interface_coptimizations as c_opt
        self.assertIs(_compat._c_optimizations_available(), c_opt)
