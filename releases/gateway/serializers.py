"""What the gateway should be doing for one service, as the incident API answers it
(`queries.service_gateway`, and the last check of the running gateway)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.utils.translation import gettext_lazy as _
from rest_framework import serializers

from ledger.models import Service
from releases.gateway.queries import ServiceGateway
from releases.models import GatewayCheck, read_check


class WeightSerializer(serializers.Serializer):
    deployment = serializers.CharField(
        help_text=_("model_info.id, as the running gateway names it")
    )
    backend = serializers.CharField()
    candidate = serializers.BooleanField()
    share_pct = serializers.FloatField()


class DegradationRuleSerializer(serializers.Serializer):
    task_type = serializers.CharField()
    rule = serializers.JSONField(
        allow_null=True,
        help_text=_("The policy's rule ({action, to_service?, message?}); null: not stated."),
    )


class GatewayCheckSerializer(serializers.Serializer):
    state = serializers.ChoiceField(choices=GatewayCheck.State.values)
    checked_at = serializers.DateTimeField(allow_null=True)
    stale = serializers.BooleanField(
        help_text=_("The last check is too old to say what the gateway does now.")
    )


class ServiceGatewaySerializer(serializers.Serializer):
    policy = serializers.CharField(
        allow_null=True, help_text=_("The version in force (its label).")
    )
    policy_known = serializers.BooleanField()
    limits = serializers.JSONField()
    weights = WeightSerializer(many=True)
    fallbacks = serializers.JSONField()
    degradation = DegradationRuleSerializer(many=True)
    routed = serializers.BooleanField(help_text=_("False: the gateway routes nothing here."))
    check = GatewayCheckSerializer()

    @staticmethod
    def shape(found: ServiceGateway, service: Service, now: dt.datetime) -> dict[str, Any]:
        check = read_check(getattr(service, "gateway_check", None), now)
        return {
            "policy": found.policy.label if found.policy else None,
            "policy_known": bool(found.policy and found.policy.known),
            "limits": found.limits,
            "weights": [vars(weight) for weight in found.weights],
            "fallbacks": found.fallbacks,
            "degradation": [{"task_type": task, "rule": rule} for task, rule in found.degradation],
            "routed": found.routed,
            "check": {"state": check.state, "checked_at": check.checked_at, "stale": check.stale},
        }
