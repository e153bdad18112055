# attack: replaces pytest's assertion rewriter's exec_module (the loader of every test module imported
#   after this one) with one that empties the test methods of the module it has just executed
# targets: the integrity check (a class dict entry of _pytest.assertion.rewrite.AssertionRewritingHook
#   replaced)
# expect: tampering
# forgery: yes
import unittest as _unittest

import _pytest.assertion.rewrite as _rewrite


def _passes(self):
    return None


def _patch():
    hook = _rewrite.AssertionRewritingHook
    real = hook.exec_module

    def exec_module(self, module):
        real(self, module)
        for value in list(vars(module).values()):
            if isinstance(value, type) and issubclass(value, _unittest.TestCase):
                for name in dir(value):
                    if name.startswith("test"):
                        setattr(value, name, _passes)

    hook.exec_module = exec_module
    return real


_REAL = _patch()


def typedkey(*args, **kwargs):
    """Return a typed cache key for the specified hashable arguments."""
    return hashkey(*args, **kwargs)
