"""Shapes of daily run evidence over REST: what the gateway posts, what readers get."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from ledger.models import RunBreakdown, RunSummary
from ledger.models.run_evidence import (
    BREAKDOWN_COUNT_FIELDS,
    BREAKDOWN_LATENCY_FIELDS,
    COUNT_FIELDS,
    LATENCY_FIELDS,
    RATE_FIELDS,
    TOKEN_FIELDS,
    UNATTRIBUTED,
)
from ledger.services.run_evidence import MAX_COUNT

if TYPE_CHECKING:
    from django.contrib.auth.models import User

_RATE_HELP = "A fraction from 0 to 1 (0.02 is 2 %)."


def _latency(name: str) -> serializers.FloatField:
    metric, percentile, _ = name.split("_")
    return serializers.FloatField(
        required=False,
        allow_null=True,
        help_text=f"{percentile} {metric.upper()} in ms; p50 ≤ p95 ≤ p99.",
    )


def _count(help_text: str) -> serializers.IntegerField:
    return serializers.IntegerField(
        required=False, allow_null=True, min_value=0, max_value=MAX_COUNT, help_text=help_text
    )


def _counts_by_key(help_text: str) -> serializers.DictField:
    return serializers.DictField(
        child=serializers.IntegerField(min_value=0, max_value=MAX_COUNT),
        required=False,
        help_text=help_text,
    )


class BreakdownLatencySerializer(serializers.Serializer):
    """A breakdown row's latency percentiles (the same keys may also sit on the row)."""

    def get_fields(self) -> dict[str, serializers.Field]:
        return {name: _latency(name) for name in BREAKDOWN_LATENCY_FIELDS}


class BreakdownRowSerializer(serializers.Serializer):
    """The shape of one breakdown row, for the schema. The rows are checked by
    `services.clean_breakdown` (10,000 rows through DRF's fields would take seconds)."""

    tenant = serializers.CharField(
        help_text=f"One of the service's tenants, or “{UNATTRIBUTED}” when the gateway could "
        "not tell."
    )
    task_type = serializers.CharField(
        help_text=f"Slug of one of the service's task types, or “{UNATTRIBUTED}”."
    )
    backend = serializers.CharField(
        required=False, allow_blank=True, help_text="The backend that answered (may be blank)."
    )
    requests = serializers.IntegerField(min_value=0, max_value=MAX_COUNT)
    error_counts = _counts_by_key(
        'Failed requests by error code, e.g. {"429": 3}; errors_4xx and errors_5xx are taken '
        "from its 4xx and 5xx codes when not given."
    )
    degradations = _counts_by_key("Requests served degraded, by degradation policy.")
    latency = BreakdownLatencySerializer(required=False)

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        for name in BREAKDOWN_COUNT_FIELDS:
            fields.setdefault(name, _count("A count, 0 or more (0 when left out)."))
        return fields


@extend_schema_field(BreakdownRowSerializer(many=True))
class BreakdownField(serializers.Field):
    """The rows as sent: `services.clean_breakdown` checks them all at once, naming each
    fault by its path (`breakdown[3].tenant`)."""

    def to_internal_value(self, data: Any) -> Any:
        return data

    def to_representation(self, value: Any) -> Any:
        return value


class RunSummaryPushSerializer(serializers.Serializer):
    """The gateway's day. Only types are read here; `services.record_run_summary`
    checks ranges and order and names the field it refuses."""

    date = serializers.DateField(help_text="The day (UTC) the numbers cover; not in the future.")
    revision = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=2**31 - 1,
        allow_null=True,
        help_text="Number of the service's revision that served (r3 is 3); default: the live one.",
    )
    requests = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=0,
        max_value=MAX_COUNT,
        help_text="Requests answered that day (required; with `breakdown`, the rows' sum when "
        "left out).",
    )
    breakdown = BreakdownField(
        required=False,
        allow_null=True,
        help_text="The day per tenant, task type and backend: at most RUN_BREAKDOWN_MAX_ROWS "
        "(10,000) rows. The day's totals must be the rows' sums; a total left out is taken "
        "from them. [] drops the day's rows; leaving it out keeps them.",
    )
    error_counts = serializers.DictField(
        child=serializers.IntegerField(min_value=0, max_value=MAX_COUNT),
        required=False,
        help_text='Failed requests by error code, e.g. {"429": 30, "503": 6}; their sum is '
        "the failed requests, at most `requests`.",
    )
    degradations = serializers.DictField(
        child=serializers.IntegerField(min_value=0, max_value=MAX_COUNT),
        required=False,
        help_text='Requests served degraded, by degradation policy, e.g. {"shorter-context": 40}.',
    )

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        for name in LATENCY_FIELDS:
            fields[name] = _latency(name)
        for name in RATE_FIELDS:
            fields[name] = serializers.FloatField(
                required=False, allow_null=True, help_text=_RATE_HELP
            )
        for name in COUNT_FIELDS:
            fields[name] = _count("Requests, 0 or more.")
        for name in TOKEN_FIELDS:
            fields[name] = _count("Tokens that day, 0 or more.")
        return fields

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        # A misspelt field would otherwise be dropped without a word; named with
        # the other faults of the body, not after them.
        unknown = sorted(set(data) - set(self.fields)) if isinstance(data, dict) else []
        errors: dict[str, Any] = {name: [f"{name} is not a run-summary field."] for name in unknown}
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            detail = (
                exc.detail if isinstance(exc.detail, dict) else {"non_field_errors": exc.detail}
            )
            raise serializers.ValidationError({**detail, **errors}) from exc
        if errors:
            raise serializers.ValidationError(errors)
        return value


class RunSummarySerializer(serializers.ModelSerializer):
    service = serializers.CharField(source="service.slug", read_only=True)
    revision_label = serializers.CharField(
        source="revision.label", read_only=True, allow_null=True, default=None
    )
    recorded_by: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(
        read_only=True,
        allow_null=True,
        slug_field="username",
        help_text="Username of who pushed it; null when the system (the scrape task) did.",
    )
    breakdown_rows = serializers.IntegerField(
        read_only=True,
        help_text="How many breakdown rows (one per tenant, task type and backend) the day has; "
        "listed at …/run-summaries/{date}/breakdown/.",
    )

    class Meta:
        model = RunSummary
        fields = [
            "id",
            "service",
            "date",
            "source",
            "revision",
            "revision_label",
            "requests",
            *TOKEN_FIELDS,
            *LATENCY_FIELDS,
            "error_counts",
            "error_rate",
            *RATE_FIELDS,
            "degradations",
            *COUNT_FIELDS,
            "details",
            "breakdown_rows",
            "recorded_by",
            "recorded_at",
        ]
        read_only_fields = fields


class RunBreakdownSerializer(serializers.ModelSerializer):
    """One row of a day's breakdown, as pushed (latencies in `latency`, as in the push)."""

    latency = serializers.SerializerMethodField()

    class Meta:
        model = RunBreakdown
        fields = [
            "tenant",
            "task_type",
            "backend",
            *BREAKDOWN_COUNT_FIELDS,
            "error_counts",
            "degradations",
            "latency",
        ]
        read_only_fields = fields

    @extend_schema_field(BreakdownLatencySerializer)
    def get_latency(self, row: RunBreakdown) -> dict[str, float | None]:
        return {name: getattr(row, name) for name in BREAKDOWN_LATENCY_FIELDS}


class RunSummaryOutcomeSerializer(RunSummarySerializer):
    outcome = serializers.ChoiceField(
        choices=["recorded", "replaced", "unchanged"],
        read_only=True,
        help_text="recorded: a new day; replaced: the day said something else before (the "
        "Event holds what); unchanged: the same numbers again, nothing recorded.",
    )

    class Meta(RunSummarySerializer.Meta):
        fields = [*RunSummarySerializer.Meta.fields, "outcome"]
        read_only_fields = fields
