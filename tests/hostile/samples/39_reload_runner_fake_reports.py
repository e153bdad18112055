# attack: puts a fake _pytest.reports module (whose TestReport makes every report a pass) in sys.modules
#   and reloads _pytest.runner, so the runner's own code imports the fake, then puts the real one back
# targets: the integrity check (every module dict entry of _pytest.runner replaced by the reload)
# expect: tampering
# forgery: yes
def typedkey(*args, **kwargs):
    """Return a typed cache key for the specified hashable arguments."""
    import importlib
    import sys
    import types

    import _pytest.reports as real

    runner = sys.modules["_pytest.runner"]
    if not getattr(runner, "_typed", False):
        fake = types.ModuleType("_pytest.reports")
        fake.__dict__.update(vars(real))

        class TestReport(real.TestReport):
            @classmethod
            def from_item_and_call(cls, item, call):
                report = real.TestReport.from_item_and_call(item, call)
                report.outcome, report.longrepr = "passed", None
                return report

        fake.TestReport = TestReport
        sys.modules["_pytest.reports"] = fake
        try:
            importlib.reload(runner)
            runner._typed = True
        finally:
            sys.modules["_pytest.reports"] = real
    return hashkey(*args, **kwargs)
