"""Daily run evidence: one service's production day, as the gateway or the engine saw it.

One RunSummary per service, day and source. The gateway pushes what it saw
at the edge (`POST /api/services/{slug}/run-summaries/`); the scrape task
differences two scrapes of each backend's Prometheus endpoint
(`ledger.metrics_import`). Recording a day again replaces the row; the Event
says so (`ledger.services.record_run_summary`).

Rates are fractions (0 to 1), latencies milliseconds. A number the source
could not know (llama.cpp keeps no latency histograms; TGI no TTFT) is NULL,
never 0.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.utils.translation import gettext_lazy as _

from ledger.models.registry import Revision, Service
from lib.choices import ChoiceLabels

# The latency columns, as (metric, percentile) pairs: ttft_p50_ms … e2e_p99_ms.
LATENCY_METRICS = ("ttft", "tpot", "e2e")
PERCENTILES = ("p50", "p95", "p99")
LATENCY_FIELDS = tuple(f"{m}_{p}_ms" for m in LATENCY_METRICS for p in PERCENTILES)
RATE_FIELDS = (
    "rate_4xx",
    "rate_5xx",
    "refusal_rate",
    "structured_output_error_rate",
    "truncation_rate",
    "cache_hit_rate",
)
COUNT_FIELDS = ("rate_limit_hits", "timeouts", "retries", "returned_by_humans")
TOKEN_FIELDS = ("input_tokens", "output_tokens")
# What a caller may give, besides the day and the source (error_rate is computed).
RUN_SUMMARY_FIELDS = (
    "requests",
    *TOKEN_FIELDS,
    *LATENCY_FIELDS,
    "error_counts",
    *RATE_FIELDS,
    "degradations",
    *COUNT_FIELDS,
    "details",
)


def _fraction(name: str) -> Q:
    return Q(**{f"{name}__isnull": True}) | Q(**{f"{name}__gte": 0, f"{name}__lte": 1})


def _ordered(metric: str) -> list[models.CheckConstraint]:
    p50, p95, p99 = (f"{metric}_{p}_ms" for p in PERCENTILES)
    return [
        models.CheckConstraint(
            condition=Q(**{f"{p50}__isnull": True})
            | Q(**{f"{p95}__isnull": True})
            | Q(**{f"{p95}__gte": F(p50)}),
            name=f"ledger_runsummary_{metric}_p95_not_below_p50",
        ),
        models.CheckConstraint(
            condition=Q(**{f"{p95}__isnull": True})
            | Q(**{f"{p99}__isnull": True})
            | Q(**{f"{p99}__gte": F(p95)}),
            name=f"ledger_runsummary_{metric}_p99_not_below_p95",
        ),
    ]


class RunSummaryQuerySet(models.QuerySet):
    def with_context(self) -> RunSummaryQuerySet:
        return self.select_related("service", "revision", "recorded_by")


class RunSummary(ChoiceLabels, models.Model):
    class Source(models.TextChoices):
        GATEWAY = "gateway", _("Pushed by the gateway")
        SCRAPE = "scrape", _("Scraped from the engine's metrics")

    service = models.ForeignKey(Service, on_delete=models.PROTECT, related_name="run_summaries")
    date = models.DateField(help_text=_("The day (UTC) the numbers cover."))
    source = models.CharField(max_length=8, choices=Source.choices)
    revision = models.ForeignKey(
        Revision,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="run_summaries",
        help_text=_(
            "The revision that served: the live one when pushed, the backend's when scraped."
        ),
    )
    requests = models.PositiveBigIntegerField(
        null=True, blank=True, help_text=_("Requests that day (unknown for llama.cpp's metrics).")
    )
    input_tokens = models.PositiveBigIntegerField(
        null=True, blank=True, help_text=_("Prompt tokens that day.")
    )
    output_tokens = models.PositiveBigIntegerField(
        null=True, blank=True, help_text=_("Generated tokens that day.")
    )
    ttft_p50_ms = models.FloatField("p50 TTFT (ms)", null=True, blank=True)
    ttft_p95_ms = models.FloatField("p95 TTFT (ms)", null=True, blank=True)
    ttft_p99_ms = models.FloatField("p99 TTFT (ms)", null=True, blank=True)
    tpot_p50_ms = models.FloatField("p50 TPOT (ms)", null=True, blank=True)
    tpot_p95_ms = models.FloatField("p95 TPOT (ms)", null=True, blank=True)
    tpot_p99_ms = models.FloatField("p99 TPOT (ms)", null=True, blank=True)
    e2e_p50_ms = models.FloatField("p50 end-to-end (ms)", null=True, blank=True)
    e2e_p95_ms = models.FloatField("p95 end-to-end (ms)", null=True, blank=True)
    e2e_p99_ms = models.FloatField("p99 end-to-end (ms)", null=True, blank=True)
    error_counts = models.JSONField(
        default=dict, blank=True, help_text=_('Failed requests by error code, e.g. {"503": 12}.')
    )
    error_rate = models.FloatField(
        null=True, blank=True, help_text=_("Failed requests / requests (the error counts' sum).")
    )
    rate_4xx = models.FloatField("4xx rate", null=True, blank=True)
    rate_5xx = models.FloatField("5xx rate", null=True, blank=True)
    refusal_rate = models.FloatField(null=True, blank=True)
    structured_output_error_rate = models.FloatField(null=True, blank=True)
    truncation_rate = models.FloatField(
        null=True, blank=True, help_text=_("Finished because of the max length.")
    )
    cache_hit_rate = models.FloatField(null=True, blank=True)
    degradations = models.JSONField(
        default=dict,
        blank=True,
        help_text=_('Requests served degraded, by policy, e.g. {"shorter-context": 40}.'),
    )
    rate_limit_hits = models.PositiveBigIntegerField(null=True, blank=True)
    timeouts = models.PositiveBigIntegerField(null=True, blank=True)
    retries = models.PositiveBigIntegerField(null=True, blank=True)
    returned_by_humans = models.PositiveBigIntegerField(
        null=True, blank=True, help_text=_("Requests people sent back as wrong or unhelpful.")
    )
    details = models.JSONField(
        default=dict,
        blank=True,
        help_text=_("Scrapes: the engine, the window, metric names read, counter resets, tokens."),
    )
    recorded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    recorded_at = models.DateTimeField()

    objects = RunSummaryQuerySet.as_manager()

    class Meta:
        ordering = ["-date", "service_id", "source"]
        verbose_name_plural = "run summaries"
        constraints = [
            models.UniqueConstraint(
                fields=["service", "date", "source"], name="ledger_runsummary_one_per_day"
            ),
            models.CheckConstraint(
                condition=Q(source__in=["gateway", "scrape"]),
                name="ledger_runsummary_source_valid",
            ),
            models.CheckConstraint(
                condition=_fraction("error_rate"), name="ledger_runsummary_error_rate_fraction"
            ),
            *[
                models.CheckConstraint(
                    condition=_fraction(name), name=f"ledger_runsummary_{name}_fraction"
                )
                for name in RATE_FIELDS
            ],
            *[constraint for metric in LATENCY_METRICS for constraint in _ordered(metric)],
            *[
                models.CheckConstraint(
                    condition=Q(**{f"{name}__isnull": True}) | Q(**{f"{name}__gte": 0}),
                    name=f"ledger_runsummary_{name}_not_negative",
                )
                for name in LATENCY_FIELDS
            ],
        ]
        # The unique constraint's index (service, date, source) serves the trend
        # chart and the API's per-service date range.
        indexes = [
            # The API's list of every service, newest day first (its ordering).
            models.Index(fields=["-date", "service", "source"], name="ledger_runsummary_day_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.service} {self.date:%Y-%m-%d} ({self.source})"


# A breakdown row's counts (each also a total of the day, or derived from one).
BREAKDOWN_COUNT_FIELDS = (
    "requests",
    "input_tokens",
    "output_tokens",
    "errors_4xx",
    "errors_5xx",
    "rate_limit_hits",
    "timeouts",
    "retries",
    "truncations",
    "refusals",
    "structured_errors",
    "returned_by_humans",
)
BREAKDOWN_LATENCY_FIELDS = tuple(f"{m}_{p}_ms" for m in ("ttft", "tpot") for p in PERCENTILES)
# What the gateway writes when it could not tell a request's tenant or task type.
UNATTRIBUTED = "unattributed"


class RunBreakdown(models.Model):
    """One tenant's use of one task type on one backend, within a service's day.

    Bounded by construction: one row per (day's summary, tenant, task type, backend),
    counts and percentiles only, never a request. The summary's totals are the sums of
    its rows (`ledger.services.run_evidence` refuses a push where they are not).
    """

    summary = models.ForeignKey(RunSummary, on_delete=models.CASCADE, related_name="breakdown")
    tenant = models.CharField(
        max_length=80, help_text=_("One of the service's tenants, or “unattributed”.")
    )
    task_type = models.CharField(
        max_length=40, help_text=_("One of the service's task types, or “unattributed”.")
    )
    backend = models.CharField(
        max_length=120,
        blank=True,
        help_text=_("The backend that answered, as the gateway names it."),
    )
    requests = models.PositiveBigIntegerField(default=0)
    input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    errors_4xx = models.PositiveBigIntegerField(default=0)
    errors_5xx = models.PositiveBigIntegerField(default=0)
    error_counts = models.JSONField(default=dict, blank=True)
    rate_limit_hits = models.PositiveBigIntegerField(default=0)
    timeouts = models.PositiveBigIntegerField(default=0)
    retries = models.PositiveBigIntegerField(default=0)
    degradations = models.JSONField(default=dict, blank=True)
    truncations = models.PositiveBigIntegerField(default=0)
    refusals = models.PositiveBigIntegerField(default=0)
    structured_errors = models.PositiveBigIntegerField(default=0)
    returned_by_humans = models.PositiveBigIntegerField(default=0)
    ttft_p50_ms = models.FloatField("p50 TTFT (ms)", null=True, blank=True)
    ttft_p95_ms = models.FloatField("p95 TTFT (ms)", null=True, blank=True)
    ttft_p99_ms = models.FloatField("p99 TTFT (ms)", null=True, blank=True)
    tpot_p50_ms = models.FloatField("p50 TPOT (ms)", null=True, blank=True)
    tpot_p95_ms = models.FloatField("p95 TPOT (ms)", null=True, blank=True)
    tpot_p99_ms = models.FloatField("p99 TPOT (ms)", null=True, blank=True)

    class Meta:
        ordering = ["summary_id", "tenant", "task_type", "backend"]
        constraints = [
            models.UniqueConstraint(
                fields=["summary", "tenant", "task_type", "backend"],
                name="ledger_runbreakdown_one_per_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.summary} {self.tenant}/{self.task_type}/{self.backend or '-'}"

    @property
    def accepted_answers(self) -> int:
        """Requests that ended in an answer nobody sent back: the cost's denominator."""
        failed = self.errors_4xx + self.errors_5xx + self.refusals + self.returned_by_humans
        return max(self.requests - failed, 0)
