"""What happened between two scrapes: the increase of each counter and histogram series.

As Prometheus' `increase()` reads a counter: a value below the one before is
a reset (the engine restarted), and the increase is then the new value — what
was counted since the restart — never a negative amount of traffic. A series
absent before (created since) counts from 0; one absent after is gone and
counts nothing. A histogram series resets as a whole: when its count, or any
bucket, fell, or its buckets changed, the later scrape is the increase.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ledger.metrics_import.exposition import Labels
from ledger.metrics_import.histograms import Histogram


@dataclass
class Resets:
    """Series found reset between the scrapes, as `family{labels}` strings."""

    series: list[str] = field(default_factory=list)

    def note(self, family: str, labels: Labels) -> None:
        inside = ",".join(f'{k}="{v}"' for k, v in labels)
        name = f"{family}{{{inside}}}" if inside else family
        if name not in self.series:  # a counter read for two numbers resets once
            self.series.append(name)


def counter_increase(
    family: str,
    before: Mapping[Labels, float] | None,
    after: Mapping[Labels, float],
    resets: Resets,
) -> dict[Labels, float]:
    before = before or {}
    increase = {}
    for labels, value in after.items():
        previous = before.get(labels, 0.0)
        if value < previous:
            resets.note(family, labels)
            increase[labels] = value
        else:
            increase[labels] = value - previous
    return increase


def _histogram_reset(before: Histogram, after: Histogram) -> bool:
    if after.bounds != before.bounds or after.count < before.count:
        return True
    return any(a < b for (_, a), (_, b) in zip(after.buckets, before.buckets, strict=True))


def histogram_increase(
    family: str,
    before: Mapping[Labels, Histogram] | None,
    after: Mapping[Labels, Histogram],
    resets: Resets,
) -> dict[Labels, Histogram]:
    before = before or {}
    increase = {}
    for labels, later in after.items():
        earlier = before.get(labels)
        if earlier is None:
            increase[labels] = later
        elif _histogram_reset(earlier, later):
            resets.note(family, labels)
            increase[labels] = later
        else:
            increase[labels] = Histogram(
                tuple(
                    (le, a - b)
                    for (le, a), (_, b) in zip(later.buckets, earlier.buckets, strict=True)
                ),
                later.count - earlier.count,
                later.sum - earlier.sum,
            )
    return increase


def merge_histograms(series: Iterable[Histogram]) -> Histogram | None:
    """One histogram of several series with the same buckets (model names, engine ranks,
    backends); None when there are none. Series of other buckets than the first are
    left out: their cumulative counts cannot be added bound by bound."""
    merged: Histogram | None = None
    for histogram in series:
        if merged is None:
            merged = histogram
        elif histogram.bounds == merged.bounds:
            merged = Histogram(
                tuple(
                    (le, a + b)
                    for (le, a), (_, b) in zip(merged.buckets, histogram.buckets, strict=True)
                ),
                merged.count + histogram.count,
                merged.sum + histogram.sum,
            )
    return merged
