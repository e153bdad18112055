"""Samples of a task grouped by identical behaviour and scored (pure: executions in, a ranking out).

Behaviour. `--tests inputs`: what a sample did on each input, compared with plus/differential's rules
(outcome, value, the arguments after the call; floats within tolerance, time never). `--tests model`:
the set of generated tests it passed (CodeT's consensus set). `--tests both`: both must agree.
A cluster is built greedily in sample order: a sample joins the first cluster whose first member it agrees
with. Identical code (same hash) always shares a cluster.

Score = cluster size (samples, counting duplicates) × agreement, the agreement being the inputs the
cluster's behaviour ran without error (outcome `return`) with inputs, the generated tests it passed with
model (CodeT's dual agreement), their sum with both. A sample that did not run (does not parse, did not
import, the step did not run) is a cluster of its own code with agreement 0. A task without inputs or tests
has nothing to compare: clusters are identical code, all scored 0.

Ties, deterministically: the higher score, then the larger cluster, then the cluster holding the lowest
sample index; within a cluster, samples by index. So with nothing to tell samples apart, the most repeated
code wins, and then the first sample.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from coderun.plus.differential import disagreement
from coderun.rank.records import ExecStatus, Execution, RankedSample, RankTests, TaskRanking


@dataclass(frozen=True)
class Member:
    """A sample of the run, as ranking sees it: its index and code hash (never its verdict)."""

    index: int
    hash: str


@dataclass
class _Cluster:
    hashes: list[str]
    members: list[Member] = field(default_factory=list)
    agreement: int = 0

    @property
    def score(self) -> float:
        return float(len(self.members) * self.agreement)

    def key(self) -> tuple[float, int, int]:
        return (-self.score, -len(self.members), min(m.index for m in self.members))


def behaves_alike(a: Execution, b: Execution) -> bool:
    """Two executions that ran show the same behaviour (the same observation on every input, or the same
    generated tests passed)."""
    if a.status is not ExecStatus.RAN or b.status is not ExecStatus.RAN:
        return False
    if len(a.observations) != len(b.observations) or set(a.passed) != set(b.passed):
        return False
    return all(disagreement(x, y) is None for x, y in zip(a.observations, b.observations, strict=True))


def agreement(e: Execution | None) -> int:
    """Inputs run without error plus generated tests passed (0 for a sample that did not run)."""
    if e is None or e.status is not ExecStatus.RAN:
        return 0
    return sum(isinstance(o, dict) and o.get("outcome") == "return" for o in e.observations) + len(e.passed)


def rank_task(task_id: str, level: str, tests: RankTests, members: Sequence[Member],
              executions: dict[str, Execution], checks: int, method: str) -> TaskRanking:
    """The task's samples in rank order (see the module docstring). `executions` by code hash; a hash
    missing from it did not run."""
    clusters: list[_Cluster] = []
    by_hash: dict[str, _Cluster] = {}
    for m in sorted(members, key=lambda m: m.index):
        c = by_hash.get(m.hash) or _join(clusters, m.hash, executions, checks)
        c.members.append(m)
        by_hash[m.hash] = c
    clusters.sort(key=_Cluster.key)
    ranked = []
    for cid, c in enumerate(clusters):
        for m in sorted(c.members, key=lambda m: m.index):
            ranked.append(RankedSample(index=m.index, hash=m.hash, cluster=cid, cluster_size=len(c.members),
                                       agreement=c.agreement, score=c.score, rank=len(ranked) + 1))
    return TaskRanking(task_id=task_id, level=level, tests=tests, checks=checks, method=method, samples=ranked)


def _join(clusters: list[_Cluster], h: str, executions: dict[str, Execution], checks: int) -> _Cluster:
    """The cluster a new code joins (made when none agrees)."""
    e = executions.get(h)
    if checks and e is not None and e.status is ExecStatus.RAN:
        for c in clusters:
            first = executions.get(c.hashes[0])
            if first is not None and behaves_alike(first, e):
                c.hashes.append(h)
                return c
    c = _Cluster(hashes=[h], agreement=agreement(e) if checks else 0)
    clusters.append(c)
    return c
