"""Reading a Prometheus scrape in tests, with prometheus_client's own parser."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families


def sample_value(text: str, name: str, **labels: str) -> float:
    """The value of the sample `name` whose labels include `labels`; 0 when none has them.

    Counters are read by their sample name (`ledger_http_requests_total`).
    """
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


def family_names(text: str) -> set[str]:
    return {family.name for family in text_string_to_metric_families(text)}
