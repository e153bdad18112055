"""coderun's tests of cloudmesh.common.shlex.split, which the project's own tests do not reach.

Written for the benchmark from the function's docstring (a multi-platform shlex.split: 'this' picks the
current platform, 1 is POSIX, 0 is Windows/CMD, other values are reserved) and from the standard
library's shlex.split, which the POSIX mode follows for plain words, quotes and escapes. What the docstring
leaves open is not tested: shell operators (`a&&b`) and the reserved platform values.
"""

import shlex

import pytest
from cloudmesh.common.shlex import split


@pytest.mark.parametrize("line", [
    "ls -l /tmp",
    "a b   c",
    "echo 'single quoted' \"double quoted\"",
    r"a\ b c",
    "cp 'x y' \"z\"",
])
def test_posix_agrees_with_the_standard_library(line):
    assert split(line, 1) == shlex.split(line)


def test_this_platform_is_posix_here():
    assert split('echo "hello world" x', "this") == ["echo", "hello world", "x"]
    assert split("  padded   words  ") == ["padded", "words"]


def test_posix_empty_quotes_are_an_empty_argument():
    assert split('x ""', 1) == ["x", ""]
    assert split("", 1) == []


def test_posix_incomplete_quote_is_an_error():
    with pytest.raises(ValueError):
        split('"abc', 1)


def test_windows_keeps_backslashes_and_doubled_quotes():
    assert split('a "b c" d', 0) == ["a", "b c", "d"]
    assert split(r'C:\dir\x.exe "a ""q"" b"', 0) == [r"C:\dir\x.exe", 'a "q" b']
