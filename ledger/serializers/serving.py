"""The shape of "what was serving at T" over REST (`ledger.queries.ServingInterval`)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from django.utils import timezone
from rest_framework import serializers

from lib.storable import offset_problem


class StorableDateTimeField(serializers.DateTimeField):
    """ISO 8601 with an offset PostgreSQL takes (±15:59), refused as the filters refuse it:
    DRF would convert a wider offset to UTC before any validator could see it."""

    def to_internal_value(self, value: Any) -> dt.datetime:
        parsed = super().to_internal_value(value)
        try:
            as_written = dt.datetime.fromisoformat(str(value))
        except ValueError:
            return parsed
        problem = offset_problem(as_written)
        if problem:
            raise serializers.ValidationError(problem)
        return parsed


class ServingQuerySerializer(serializers.Serializer):
    at = StorableDateTimeField(
        required=False,
        help_text="ISO 8601 with an offset, e.g. 2026-11-30T14:05:00Z; default: now.",
    )

    def moment(self) -> dt.datetime:
        return self.validated_data.get("at") or timezone.now()


class ServingRevisionSerializer(serializers.Serializer):
    id = serializers.IntegerField(allow_null=True)
    # A declared field named like Field.label: DRF collects it; only the stubs object.
    label = serializers.CharField(allow_null=True, help_text="e.g. r3; null if it was deleted.")  # type: ignore[assignment]
    model_asset = serializers.CharField(allow_null=True)
    runtime = serializers.CharField(allow_null=True)
    fingerprint = serializers.CharField(help_text="The revision's fingerprint when it went live.")


class ServingSetBySerializer(serializers.Serializer):
    event = serializers.IntegerField(help_text="Sequence of the ledger event that set it.")
    event_hash = serializers.CharField()
    actor = serializers.CharField(help_text="Who set it: a username, or 'system'.")
    reason = serializers.CharField(allow_blank=True)
    cause = serializers.JSONField(
        help_text='What set it, e.g. {"release": 12} or {"rollback": 3}; {} when set directly.'
    )


class ServingShareSerializer(serializers.Serializer):
    revision_id = serializers.IntegerField()
    revision = serializers.CharField(help_text="e.g. r4")
    traffic_pct = serializers.FloatField(help_text="Its share of the traffic, 0 to 100.")
    since = serializers.DateTimeField()
    until = serializers.DateTimeField(allow_null=True, help_text="null: still carrying it.")
    cause = serializers.JSONField(
        help_text='What gave it the share, e.g. {"release": 12, "stage": 1}.'
    )
    event = serializers.IntegerField(help_text="Sequence of the ledger event that opened it.")


class ServingSerializer(serializers.Serializer):
    at = serializers.DateTimeField()
    revision = ServingRevisionSerializer()
    since = serializers.DateTimeField()
    until = serializers.DateTimeField(allow_null=True, help_text="null: still serving.")
    set_by = ServingSetBySerializer()
    shares = ServingShareSerializer(
        many=True,
        help_text="Other revisions carrying part of the traffic at that moment (a gray "
        "rollout's candidate); the live revision carries the rest.",
    )

    @staticmethod
    def shape(interval: Any, at: dt.datetime, shares: Sequence[Any] = ()) -> dict[str, Any]:
        revision = interval.revision
        return {
            "shares": [
                {
                    "revision_id": share.revision_id,
                    "revision": share.revision_label,
                    "traffic_pct": share.traffic_pct,
                    "since": share.since,
                    "until": share.until,
                    "cause": share.cause,
                    "event": share.event_sequence,
                }
                for share in shares
            ],
            "at": at,
            "revision": {
                "id": interval.revision_id,
                "label": revision.label if revision else None,
                "model_asset": str(revision.model_asset) if revision else None,
                "runtime": revision.runtime.name if revision else None,
                "fingerprint": interval.fingerprint,
            },
            "since": interval.since,
            "until": interval.until,
            "set_by": {
                "event": interval.event_sequence,
                "event_hash": interval.event_hash,
                "actor": interval.actor,
                "reason": interval.reason,
                "cause": interval.cause,
            },
        }
