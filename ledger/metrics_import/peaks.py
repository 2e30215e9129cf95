"""A load test's peaks, GPU memory and KV-cache use, from two scrapes taken around it.

`deltas` takes the increase of counters and histograms between two scrapes; a
gauge has no increase, it says only what it was at each instant. A day's summary
reads a gauge from the later scrape (`summary._Reader.gauge`: where the day
ended). A peak reads both: the highest value either scrape holds, over every
series (each GPU, each engine rank). That is only a lower bound on the peak
between the scrapes. Neither vLLM, SGLang nor DCGM exposes a running maximum, and
KV-cache use falls back as soon as requests finish, so a scrape after the test
often sees little of it. A tool that samples GPU telemetry during the test (AIPerf
polls DCGM) gives a closer figure, and its own wins where the file has one.

GPU memory is the most used by any one GPU, which is what runs out, in GiB
(DCGM's `DCGM_FI_DEV_FB_USED` is MiB). KV-cache use is a percentage; the engines'
gauges are fractions (vLLM: "KV-cache usage. 1 means 100 percent usage."), their
names listed in `engines` (`EngineMetrics.kv_cache_usage`, newest name first).
"""

from __future__ import annotations

import math
from typing import Literal, TypedDict

from ledger.metrics_import.engines import ENGINES
from ledger.metrics_import.exposition import Labels, Scrape

# The largest scrape read: an engine's /metrics is tens of kilobytes; replay's
# probe reads at most as much (replay.services.metrics.MAX_METRICS_BYTES).
MAX_SCRAPE_BYTES = 8 * 1024 * 1024

GPU_MEMORY_METRIC = "DCGM_FI_DEV_FB_USED"  # MiB, one series per GPU
KV_CACHE_METRICS: tuple[str, ...] = tuple(
    dict.fromkeys(name for engine in ENGINES.values() for name in engine.kv_cache_usage)
)
_MIB_PER_GIB = 1024


class PeakJSON(TypedDict):
    """One peak as `LoadTestReport.results["peaks"]` keeps it, keyed by the report column."""

    value: float
    source: Literal["tool", "scrape"]
    metric: str  # what it was read from
    # True: the higher of two instants (scrapes), not a maximum over the test.
    lower_bound: bool


Peaks = dict[str, PeakJSON]


class PeakError(ValueError):
    """A scrape holds a value no peak can be read from; `scrape` is "before" or "after"."""

    def __init__(self, scrape: str, message: str) -> None:
        self.scrape = scrape
        super().__init__(message)


def _series(name: str, labels: Labels) -> str:
    inside = ",".join(f'{k}="{v}"' for k, v in labels)
    return f"{name}{{{inside}}}" if inside else name


def _highest(
    name: str, before: Scrape, after: Scrape, *, low: float, high: float, expected: str
) -> float | None:
    """The highest value of gauge `name` in either scrape; PeakError when a value is
    not a number between `low` and `high` (naming the scrape, the series and the value)."""
    highest: float | None = None
    for which, scrape in (("before", before), ("after", after)):
        for labels, value in scrape.gauges.get(name, {}).items():
            if math.isnan(value) or not low <= value <= high:
                raise PeakError(
                    which,
                    f"{scrape.source}: {_series(name, labels)} is {value!r}; expected {expected}",
                )
            highest = value if highest is None else max(highest, value)
    return highest


def scrape_peaks(before: Scrape, after: Scrape) -> Peaks:
    """The peaks two scrapes show, keyed by the report column; a figure neither
    scrape holds is left out. PeakError when a value cannot be one."""
    peaks: Peaks = {}
    memory = _highest(
        GPU_MEMORY_METRIC,
        before,
        after,
        low=0,
        high=math.inf,
        expected="MiB used, a number of at least 0",
    )
    if memory is not None:
        peaks["gpu_memory_peak_gib"] = {
            "value": round(memory / _MIB_PER_GIB, 3),
            "source": "scrape",
            "metric": GPU_MEMORY_METRIC,
            "lower_bound": True,
        }
    for name in KV_CACHE_METRICS:
        usage = _highest(
            name,
            before,
            after,
            low=0,
            high=1,
            expected="a fraction from 0 to 1 (1 means 100 percent usage)",
        )
        if usage is not None:
            peaks["kv_cache_peak_pct"] = {
                "value": round(usage * 100, 3),
                "source": "scrape",
                "metric": name,
                "lower_bound": True,
            }
            break
    return peaks


def expected_metrics() -> str:
    """The gauges a peak is read from, for a message saying none was found."""
    return ", ".join((GPU_MEMORY_METRIC, *KV_CACHE_METRICS))
