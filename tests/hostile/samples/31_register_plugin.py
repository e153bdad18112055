# attack: registers a pytest plugin at import time (found through the garbage collector) whose
#   makereport hook turns every failure into a pass
# targets: the reporter's record of plugins registered during collection
# expect: tampering
import gc


class _Forger:
    @staticmethod
    def pytest_runtest_makereport(item, call):
        return None

    @staticmethod
    def pytest_runtest_logreport(report):
        report.outcome = "passed"


def _register():
    done = 0
    for obj in gc.get_objects():  # every pytest Config alive: the running session's is among them
        if type(obj).__name__ == "Config" and hasattr(obj, "pluginmanager"):
            try:
                obj.pluginmanager.register(_Forger(), f"hostile-forger-{done}")
                done += 1
            except Exception:
                pass
    return done


_REGISTERED = _register()


def typedkey(*args, **kwargs):
    """Return a typed cache key for the specified hashable arguments."""
    return hashkey(*args, **kwargs)
