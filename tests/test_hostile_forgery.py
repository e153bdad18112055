"""The forgery samples of the hostile corpus (issue 21: a wrong function that tries to be graded pass from
inside the test process) through `coderun eval`, with both backends and both executors: one eval per
(backend, executor) holding every forgery sample and two copies of the ground truth. None of the forgeries
passes, each gets its expected class, and the ground truth still passes next to them."""

from __future__ import annotations

import json

import pytest
from hostile_corpus import TARGET, TYPEDKEY_OK, forgeries, run_eval, user_manifests, verdicts_by_code

pytestmark = pytest.mark.slow

CONTROLS = [TYPEDKEY_OK + f"# forgery control {i}\n" for i in range(2)]


@pytest.mark.parametrize("executor", ["workers", "naive"])
@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_no_forgery_is_graded_pass(request, tmp_path, backend, executor):
    if backend == "docker":
        request.getfixturevalue("docker_engine")
    samples = forgeries()
    assert len(samples) >= 16 and any(h.task != TARGET for h in samples)
    rows = [(h.task, h.code) for h in samples] + [(TARGET, c) for c in CONTROLS]
    (tmp_path / "forgeries.jsonl").write_text(
        "".join(json.dumps({"task_id": t, "solution": c}) + "\n" for t, c in rows))
    result = run_eval(tmp_path / "forgeries.jsonl", tmp_path / "run", backend, user_manifests(tmp_path / "p"),
                      executor=executor)
    assert result.returncode == 0, result.stderr[-3000:]
    verdicts = verdicts_by_code(tmp_path / "run")
    assert len(verdicts) == len(rows)
    assert [verdicts[c] for c in CONTROLS] == [("pass", None)] * len(CONTROLS)
    wrong = {}
    for h in samples:
        verdict, failure = verdicts[h.code]
        ok = verdict == "fail" and (h.expect != "tampering" or failure == "other/tampering")
        if not ok:
            wrong[h.name] = (verdict, failure, h.expect)
    assert not wrong, f"{backend}/{executor}: {wrong}"
