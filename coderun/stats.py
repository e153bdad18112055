"""The estimators reports and rankings share: pure Python, importing nothing of coderun.

pass@k of one task
    The unbiased estimator of Chen et al. (HumanEval), 1 - C(n-c, k) / C(n, k), computed as the product
    1 - prod_{i=n-c+1..n} (1 - k/i), which never forms a binomial coefficient and so neither overflows nor
    loses precision for large n. Aggregating it over tasks (and the policies for tasks with fewer than k
    samples) is `report.metrics`'.

Paired statistics over tasks
    For comparing two runs on the same tasks (ablations), or a ranked pick with the run (`coderun rank`'s
    lift). Both take two equally long vectors of per-task scores (e.g. pass@k of each task under run A and
    run B, from `report.metrics.per_task_pass_at_k`), paired by task. Seeded: the same input gives the same
    interval.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one task: n samples, c of them correct (requires 1 <= k <= n)."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got n={n}, c={c}")
    if n < k:
        raise ValueError(f"pass@{k} is undefined for {n} samples; choose an UnderK policy")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def _check(a: Sequence[float], b: Sequence[float]) -> None:
    if len(a) != len(b):
        raise ValueError(f"paired vectors differ in length: {len(a)} and {len(b)}")
    if not a:
        raise ValueError("no paired tasks to compare")


def paired_bootstrap(a: Sequence[float], b: Sequence[float], iters: int = 10000, seed: int = 0,
                     confidence: float = 0.95) -> tuple[float, float, float]:
    """(mean(b) - mean(a), lower, upper): percentile bootstrap over tasks, resampling pairs."""
    _check(a, b)
    diffs = [y - x for x, y in zip(a, b, strict=True)]
    n = len(diffs)
    delta = sum(diffs) / n
    rng = random.Random(seed)
    means = sorted(sum(rng.choices(diffs, k=n)) / n for _ in range(iters))
    tail = (1.0 - confidence) / 2
    lo = means[min(iters - 1, int(tail * iters))]
    hi = means[min(iters - 1, int((1.0 - tail) * iters))]
    return delta, lo, hi


def paired_permutation_test(a: Sequence[float], b: Sequence[float], iters: int = 10000, seed: int = 0) -> float:
    """Two-sided p-value of 'no difference' by random sign flips of the paired differences.

    Exact (all 2^n sign patterns) when there are at most 16 non-zero differences; otherwise Monte Carlo
    with the usual +1 correction, so a p-value is never 0.
    """
    _check(a, b)
    diffs = [y - x for x, y in zip(a, b, strict=True) if y != x]
    if not diffs:
        return 1.0
    observed = abs(sum(diffs)) - 1e-12
    if len(diffs) <= 16:
        total = 1 << len(diffs)
        hits = sum(1 for mask in range(total)
                   if abs(sum(d if mask >> i & 1 else -d for i, d in enumerate(diffs))) >= observed)
        return hits / total
    rng = random.Random(seed)
    hits = sum(1 for _ in range(iters) if abs(sum(d if rng.random() < 0.5 else -d for d in diffs)) >= observed)
    return (hits + 1) / (iters + 1)
