"""A service's day by tenant, task type and backend, from two scrapes of the gateway's
``/metrics`` (LiteLLM's Prometheus callback, which the rendered config turns on with
``GATEWAY_PROMETHEUS_METRICS``).

Pure: two ``Scrape`` values (``ledger.metrics_import.parse_exposition``) and what the
ledger knows of the service in; ``record_run_summary``'s keyword arguments out, with
the ``breakdown`` rows the totals are the sums of. Counters and histogram buckets are
differenced series by series with ``ledger.metrics_import``'s ``increase()`` (a counter
below its earlier value is a reset: the proxy restarted), so nothing here parses text.

Every name below was read in LiteLLM 1.108.7 (``requirements-gateway.txt``), in
``litellm/integrations/prometheus.py`` and ``litellm/types/integrations/prometheus.py``
(``PrometheusMetricLabels``):

- ``litellm_proxy_total_requests_metric`` (a counter, ``_total`` on the wire): every
  request the proxy answered, once. A success is counted in
  ``async_log_success_event`` with ``status_code="200"``; a failure in
  ``async_post_call_failure_hook`` with its status (``429`` when a limit refused it,
  ``408`` for LiteLLM's ``Timeout``). Labels: ``team``, ``team_alias``,
  ``requested_model`` (the model group: the service's slug), ``status_code``,
  ``model_id`` (the deployment, ``model_info.id``), and the caller's metadata labels.
- ``litellm_input_tokens_metric`` / ``litellm_output_tokens_metric`` (counters): tokens
  of successful requests, with the same identity labels.
- ``litellm_llm_api_time_to_first_token_metric`` (histogram, seconds): streaming
  requests only. ``litellm_request_total_latency_metric`` (histogram, seconds): the
  whole request at the proxy. Neither has a time-per-output-token; LiteLLM's
  ``litellm_deployment_latency_per_output_token`` divides the whole latency (first token
  included) by the tokens, which is not TPOT, so TPOT stays unknown.
- ``custom_prometheus_metadata_labels: [metadata.ledger_tenant, metadata.ledger_task_type]``
  in ``litellm_settings`` adds the labels ``metadata_ledger_tenant`` and
  ``metadata_ledger_task_type`` to every metric, read from the request's ``metadata``
  (``get_custom_labels_from_metadata``): no database needed. The failure hook does not
  read them (it builds its labels without ``custom_metadata_labels``), so a failed
  request's task type is never known to the metrics, and its tenant only by its team.
- A label LiteLLM had no value for is written ``None`` (``prometheus_client`` writes
  ``str(None)``), or is empty.

Attribution: the tenant is the team's (``team`` = ``<slug>--<tenant>``, as
``team_requests`` creates it, or ``team_alias`` = ``<slug>/<tenant>``), else the
``metadata_ledger_tenant`` label; the task type the ``metadata_ledger_task_type`` label.
A value that is not one of the service's own, or none at all, is ``unattributed``
(counted, never dropped); ``details["unattributed"]`` names the values seen. The
backend is the ledger's name of the deployment ``model_id`` names; a request refused
before a deployment was picked has none (``""``); a deployment the ledger does not know
keeps its ``model_id``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ledger.metrics_import import Histogram, Scrape, histogram_quantile
from ledger.metrics_import.deltas import (
    Resets,
    counter_increase,
    histogram_increase,
    merge_histograms,
)
from ledger.metrics_import.exposition import Labels
from ledger.models.run_evidence import UNATTRIBUTED
from releases.gateway.litellm import team_id

TOTAL_REQUESTS = "litellm_proxy_total_requests_metric"
INPUT_TOKENS = "litellm_input_tokens_metric"
OUTPUT_TOKENS = "litellm_output_tokens_metric"
TTFT = "litellm_llm_api_time_to_first_token_metric"
TOTAL_LATENCY = "litellm_request_total_latency_metric"
# The labels custom_prometheus_metadata_labels makes of the caller's metadata.
TENANT_LABEL = "metadata_ledger_tenant"
TASK_TYPE_LABEL = "metadata_ledger_task_type"
# What a label holds when LiteLLM had no value for it.
_NOT_TOLD = frozenset({"", "None"})
_RATE_LIMITED = "429"
_TIMED_OUT = "408"  # litellm.exceptions.Timeout
QUANTILES = {"p50": 0.5, "p95": 0.95, "p99": 0.99}
# How many unknown names details["unattributed"] keeps per label: a bounded record.
_MAX_NAMED = 20
_MAX_BACKEND_LENGTH = 120

RowKey = tuple[str, str, str]


@dataclass(frozen=True)
class ServiceNames:
    """What the ledger knows of the service: its slug, tenants and task types, and its
    backends' names by the ``model_info.id`` the rendered config gives them."""

    slug: str
    tenants: frozenset[str]
    task_types: frozenset[str]
    backends: Mapping[str, str] = field(default_factory=dict)


@dataclass
class GatewayDay:
    """``fields`` are record_run_summary's keyword arguments (breakdown and details among
    them)."""

    fields: dict[str, Any]

    @property
    def breakdown(self) -> list[dict[str, Any]]:
        return self.fields["breakdown"]

    @property
    def details(self) -> dict[str, Any]:
        return self.fields["details"]


def _told(value: str | None) -> str | None:
    return None if value is None or value.strip() in _NOT_TOLD else value.strip()


class _Attributor:
    def __init__(self, names: ServiceNames) -> None:
        self.names = names
        self.unknown: dict[str, set[str]] = defaultdict(set)

    def _note(self, what: str, value: str) -> None:
        if len(self.unknown[what]) < _MAX_NAMED:
            self.unknown[what].add(value[:_MAX_BACKEND_LENGTH])

    def tenant(self, labels: Mapping[str, str]) -> str:
        slug = self.names.slug
        team = _told(labels.get("team"))
        alias = _told(labels.get("team_alias"))
        for value, prefix in ((team, team_id(slug, "")), (alias, f"{slug}/")):
            if value is not None and value.startswith(prefix):
                tenant = value.removeprefix(prefix)
                if tenant in self.names.tenants:
                    return tenant
        claimed = _told(labels.get(TENANT_LABEL))
        if claimed in self.names.tenants:
            return claimed
        for value in (team, claimed):
            if value is not None:
                self._note("tenant", value)
        return UNATTRIBUTED

    def task_type(self, labels: Mapping[str, str]) -> str:
        claimed = _told(labels.get(TASK_TYPE_LABEL))
        if claimed in self.names.task_types:
            return claimed
        if claimed is not None:
            self._note("task_type", claimed)
        return UNATTRIBUTED

    def backend(self, labels: Mapping[str, str]) -> str:
        model_id = _told(labels.get("model_id"))
        if model_id is None:
            return ""
        name = self.names.backends.get(model_id)
        if name is None:
            self._note("backend", model_id)
            return model_id[:_MAX_BACKEND_LENGTH]
        return name

    def key(self, labels: Mapping[str, str]) -> RowKey:
        return (self.tenant(labels), self.task_type(labels), self.backend(labels))


class _Reader:
    def __init__(self, before: Scrape, after: Scrape, names: ServiceNames) -> None:
        self.before, self.after = before, after
        self.slug = names.slug
        self.attribute = _Attributor(names)
        self.resets = Resets()
        self.read: list[str] = []
        self.missing: list[str] = []

    def _ours(self, labels: Labels) -> bool:
        return dict(labels).get("requested_model") == self.slug

    def counter(self, name: str) -> list[tuple[dict[str, str], float]] | None:
        """The service's series of counter `name` with their increase; None when the later
        scrape does not have the metric."""
        if name not in self.after.counters:
            self.missing.append(name)
            return None
        self.read.append(name)
        increase = counter_increase(
            name, self.before.counters.get(name), self.after.counters[name], self.resets
        )
        return [(dict(labels), value) for labels, value in increase.items() if self._ours(labels)]

    def histograms(self, name: str) -> list[tuple[dict[str, str], Histogram]] | None:
        if name not in self.after.histograms:
            self.missing.append(name)
            return None
        self.read.append(name)
        increase = histogram_increase(
            name, self.before.histograms.get(name), self.after.histograms[name], self.resets
        )
        return [(dict(labels), value) for labels, value in increase.items() if self._ours(labels)]


def _ms(histogram: Histogram | None, q: float) -> float | None:
    if histogram is None:
        return None
    seconds = histogram_quantile(q, histogram.buckets)
    return None if seconds is None or math.isinf(seconds) else round(seconds * 1000, 3)


def _percentiles(metric: str, histogram: Histogram | None) -> dict[str, float | None]:
    return {f"{metric}_{p}_ms": _ms(histogram, q) for p, q in QUANTILES.items()}


def _row(key: RowKey) -> dict[str, Any]:
    tenant, task_type, backend = key
    return {
        "tenant": tenant,
        "task_type": task_type,
        "backend": backend,
        "requests": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "error_counts": {},
        "rate_limit_hits": 0,
        "timeouts": 0,
    }


def _merged(series: Iterable[Histogram]) -> Histogram | None:
    merged = merge_histograms(series)
    return merged if merged is not None and merged.count > 0 else None


def read_gateway_day(before: Scrape, after: Scrape, names: ServiceNames) -> GatewayDay:
    """The service's increase from `before` to `after`: one breakdown row per tenant,
    task type and backend that saw a request or a token, and the day's totals as their
    sums (latency percentiles from the merged histograms)."""
    read = _Reader(before, after, names)
    key_of = read.attribute.key
    rows: dict[RowKey, dict[str, Any]] = {}
    # Where counts are split across series (status codes, models, keys), they are summed
    # as floats and rounded once, so that a row's parts add up to its whole.
    counts: dict[RowKey, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    errors: dict[RowKey, dict[str, float]] = defaultdict(lambda: defaultdict(float))

    for labels, value in read.counter(TOTAL_REQUESTS) or []:
        key = key_of(labels)
        counts[key]["requests"] += value
        status = _told(labels.get("status_code")) or ""
        if len(status) == 3 and status[0] in "45":
            errors[key][status] += value
    tokens_known = {}
    for field_name, metric in (("input_tokens", INPUT_TOKENS), ("output_tokens", OUTPUT_TOKENS)):
        series = read.counter(metric)
        tokens_known[field_name] = series is not None
        for labels, value in series or []:
            counts[key_of(labels)][field_name] += value

    ttft: dict[RowKey, list[Histogram]] = defaultdict(list)
    for labels, histogram in read.histograms(TTFT) or []:
        ttft[key_of(labels)].append(histogram)
    total_latency = [histogram for _, histogram in read.histograms(TOTAL_LATENCY) or []]

    for key in sorted(set(counts) | set(errors)):
        row = _row(key)
        for name, value in counts[key].items():
            row[name] = round(value)
        row["error_counts"] = {
            status: round(count) for status, count in sorted(errors[key].items()) if round(count)
        }
        row["errors_4xx"] = sum(c for s, c in row["error_counts"].items() if s.startswith("4"))
        row["errors_5xx"] = sum(c for s, c in row["error_counts"].items() if s.startswith("5"))
        row["rate_limit_hits"] = row["error_counts"].get(_RATE_LIMITED, 0)
        row["timeouts"] = row["error_counts"].get(_TIMED_OUT, 0)
        if not (row["requests"] or row["input_tokens"] or row["output_tokens"]):
            continue  # a series that did not move in the window: nothing happened there
        row["latency"] = {
            name: value
            for name, value in _percentiles("ttft", _merged(ttft.get(key, []))).items()
            if value is not None
        }
        rows[key] = row

    breakdown = list(rows.values())
    requests = sum(row["requests"] for row in breakdown)
    error_counts: dict[str, int] = defaultdict(int)
    for row in breakdown:
        for status, count in row["error_counts"].items():
            error_counts[status] += count
    fields: dict[str, Any] = {
        "requests": requests,
        "error_counts": dict(sorted(error_counts.items())),
        "rate_limit_hits": sum(row["rate_limit_hits"] for row in breakdown),
        "timeouts": sum(row["timeouts"] for row in breakdown),
        "rate_4xx": _ratio(sum(row["errors_4xx"] for row in breakdown), requests),
        "rate_5xx": _ratio(sum(row["errors_5xx"] for row in breakdown), requests),
    }
    for name, known in tokens_known.items():
        fields[name] = sum(row[name] for row in breakdown) if known else None
    fields |= _percentiles("ttft", _merged(h for series in ttft.values() for h in series))
    fields |= _percentiles("e2e", _merged(total_latency))
    fields["details"] = {
        "from": "gateway_metrics",
        "metrics": read.read,
        "counter_resets": read.resets.series,
        "missing": read.missing,
        "unattributed": {
            what: sorted(values) for what, values in sorted(read.attribute.unknown.items())
        },
    }
    fields["breakdown"] = breakdown
    return GatewayDay(fields)


def _ratio(part: int, whole: int) -> float | None:
    return round(part / whole, 6) if whole else None


def by_service(scrape: Scrape) -> dict[str, Scrape]:
    """The series read here, split by ``requested_model`` (the service's slug) in one pass:
    a gateway of many services, and of many series (``client_ip`` and ``user_agent`` are
    labels), is split once rather than read whole for each service. Each part holds every
    family the scrape holds (empty when the service has no series of it), so a metric the
    gateway exposes is never taken for one it does not."""
    parts: dict[str, Scrape] = {}

    def part(labels: Labels) -> Scrape | None:
        slug = _told(dict(labels).get("requested_model"))
        if slug is None:
            return None
        if slug not in parts:
            parts[slug] = Scrape(scrape.source)
        return parts[slug]

    for name in (TOTAL_REQUESTS, INPUT_TOKENS, OUTPUT_TOKENS):
        for labels, value in scrape.counters.get(name, {}).items():
            if (found := part(labels)) is not None:
                found.counters.setdefault(name, {})[labels] = value
    for name in (TTFT, TOTAL_LATENCY):
        for labels, histogram in scrape.histograms.get(name, {}).items():
            if (found := part(labels)) is not None:
                found.histograms.setdefault(name, {})[labels] = histogram
    for found in parts.values():
        for name in (TOTAL_REQUESTS, INPUT_TOKENS, OUTPUT_TOKENS):
            if name in scrape.counters:
                found.counters.setdefault(name, {})
        for name in (TTFT, TOTAL_LATENCY):
            if name in scrape.histograms:
                found.histograms.setdefault(name, {})
    return parts
