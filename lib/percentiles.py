"""Percentiles as the load-test tools compute them.

numpy's default method, linear interpolation between the two nearest ranks,
is the one vLLM, SGLang, AIPerf, GenAI-Perf and inference-perf use: computed
here from a file's per-request data, a percentile reproduces the tool's own,
and a replay's p95 means what a load-test report's p95 means.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

PERCENTILES = (50, 90, 95, 99)


class Percentiles(NamedTuple):
    p50: float
    p90: float
    p95: float
    p99: float


def percentiles(values: np.ndarray, scale: float = 1.0) -> Percentiles:
    """p50, p90, p95 and p99 of `values`, each then multiplied by `scale`.

    Computed in the values' own unit and only then scaled, as vLLM does
    (`np.percentile(ttfts, 99) * 1000`): scaling the values first can change
    the last bit. `values` must not be empty (numpy raises IndexError) and
    should hold no NaN: numpy makes every percentile NaN then, so callers that
    have NaN for "no number" drop them first.
    """
    p50, p90, p95, p99 = (float(p * scale) for p in np.percentile(values, PERCENTILES))
    return Percentiles(p50, p90, p95, p99)
