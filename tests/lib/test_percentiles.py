"""numpy's linear interpolation, worked by hand on five values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lib.percentiles import Percentiles, percentiles


def test_percentiles_interpolate_linearly_between_the_nearest_ranks():
    # Sorted: 10 20 30 40 80. The q-th percentile sits at rank q/100 * (5 - 1):
    # p50 at 2 is 30; p90 at 3.6 is 40 + 0.6 * (80 - 40) = 64; p95 at 3.8 is
    # 40 + 0.8 * 40 = 72; p99 at 3.96 is 40 + 0.96 * 40 = 78.4.
    values = np.array([40.0, 10.0, 20.0, 30.0, 80.0])

    assert percentiles(values) == Percentiles(p50=30.0, p90=64.0, p95=72.0, p99=78.4)


def test_percentiles_are_plain_floats():
    p = percentiles(np.array([1.0, 2.0]))

    assert all(type(v) is float for v in p)


def test_percentiles_are_computed_in_the_values_unit_then_scaled():
    seconds = np.array([0.04, 0.01, 0.02, 0.03, 0.08])

    p = percentiles(seconds, scale=1000.0)

    assert (p.p50, p.p90, p.p95) == (30.0, 64.0, 72.0)
    # p99 is 0.0784 s, and 0.0784 * 1000 is one bit under 78.4 in floating point.
    # Scaling the values to ms first would give 78.4: not what vLLM, which computes
    # in seconds and then multiplies, writes in its file.
    assert p.p99 == 0.0784 * 1000 == 78.39999999999999
    assert percentiles(seconds * 1000.0).p99 == 78.4


def test_one_value_is_every_percentile():
    assert percentiles(np.array([7.0])) == Percentiles(7.0, 7.0, 7.0, 7.0)


def test_a_nan_makes_every_percentile_nan_so_callers_drop_them_first():
    p = percentiles(np.array([10.0, math.nan, 30.0]))

    assert all(math.isnan(v) for v in p)


def test_no_values_is_refused_by_numpy():
    with pytest.raises(IndexError):
        percentiles(np.empty(0))
