# attack: monkeypatches unittest: TestCase.run reports success without running the test
# targets: the reporter's tamper checks on unittest
# expect: tampering
import unittest


def typedkey(*args, **kwargs):
    """Return a typed cache key for the specified hashable arguments."""
    def run(self, result=None):
        if result is not None:
            result.startTest(self)
            result.addSuccess(self)
            result.stopTest(self)
        return result

    unittest.TestCase.run = run
    return hashkey(*args, **kwargs)
