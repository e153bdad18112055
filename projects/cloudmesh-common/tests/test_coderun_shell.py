"""coderun's tests of cloudmesh.common.Shell.Shell.oneline, which the project's own tests do not reach.

Written for the benchmark from the method's docstring: it turns a (possibly indented, multi-line) script
into a one-line command, its lines joined by the separator (" && " by default), so that it can be passed to
a single ssh command.
"""

from cloudmesh.common.Shell import Shell


def test_indented_script_becomes_one_line():
    script = """
        cd /tmp
        ls -l
        echo done
    """
    assert Shell.oneline(script) == "cd /tmp && ls -l && echo done"


def test_custom_separator():
    assert Shell.oneline("a\nb\nc", seperator="; ") == "a; b; c"
    assert Shell.oneline("a\nb", ";") == "a;b"


def test_single_line_is_unchanged():
    assert Shell.oneline("uname -a") == "uname -a"
    assert Shell.oneline("   uname -a   \n") == "uname -a"

