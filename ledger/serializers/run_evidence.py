"""Shapes of daily run evidence over REST: what the gateway posts, what readers get."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rest_framework import serializers

from ledger.models import RunSummary
from ledger.models.run_evidence import COUNT_FIELDS, LATENCY_FIELDS, RATE_FIELDS
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
        min_value=0, max_value=MAX_COUNT, help_text="Requests answered that day."
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
            fields[name] = serializers.IntegerField(
                required=False,
                allow_null=True,
                min_value=0,
                max_value=MAX_COUNT,
                help_text="Requests, 0 or more.",
            )
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
            *LATENCY_FIELDS,
            "error_counts",
            "error_rate",
            *RATE_FIELDS,
            "degradations",
            *COUNT_FIELDS,
            "details",
            "recorded_by",
            "recorded_at",
        ]
        read_only_fields = fields


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
