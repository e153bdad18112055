"""The CLI's rendering of progress events (coderun/cli/render.py): the lines a log gets, and a terminal's bar."""

from __future__ import annotations

import io

from rich.console import Console

from coderun.cli.render import Renderer
from coderun.events import Counted, Note, StepDone, StepOutput, StepStarted, step


def _console(terminal: bool) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=terminal, width=120, color_system=None), out


def test_a_log_gets_each_step_when_it_ends_and_the_notes():
    console, out = _console(False)
    with Renderer(console) as show:
        show(StepStarted("env calc", "create venv"))
        show(StepOutput("env calc", "create venv", "Collecting [x]"))
        show(StepDone("env calc", "create venv", 3.46))
        show(StepDone("", "debootstrap bookworm", 1.0, ok=False))
        show(StepDone("", "calc:1 pulled from r", None))
        show(Note("calc", "analyzing"))
        show(Note("", "warning: no python3.9 on PATH [sic]", "warning"))
    assert out.getvalue().splitlines() == [
        "✓ env calc: create venv (3.5s)", "✗ debootstrap bookworm (1.0s)", "✓ calc:1 pulled from r",
        "calc: analyzing", "warning: no python3.9 on PATH [sic]"]


def test_a_log_gets_a_line_every_ten_items_and_one_at_the_end():
    console, out = _console(False)
    with Renderer(console) as show:
        for done in range(0, 24):
            show(Counted("calc", done, 23, detail=f"{done} verified"))
    lines = out.getvalue().splitlines()
    assert [ln.rsplit(" ", 1)[0] for ln in lines] == [
        "calc: 0/23 tasks done (0 verified)", "calc: 10/23 tasks done (10 verified)",
        "calc: 20/23 tasks done (20 verified)", "calc: 23/23 tasks done (23 verified)"]


def test_an_interrupted_count_still_says_where_it_stopped():
    console, out = _console(False)
    with Renderer(console) as show:
        for done in range(4):
            show(Counted("eval", done, 9, "samples"))
    assert out.getvalue().splitlines()[-1].startswith("eval: 3/9 samples done ")


def test_a_terminal_gets_a_bar_and_the_step_lines():
    console, out = _console(True)
    with Renderer(console) as show:
        with step(show, "env calc", "create venv"):
            show(StepOutput("env calc", "create venv", "pip [install]"))
        for done in range(4):
            show(Counted("calc", done, 3, detail=f"{done} verified"))
    text = out.getvalue()
    assert "✓ env calc: create venv (" in text and "3/3" in text and "3 verified" in text
