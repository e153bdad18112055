"""Tests written for coderun's benchmark (not part of prestoplot): versioneer's functions in _version.py,
which prestoplot's own tests never call (get_versions runs once, at import)."""

import sys

import pytest

from prestoplot import _version

PIECES = {"closest-tag": "1.2", "distance": 3, "short": "abc1234", "long": "abc1234" + "0" * 33,
          "dirty": False, "error": None, "date": "2023-02-17T16:50:17-0800", "branch": "main"}


def test_get_config_describes_this_project():
    cfg = _version.get_config()
    assert isinstance(cfg, _version.VersioneerConfig)
    assert (cfg.VCS, cfg.style, cfg.tag_prefix) == ("git", "pep440", "")
    assert cfg.parentdir_prefix == "None"
    assert cfg.versionfile_source == "src/prestoplot/_version.py"
    assert cfg.verbose is False


def test_register_vcs_handler_stores_and_returns_the_function(monkeypatch):
    monkeypatch.setattr(_version, "HANDLERS", {})

    def handler():
        return "handled"

    assert _version.register_vcs_handler("hg", "pieces_from_vcs")(handler) is handler
    assert _version.register_vcs_handler("hg", "keywords")(len) is len
    assert _version.HANDLERS == {"hg": {"pieces_from_vcs": handler, "keywords": len}}


def test_run_command_returns_output_and_exit_code():
    out, code = _version.run_command([sys.executable], ["-c", "print('  hello  ')"])
    assert (out, code) == ("hello", 0)


def test_run_command_tries_the_next_command_when_one_is_missing():
    out, code = _version.run_command(["no-such-command-coderun", sys.executable], ["-c", "print(42)"])
    assert (out, code) == ("42", 0)


def test_run_command_failures():
    assert _version.run_command([sys.executable], ["-c", "import sys; sys.exit(3)"]) == (None, 3)
    assert _version.run_command(["no-such-command-coderun"], []) == (None, None)
    with pytest.raises(AssertionError):
        _version.run_command(sys.executable, [])


def test_run_command_passes_cwd_and_env(tmp_path):
    code = "import os; print(os.getcwd(), os.environ.get('CODERUN_X'))"
    out, rc = _version.run_command([sys.executable], ["-c", code], cwd=str(tmp_path), env={"CODERUN_X": "y"})
    assert rc == 0 and out == f"{tmp_path} y"


def test_plus_or_dot():
    assert _version.plus_or_dot({"closest-tag": "1.2"}) == "+"
    assert _version.plus_or_dot({"closest-tag": "1.2+local"}) == "."
    assert _version.plus_or_dot({}) == "+"


def test_render_styles():
    assert _version.render(dict(PIECES), "pep440") == {
        "version": "1.2+3.gabc1234", "full-revisionid": PIECES["long"], "dirty": False, "error": None,
        "date": PIECES["date"]}
    assert _version.render(dict(PIECES), "default")["version"] == "1.2+3.gabc1234"
    assert _version.render(dict(PIECES), None)["version"] == "1.2+3.gabc1234"
    assert _version.render(dict(PIECES), "git-describe")["version"] == "1.2-3-gabc1234"
    assert _version.render(dict(PIECES), "git-describe-long")["version"] == "1.2-3-gabc1234"
    assert _version.render(dict(PIECES), "pep440-post")["version"] == "1.2.post3+gabc1234"
    assert _version.render(dict(PIECES), "pep440-old")["version"] == "1.2.post3"
    assert _version.render(dict(PIECES), "pep440-pre")["version"] == "1.2.post0.dev3"
    assert _version.render(dict(PIECES, dirty=True), "pep440")["version"] == "1.2+3.gabc1234.dirty"
    assert _version.render(dict(PIECES, distance=0), "pep440")["version"] == "1.2"


def test_render_error_and_unknown_style():
    failed = _version.render(dict(PIECES, error="no git"), "pep440")
    assert failed == {"version": "unknown", "full-revisionid": PIECES["long"], "dirty": None, "error": "no git",
                      "date": None}
    with pytest.raises(ValueError, match="unknown style"):
        _version.render(dict(PIECES), "no-such-style")


def test_get_versions_from_expanded_keywords(monkeypatch):
    full = "61c94a4a354806aacdd280c61caed76df2b63205"
    monkeypatch.setattr(_version, "get_keywords", lambda: {
        "refnames": " (HEAD -> main, tag: 0.5.2)", "full": full, "date": "2023-02-17 16:50:17 -0800"})
    versions = _version.get_versions()
    assert versions["version"] == "0.5.2" and versions["full-revisionid"] == full
    assert versions["dirty"] is False and versions["error"] is None
    assert versions["date"] == "2023-02-17T16:50:17-0800"


def test_get_versions_from_git_pieces(monkeypatch):
    def pieces(tag_prefix, root, verbose):
        assert tag_prefix == "" and verbose is False
        return dict(PIECES)

    monkeypatch.setattr(_version, "git_pieces_from_vcs", pieces)
    assert _version.get_versions()["version"] == "1.2+3.gabc1234"


def test_get_versions_without_any_source(monkeypatch):
    def no(*args, **kwargs):
        raise _version.NotThisMethod("no")

    monkeypatch.setattr(_version, "git_pieces_from_vcs", no)
    monkeypatch.setattr(_version, "versions_from_parentdir", no)
    assert _version.get_versions() == {"version": "0+unknown", "full-revisionid": None, "dirty": None,
                                       "error": "unable to compute version", "date": None}
