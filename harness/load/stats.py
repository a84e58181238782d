"""Statistics with numpy's definitions (what ``vllm bench serve`` uses), in the stdlib:
``percentile`` interpolates linearly between closest ranks (numpy's default), ``std`` is the
population standard deviation (``np.std``). An empty sample gives 0.0, as in vLLM's
``np.mean(x or 0)``."""

from __future__ import annotations

import math
from collections.abc import Sequence


def mean(xs: Sequence[float]) -> float:
    return math.fsum(xs) / len(xs) if xs else 0.0


def std(xs: Sequence[float]) -> float:
    if not xs:
        return 0.0
    m = mean(xs)
    return math.sqrt(math.fsum((x - m) ** 2 for x in xs) / len(xs))


def percentile_sorted(s: Sequence[float], q: float) -> float:
    """``q`` in [0, 100] of an already sorted sample."""
    if not s:
        return 0.0
    rank = (len(s) - 1) * q / 100.0
    lo = math.floor(rank)
    hi = min(lo + 1, len(s) - 1)
    frac = rank - lo
    return s[lo] + (s[hi] - s[lo]) * frac if frac else float(s[lo])


def percentile(xs: Sequence[float], q: float) -> float:
    return percentile_sorted(sorted(xs), q)


def median(xs: Sequence[float]) -> float:
    return percentile(xs, 50.0)
