"""Reading Prometheus exposition text (format 0.0.4) with prometheus_client's parser.

A scrape becomes counters, gauges and histograms, each a map from a series'
labels to its value. Counter families are named as the parser names them,
without `_total` (`vllm:request_success`, `tgi_request_count`); `_created`
samples are dropped. Text the parser refuses raises ExpositionError naming the
file and the line.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from ledger.metrics_import.histograms import Histogram

Labels = tuple[tuple[str, str], ...]


class ExpositionError(ValueError):
    """The text is not Prometheus exposition format; says where."""

    def __init__(self, source: str, line: int | None, message: str) -> None:
        self.source = source
        self.line = line
        self.message = message
        where = f"{source}, line {line}" if line is not None else source
        super().__init__(f"{where}: {message}")


@dataclass
class Scrape:
    source: str
    counters: dict[str, dict[Labels, float]] = field(default_factory=dict)
    gauges: dict[str, dict[Labels, float]] = field(default_factory=dict)
    histograms: dict[str, dict[Labels, Histogram]] = field(default_factory=dict)

    def families(self) -> set[str]:
        return {*self.counters, *self.gauges, *self.histograms}


def labels_of(labels: dict[str, str], *, drop: str | None = None) -> Labels:
    return tuple(sorted((k, v) for k, v in labels.items() if k != drop))


def _locate(text: str, source: str, error: Exception) -> ExpositionError:
    """Which line the parser refuses: each line parsed alone (a sample line needs no
    TYPE line before it), the first one refused named."""
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            list(text_string_to_metric_families(line + "\n"))
        except Exception as line_error:
            shown = line if len(line) <= 120 else line[:117] + "..."
            return ExpositionError(source, number, f"{line_error} in {shown!r}")
    return ExpositionError(source, None, f"not Prometheus exposition text: {error}")


def _histogram(samples: list, family: str, source: str) -> dict[Labels, Histogram]:
    buckets: dict[Labels, list[tuple[float, float]]] = defaultdict(list)
    counts: dict[Labels, float] = {}
    sums: dict[Labels, float] = {}
    for sample in samples:
        if sample.name == f"{family}_bucket":
            try:
                le = float(sample.labels["le"])
            except (KeyError, ValueError):
                raise ExpositionError(
                    source, None, f"{family}_bucket has a bucket without a numeric le label"
                ) from None
            buckets[labels_of(sample.labels, drop="le")].append((le, sample.value))
        elif sample.name == f"{family}_count":
            counts[labels_of(sample.labels)] = sample.value
        elif sample.name == f"{family}_sum":
            sums[labels_of(sample.labels)] = sample.value
    series = {}
    for labels, found in buckets.items():
        ordered = tuple(sorted(found))
        count = counts.get(labels, ordered[-1][1] if math.isinf(ordered[-1][0]) else math.nan)
        series[labels] = Histogram(ordered, count, sums.get(labels, math.nan))
    return series


def parse_exposition(text: str, *, source: str = "metrics") -> Scrape:
    """The scrape's counters, gauges and histograms; ExpositionError naming `source`
    and the line when the text cannot be read."""
    scrape = Scrape(source)
    try:
        families = list(text_string_to_metric_families(text))
    except Exception as error:
        raise _locate(text, source, error) from None
    for family in families:
        if family.type == "counter":
            values = scrape.counters.setdefault(family.name, {})
            for sample in family.samples:
                if not sample.name.endswith("_created"):
                    values[labels_of(sample.labels)] = sample.value
        elif family.type == "histogram":
            scrape.histograms[family.name] = _histogram(family.samples, family.name, source)
        elif family.type in ("gauge", "unknown", "untyped"):
            for sample in family.samples:
                scrape.gauges.setdefault(sample.name, {})[labels_of(sample.labels)] = sample.value
    return scrape
