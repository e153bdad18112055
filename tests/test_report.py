"""Reports from a real run store: groups, infra kept apart, formats, comparisons, HTML in a real browser."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from importlib import metadata
from pathlib import Path

import pytest
from typer.testing import CliRunner

from coderun.cli.main import app
from coderun.envs.versions import coderun_environment
from coderun.evaluation.store import Result, RunInfo, RunSample, RunStore, RunTask
from coderun.records import ContextSet, Level, Package, ProjectEnvironment, RunEnvironment, VerdictKind
from coderun.stats import paired_bootstrap, paired_permutation_test

LEVELS = {"t1": Level.SELF_CONTAINED, "t2": Level.SLIB_RUNNABLE, "t3": Level.CLASS_RUNNABLE,
          "t4": Level.PROJECT_RUNNABLE}


def make_run(path: Path, passes: dict[str, int], n: int = 5, infra: dict[str, int] | None = None,
             label: str = "A", codes: dict[tuple[str, int], str] | None = None) -> Path:
    """A run where task t has passes[t] passing samples among n, the last infra[t] being infra errors;
    `codes` gives some samples their code."""
    store = RunStore.create(path, RunInfo(run_id=path.name, label=label))
    store.add_tasks([RunTask(task_id=t, project="demo", level=lv,
                             oracle_context=ContextSet(classes=["Path"], apis=["os.path.join"], vars=["LIMIT"]))
                     for t, lv in LEVELS.items()])
    for t in LEVELS:
        store.add_samples([RunSample(task_id=t, index=i, code=(codes or {}).get(
            (t, i), f"def f(p):\n    return Path(p) if {i} else LIMIT\n")) for i in range(n)])
        for i in range(n):
            spliced, log = path / "spliced" / f"{t}-{i}.py", path / "logs" / f"{t}-{i}.log"
            spliced.write_text(f"# spliced {t} {i}\n")
            log.write_text("".join(f"log line {j}\n" for j in range(50)))
            if i >= n - (infra or {}).get(t, 0):
                verdict, failure = VerdictKind.INFRA, "infrastructure"
            elif i < passes[t]:
                verdict, failure = VerdictKind.PASS, None
            else:
                verdict, failure = VerdictKind.FAIL, ["runtime/boundary_check", "functional", "syntax"][i % 3]
            store.record_result(Result(task_id=t, index=i, verdict=verdict, failure=failure, reason="r",
                                       spliced_path=str(spliced), log_path=str(log)))
    store.close()
    return path


def run_cli(*args: str) -> str:
    res = CliRunner().invoke(app, list(args))
    assert res.exit_code == 0, res.output
    return res.stdout


@pytest.fixture
def run_a(tmp_path) -> Path:
    return make_run(tmp_path / "a", {"t1": 5, "t2": 1, "t3": 0, "t4": 2}, infra={"t4": 2})


@pytest.fixture
def run_b(tmp_path) -> Path:
    return make_run(tmp_path / "b", {"t1": 0, "t2": 3, "t3": 2, "t4": 2}, label="B")


def test_json_groups_and_infra_left_out(run_a):
    doc = json.loads(run_cli("report", str(run_a), "--format", "json", "-k", "1,5"))
    for group in ("overall", "standalone", "non_standalone"):
        assert {"tasks", "samples", "pass@k", "acc@k"} <= set(doc[group])
    assert set(doc["levels"]) == {"self_contained", "slib_runnable", "class_runnable", "project_runnable"}
    overall = doc["overall"]
    assert overall["infra"] == 2 and overall["samples"] == 18
    # t4 has 3 graded samples (2 pass); pass@1 = mean(1, .2, 0, 2/3)
    assert overall["pass@k"]["1"] == pytest.approx((1 + 0.2 + 0 + 2 / 3) / 4)
    assert overall["excluded_under_k"]["5"] == 1 and overall["pass@k"]["5"] == pytest.approx((1 + 1 + 0) / 3)
    assert doc["standalone"]["tasks"] == 2 and doc["non_standalone"]["tasks"] == 2
    assert overall["failures"]["syntax"] + overall["failures"]["runtime"] + overall["failures"]["functional"] == 10
    assert overall["acc@k"]["1"]["classes"] is not None


def test_under_k_codereval_counts_short_tasks(run_a):
    doc = json.loads(run_cli("report", str(run_a), "--format", "json", "-k", "5", "--under-k", "codereval"))
    assert doc["overall"]["excluded_under_k"]["5"] == 0
    assert doc["overall"]["pass@k"]["5"] == pytest.approx(3 / 4)


def test_per_sample_json_lines(run_a):
    rows = [json.loads(line) for line in run_cli("report", str(run_a), "-f", "json", "--per-sample").splitlines()]
    assert len(rows) == 20
    row = next(r for r in rows if r["task_id"] == "t3" and r["sample"] == 1)
    assert row["verdict"] == "fail" and row["failure"] == "functional"
    assert row["spliced_path"] == "spliced/t3-1.py" and row["log_path"] == "logs/t3-1.log"


def test_table_and_markdown(run_a):
    table = run_cli("report", str(run_a))
    assert "pass@" in table and "overall" in table and "infra" in table
    md = run_cli("report", str(run_a), "-f", "md")
    assert "| overall |" in md and "infrastructure errors" in md and "left out" in md


def test_environment_section_in_markdown_and_html_only(run_a, tmp_path):
    """md and html show what ran the run; the terminal table does not grow; json carries the record."""
    assert "Not recorded" in run_cli("report", str(run_a), "-f", "md")  # a run made without versions
    project = ProjectEnvironment(project="demo", backend="local", where="/envs/demo-1", python="3.9.18",
                                 packages=[Package(name="pytest", version="7.4.4")], recorded_at="2024-01-01")
    with RunStore.open(run_a) as store:
        store.set_environment(RunEnvironment(coderun=coderun_environment(), projects={"demo": project}))
    pydantic = metadata.version("pydantic")
    md = run_cli("report", str(run_a), "-f", "md")
    env_md = md[md.index("## Environment"):]
    assert f"| pydantic | {pydantic} |" in env_md and "### Project demo" in env_md
    assert "`/envs/demo-1`, Python 3.9.18" in env_md and "| pytest | 7.4.4 |" in env_md
    out = tmp_path / "r.html"
    run_cli("report", str(run_a), "-f", "html", "-o", str(out))
    html = out.read_text()
    assert "<summary>project demo: local, Python 3.9.18, 1 installed</summary>" in html
    assert f"<td>pydantic</td><td>{pydantic}</td>" in html
    assert "pydantic" not in run_cli("report", str(run_a))
    doc = json.loads(run_cli("report", str(run_a), "-f", "json"))
    assert doc["environment"]["projects"]["demo"]["packages"] == [{"name": "pytest", "version": "7.4.4"}]


def test_report_by_run_id_under_coderun_home(tmp_path, monkeypatch):
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path / "home"))
    make_run(tmp_path / "home" / "runs" / "myrun", {t: 1 for t in LEVELS})
    assert "overall" in run_cli("report", "myrun", "-f", "md")


def test_unknown_run_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("CODERUN_HOME", str(tmp_path))
    res = CliRunner().invoke(app, ["report", "nosuchrun"])
    assert res.exit_code == 7 and "no run 'nosuchrun'" in res.output
    res = CliRunner().invoke(app, ["report", str(tmp_path), "-k", "0"])
    assert res.exit_code == 2


def test_two_runs_side_by_side_flips_and_deltas(run_a, run_b):
    doc = json.loads(run_cli("report", str(run_a), str(run_b), "-f", "json", "-k", "1,5"))
    [cmp] = doc["comparisons"]
    assert cmp["solved_in_a_not_b"] == ["t1"] and cmp["solved_in_b_not_a"] == ["t3"]
    d1 = next(d for d in cmp["deltas"] if d["k"] == 1)
    assert d1["lo"] <= d1["delta"] <= d1["hi"] and d1["tasks"] == 4
    md = run_cli("report", str(run_a), str(run_b), "-f", "md")
    assert "Side by side" in md and "Solved in A, not in B" in md


def test_html_is_self_contained_with_charts_and_links(run_a, run_b, tmp_path):
    out = tmp_path / "r.html"
    run_cli("report", str(run_a), str(run_b), "-f", "html", "-o", str(out))
    text = out.read_text()
    assert text.count("<svg") >= 6           # pass@k, Acc@k, taxonomy per run; side by side; delta
    assert "<link" not in text and "<script" not in text and 'src="http' not in text and 'href="http' not in text
    assert 'href="a/spliced/t1-0.py"' in text and "log line 49" in text


def test_paired_statistics():
    a, b = [0.0, 0.5, 1.0, 0.2], [0.0, 0.5, 1.0, 0.2]
    assert paired_bootstrap(a, b) == (0.0, 0.0, 0.0)
    assert paired_permutation_test(a, b) == 1.0
    a, b = [0.0] * 12, [1.0] * 12
    delta, lo, hi = paired_bootstrap(a, b, iters=2000)
    assert (delta, lo, hi) == (1.0, 1.0, 1.0)
    assert paired_permutation_test(a, b) == pytest.approx(2 / 4096)
    delta, lo, hi = paired_bootstrap([0, 1, 0, 1, 0, 1], [1, 1, 0, 1, 1, 1], iters=4000, seed=3)
    assert lo <= delta <= hi and delta == pytest.approx(2 / 6)
    assert paired_bootstrap([0, 1], [1, 1], seed=1) == paired_bootstrap([0, 1], [1, 1], seed=1)
    with pytest.raises(ValueError):
        paired_bootstrap([1.0], [1.0, 2.0])


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="headless check needs Debian's chromium (apt-get install chromium)")
def test_html_renders_in_headless_chromium(run_a, run_b, tmp_path):
    """The HTML opens in a real browser and its screenshot has the charts' colours in it."""
    from matplotlib.image import imread

    out = tmp_path / "report.html"
    run_cli("report", str(run_a), str(run_b), "-f", "html", "-o", str(out))
    png = tmp_path / "shot.png"
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                        "--disable-component-update", "--disable-sync", "--no-first-run",
                        f"--user-data-dir={profile}", f"--screenshot={png}", "--window-size=1280,2000",
                        out.as_uri()], capture_output=True, timeout=180, check=False)
    assert png.is_file() and png.stat().st_size > 20_000
    pixels = imread(png)[..., :3]
    blue = (abs(pixels[..., 0] - 0x1F / 255) < 0.02) & (abs(pixels[..., 1] - 0x77 / 255) < 0.02) & \
        (abs(pixels[..., 2] - 0xB4 / 255) < 0.02)      # pass@1 bars (#1f77b4)
    green = (abs(pixels[..., 0] - 0x2E / 255) < 0.02) & (abs(pixels[..., 1] - 0x7D / 255) < 0.02) & \
        (abs(pixels[..., 2] - 0x32 / 255) < 0.02)      # pass segments of the taxonomy bars (#2e7d32)
    assert blue.sum() > 500 and green.sum() > 200


def test_a_chart_whose_values_are_all_na_has_no_legend_and_no_warning():
    """CI's one warning: a report chart with every value n/a called legend() with nothing labeled, and
    matplotlib warned on the user's terminal."""
    import warnings

    from coderun.report.html import _bars, _legend, plt

    fig, ax = plt.subplots()
    _bars(ax, [0.0, 1.0], [None, None], 0.4, "acc@1", "#000")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _legend(ax)
    assert ax.get_legend() is None
    _bars(ax, [2.0], [0.5], 0.4, "acc@5", "#000")
    _legend(ax)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["acc@5"]
    plt.close(fig)
