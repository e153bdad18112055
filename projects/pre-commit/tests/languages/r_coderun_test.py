"""Tests written for coderun's benchmark (not part of pre-commit): r._inline_r_setup, which only R hook
installs reach (they need Rscript, which the test environment does not have)."""
from __future__ import annotations

from pre_commit.languages import r


def test_inline_r_setup_sets_the_options_before_the_code():
    out = r._inline_r_setup('install.packages("x")')
    lines = [line.strip() for line in out.strip().splitlines()]
    assert lines == ['options(install.packages.compile.from.source = "never")', 'install.packages("x")']


def test_inline_r_setup_keeps_the_code_as_it_is():
    code = 'prefix_dir <- "a b"\nlibrary(renv)\nrenv::restore()'
    out = r._inline_r_setup(code)
    assert code in out
    assert out.index("options(install.packages.compile.from.source") < out.index(code)
