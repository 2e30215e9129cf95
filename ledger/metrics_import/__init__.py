"""Run evidence from an engine's Prometheus endpoint: two scrapes in, one day's numbers out.

`parse_exposition` reads the text format with prometheus_client's parser (never
a regex) and says which file and line it could not read; `deltas` takes the
increase of counters and histogram buckets between two scrapes, a counter
reset included; `histograms.histogram_quantile` is PromQL's; `engines` knows
each engine's metric names, renamed ones included; `summary.summarize` puts
it together into the fields of a RunSummary. `peaks.scrape_peaks` reads a load
test's GPU memory and KV-cache peaks from the gauges of two scrapes around it.
"""

from ledger.metrics_import.engines import ENGINES, EngineMetrics, engine_for
from ledger.metrics_import.exposition import ExpositionError, Scrape, parse_exposition
from ledger.metrics_import.histograms import Histogram, histogram_quantile
from ledger.metrics_import.peaks import MAX_SCRAPE_BYTES, PeakError, PeakJSON, Peaks, scrape_peaks
from ledger.metrics_import.summary import ScrapeSummary, summarize

__all__ = [
    "ENGINES",
    "MAX_SCRAPE_BYTES",
    "EngineMetrics",
    "ExpositionError",
    "Histogram",
    "PeakError",
    "PeakJSON",
    "Peaks",
    "Scrape",
    "ScrapeSummary",
    "engine_for",
    "histogram_quantile",
    "parse_exposition",
    "scrape_peaks",
    "summarize",
]
