"""What ranking leaves: RUN/rank/ranking-TESTS.json (every task's samples in rank order), summary-TESTS.md
(the lift table) and ranked-TESTS.jsonl, a samples file in coderun's format (`coderun eval --samples` reads
it): one record per sample, each task's in rank order, with `score`, `cluster` and `rank` beside the code
and the sample's own metadata (its index in the run as `run_index`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from coderun.evaluation.store import RunSample
from coderun.rank.records import RankSummary, TaskRanking
from coderun.rank.summary import markdown

_RESERVED = ("task_id", "solution", "completion", "prompt", "score", "cluster", "rank", "run_index")


def write_folder(run_dir: Path, summary: RankSummary, rankings: Sequence[TaskRanking],
                 samples: dict[tuple[str, int], RunSample]) -> Path:
    folder = run_dir / "rank"
    folder.mkdir(parents=True, exist_ok=True)
    t = summary.tests.value
    data = {"summary": summary.model_dump(mode="json"), "tasks": [r.model_dump(mode="json") for r in rankings]}
    (folder / f"ranking-{t}.json").write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    (folder / f"summary-{t}.md").write_text(markdown(summary), encoding="utf-8")
    write_ranked(folder / f"ranked-{t}.jsonl", rankings, samples)
    return folder


def write_ranked(path: Path, rankings: Sequence[TaskRanking], samples: dict[tuple[str, int], RunSample]) -> None:
    lines = []
    for t in rankings:
        for s in t.samples:
            sample = samples[t.task_id, s.index]
            meta = {k: v for k, v in sample.metadata.items() if k not in _RESERVED}
            lines.append(json.dumps({"task_id": t.task_id, "solution": sample.code, **meta, "score": s.score,
                                     "cluster": s.cluster, "rank": s.rank, "run_index": s.index}))
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
