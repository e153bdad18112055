"""Tests written for coderun's benchmark (not part of dateutil): tzname_in_python2, which dateutil's own tests
never call (it decorates the tzname methods when dateutil.tz is imported, before any test runs)."""

from dateutil.tz import _common


class _Zone:
    def __init__(self, name):
        self.name = name

    def tzname(self, dt):
        """The zone's name."""
        return self.name


def test_tzname_in_python2_leaves_python3_functions_alone(monkeypatch):
    monkeypatch.setattr(_common, "PY2", False)
    assert _common.tzname_in_python2(_Zone.tzname) is _Zone.tzname


def test_tzname_in_python2_encodes_names_on_python2(monkeypatch):
    monkeypatch.setattr(_common, "PY2", True)
    wrapped = _common.tzname_in_python2(_Zone.tzname)
    assert wrapped is not _Zone.tzname
    assert wrapped.__name__ == "tzname" and wrapped.__doc__ == "The zone's name."
    assert wrapped(_Zone("UTC"), None) == b"UTC"
    assert wrapped(_Zone("Europe/Paris"), dt=None) == b"Europe/Paris"
    assert wrapped(_Zone(None), None) is None
