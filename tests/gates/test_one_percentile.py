"""One percentile: the gate engine's is the load generator's (numpy's linear interpolation), and a
gate never takes the percentile of nothing."""

from __future__ import annotations

import numpy as np
import pytest

from harness.gates import stats as gate_stats
from harness.load import stats as load_stats


def test_gates_use_the_load_percentile() -> None:
    assert gate_stats._percentile_sorted is load_stats.percentile_sorted
    xs = [5.0, 1.0, 9.5, 3.25, 7.0, 2.0]
    for q in (0, 1, 25, 50, 90, 99, 100):
        assert gate_stats.percentile(xs, q) == pytest.approx(float(np.percentile(xs, q)))
        assert load_stats.percentile(xs, q) == gate_stats.percentile(xs, q)


def test_a_gate_refuses_the_percentile_of_no_samples() -> None:
    with pytest.raises(gate_stats.SampleSpecError):
        gate_stats.percentile([], 50)
