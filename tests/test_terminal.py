"""What a person sees in a terminal: every table fits 80 columns, and no number or name is cut.

The unit tests render with a rich Console of a fixed width; the end-to-end test runs the main job,
`coderun eval --ground-truth`, in a real terminal (tmux) at 80 and 120 columns and reads the captured pane.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from coderun.cli import _common
from coderun.cli.main import app
from coderun.evaluation.store import RunStore
from coderun.report import build_report, compare
from coderun.report.metrics import UnderK
from coderun.report.render import group_rows, pct, to_rich
from coderun.report.terminal import make_table, table_or_stacked
from tests.shared_home import home_view
from tests.test_eval import calc_built
from tests.test_report import make_run

ELLIPSIS = "…"


def render(renderable, width: int) -> list[str]:
    console = Console(width=width, record=True, file=open(os.devnull, "w"))  # noqa: SIM115 (closed with console)
    console.print(renderable)
    return console.export_text().splitlines()


def assert_fits(lines: list[str], width: int) -> None:
    wide = [line for line in lines if len(line) > width]
    assert not wide, f"lines wider than {width}: {wide}"
    cut = [line for line in lines if ELLIPSIS in line]
    assert not cut, f"cut cells: {cut}"


def report_of(path: Path, ks=(1, 5, 10)):
    with RunStore.open(path) as store:
        return build_report(store, list(ks), UnderK.EXCLUDE)


def row_of(lines: list[str], group: str, after: int = 0) -> list[str]:
    """The cells of the first row named `group` from line `after` on."""
    return next(line.split() for line in lines[after:] if line.split()[:1] == [group])


@pytest.fixture
def full_report(tmp_path):
    """Every pass@k and Acc@k column has values: the widest report a run gives."""
    return report_of(make_run(tmp_path / "a", {"t1": 10, "t2": 1, "t3": 0, "t4": 7}, n=10, infra={"t4": 2},
                              label="a-model-with-a-long-name"))


@pytest.mark.parametrize("width", [80, 120])
def test_report_table_fits_and_keeps_every_number_whole(full_report, width):
    """At 80 columns rich used to cut every header and number ('100…', 'gro…')."""
    lines = render(to_rich([full_report], []), width)
    assert_fits(lines, width)
    for name, g in group_rows(full_report):
        cells = [cell for line in lines if line.split()[:1] == [name] for cell in line.split()]
        for k in ("1", "5", "10"):
            assert pct(g.pass_at_k[k]) in cells and pct(g.acc_at_k[k].overall) in cells, (name, k, cells)
    header = " ".join(line for line in lines if line.startswith("group"))
    for col in ("pass@1", "pass@5", "pass@10", "acc@10", "classes@10", "functional", "infra"):
        assert col in header.split()


def test_report_stacks_pass_and_acc_at_80_and_keeps_one_table_at_120(full_report):
    titles_80 = [line for line in render(to_rich([full_report], []), 80) if "(%)" in line]
    titles_120 = [line for line in render(to_rich([full_report], []), 120) if "(%)" in line]
    assert [t.split("—")[1].strip() for t in titles_80] == ["pass@k (%)", "Acc@k (%)"]
    assert [t.split("—")[1].strip() for t in titles_120] == ["pass@k and Acc@k (%)"]


def test_empty_columns_are_hidden_and_wide_shows_them(tmp_path, monkeypatch):
    """One sample per task (ground truth): pass@5 and pass@10 have no value and only take room."""
    monkeypatch.setattr(_common.console, "_width", 80)  # as in an 80-column terminal
    run = make_run(tmp_path / "gt", {t: 1 for t in ("t1", "t2", "t3", "t4")}, n=1)
    narrow = CliRunner().invoke(app, ["report", str(run)])
    assert narrow.exit_code == 0, narrow.output
    header = next(line for line in narrow.stdout.splitlines() if line.startswith("group")).split()
    assert "pass@1" in header and "pass@5" not in header and "--wide shows" in " ".join(narrow.stdout.split())
    assert_fits(narrow.stdout.splitlines(), 80)
    wide = CliRunner().invoke(app, ["report", str(run), "--wide"])
    assert wide.exit_code == 0, wide.output
    header = next(line for line in wide.stdout.splitlines() if line.startswith("group"))
    assert {"pass@5", "pass@10", "acc@5", "acc@10"} <= set(header.split())
    assert ELLIPSIS not in wide.stdout and len(header) > 80


def test_comparison_of_two_runs_fits_80(full_report, tmp_path):
    b = report_of(make_run(tmp_path / "b", {"t1": 0, "t2": 3, "t3": 2, "t4": 2}, n=10, label="another-model-b"))
    lines = render(to_rich([full_report, b], [compare(full_report, b)]), 80)
    assert_fits(lines, 80)
    assert any(line.startswith("side by side") for line in lines)
    cells = " ".join(lines).split()
    for d in compare(full_report, b).deltas:
        assert f"{100 * d.delta:+.2f}" in cells and f"{d.p_value:.3g}" in cells


def test_long_last_column_goes_under_the_row_at_80():
    """`coderun tasks list` cut task ids and CoderEval ids ('cachetools/cachet…', '62b8d27a48ba5a41…')."""
    rows = [["cachetools/cachetools/decorators.py::cached", "project_runnable", "verified", "9"],
            ["cachetools/cachetools/func.py::ttl_cache", "project_runnable", "verified", "17"]]
    aliases = ["62b8d27a48ba5a41d1c3f4c6", ""]
    table = table_or_stacked(["task", "level", "status", "tests"], rows, "aliases", aliases, left=(0, 1, 2))
    for width, stacked in ((80, True), (140, False)):
        lines = render(table, width)
        assert_fits(lines, width)
        text = "\n".join(lines)
        for cell in [c for r in rows for c in r] + aliases[:1]:
            assert cell in text
        assert ("  aliases: 62b8d27a48ba5a41d1c3f4c6" in text) is stacked


def test_numbers_are_never_cut_even_when_the_terminal_is_too_narrow():
    """When nothing fits, a name column folds; a number column keeps its width."""
    table = make_table(["function", "line", "level"], [["pkg/module.py::" + "x" * 60, "12345", "project_runnable"]],
                       left=(0, 2), fold=(0,))
    lines = render(table, 40)
    assert_fits(lines, 40)
    assert "12345" in lines[2] and "project_runnable" in lines[2]


# ------------------------------------------------------------------------------ in a real terminal

@pytest.fixture(scope="module")
def calc_home(tmp_path_factory):
    """The small hand-made project of test_eval, tasks built, under a short $CODERUN_HOME (its run folder path
    is printed whole, and must fit 80 columns)."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (CI installs it: apt-get install tmux)")
    shared = calc_built(tmp_path_factory)
    home = home_view(shared / "home", Path(tempfile.mkdtemp(prefix="cr-", dir="/tmp")))
    yield home, shared / "calc.yaml"
    shutil.rmtree(home, ignore_errors=True)


def run_in_tmux(args: list[str], width: int, home: Path, timeout: float = 120) -> str:
    """Run coderun in a tmux pane `width` columns wide, wait for it to exit, and return the pane as a person
    sees it (wrapped lines joined back, so a line wider than the pane shows as such)."""
    sock, done = home / f"tmux-{width}.sock", home / f"done-{width}"
    exe = shutil.which("coderun", path=str(Path(sys.executable).parent)) or "coderun"
    # COLUMNS and LINES unset: the width comes from the terminal, as for a person typing the command
    command = " ".join(["env", "-u", "COLUMNS", "-u", "LINES", f"CODERUN_HOME={home}", exe, *args])
    tmux = ["tmux", "-S", str(sock)]
    subprocess.run([*tmux, "-f", "/dev/null", "new-session", "-d", "-x", str(width), "-y", "50",
                    f"{command}; echo $? > {done}; sleep 600"], check=True)
    try:
        deadline = time.monotonic() + timeout
        while not done.exists():
            assert time.monotonic() < deadline, "coderun did not finish in the tmux pane"
            time.sleep(0.5)
        time.sleep(0.5)  # the last lines reach the pane
        assert done.read_text().strip() == "0", "coderun failed in the tmux pane"
        size = subprocess.run([*tmux, "display", "-p", "#{pane_width}"], check=True, capture_output=True,
                              text=True).stdout.strip()
        assert size == str(width)
        return subprocess.run([*tmux, "capture-pane", "-p", "-J", "-S", "-", "-E", "-"], check=True,
                              capture_output=True, text=True).stdout
    finally:
        subprocess.run([*tmux, "kill-server"], check=False, capture_output=True)


@pytest.mark.slow
@pytest.mark.parametrize("width", [80, 120])
def test_main_job_in_a_real_terminal_prints_whole_numbers(calc_home, width):
    """`coderun eval --ground-truth` at 80 columns printed `│ ove… │ 20 │ 20 │ 100… │`."""
    home, manifest = calc_home
    pane = run_in_tmux(["eval", "--project", "calc", "--projects", str(manifest.parent), "--ground-truth",
                        "--backend", "local", "-j", "2"], width, home)
    lines = pane.rstrip("\n").splitlines()
    assert_fits(lines, width)
    start = next(i for i, line in enumerate(lines) if "pass@k" in line and "(%)" in line)
    run_dir = Path(next(line.split(": ", 1)[1] for line in lines if line.startswith("run folder: ")))
    report = json.loads((run_dir / "report.json").read_text())
    assert report["overall"]["pass@k"]["1"] == 1.0
    overall = row_of(lines, "overall", start)
    assert overall[:4] == ["overall", str(report["overall"]["tasks"]), str(report["overall"]["samples"]), "100.00"]
    header = next(line for line in lines[start:] if line.startswith("group")).split()
    assert header[:4] == ["group", "tasks", "samples", "pass@1"]
    for level in [name for name, g in report["levels"].items() if g["tasks"]]:
        assert row_of(lines, level, start)[3] == "100.00"
    assert f"report: coderun report {run_dir.name}" in pane
