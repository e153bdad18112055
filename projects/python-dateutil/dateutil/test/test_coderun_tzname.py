"""Tests written for coderun's benchmark (not part of dateutil): tzname_in_python2, which dateutil's own tests
never call (it decorates the tzname methods when dateutil.tz is imported, before any test runs). They ask
only what its docstring says: on Python 3 a decorated tzname gives the same names; on Python 2, bytestrings."""

from dateutil.tz import _common


class _Zone:
    def __init__(self, name):
        self.name = name

    def tzname(self, dt):
        """The zone's name."""
        return self.name


def test_tzname_in_python2_leaves_python3_names_as_they_are(monkeypatch):
    monkeypatch.setattr(_common, "PY2", False)
    wrapped = _common.tzname_in_python2(_Zone.tzname)
    assert wrapped(_Zone("UTC"), None) == "UTC"
    assert wrapped(_Zone("Europe/Paris"), None) == "Europe/Paris"


def test_tzname_in_python2_encodes_names_on_python2(monkeypatch):
    monkeypatch.setattr(_common, "PY2", True)
    wrapped = _common.tzname_in_python2(_Zone.tzname)
    assert wrapped(_Zone("UTC"), None) == b"UTC"
    assert wrapped(_Zone("Europe/Paris"), None) == b"Europe/Paris"
