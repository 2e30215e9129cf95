"""Everything on the incident screen in one answer (`releases.queries.incident.Incident`):
what a gateway, a chat bot or a pager integration asks during an incident."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from ledger.validators import parse_image
from releases.queries.incident import Incident
from releases.queries.readiness import VERDICTS


class RevisionRefSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    number = serializers.IntegerField()
    model = serializers.CharField(help_text="Model asset name@revision.")
    quantization = serializers.CharField()
    engine = serializers.CharField()
    engine_version = serializers.CharField()
    image = serializers.CharField()
    image_digest = serializers.CharField(allow_null=True, help_text="null: not pinned by digest.")
    context_limit = serializers.IntegerField()
    fingerprint = serializers.CharField()


class LiveSerializer(RevisionRefSerializer):
    since = serializers.DateTimeField(allow_null=True)
    set_by = serializers.JSONField(
        allow_null=True, help_text="{event, actor, reason, cause} from the ledger."
    )


class HealthReasonSerializer(serializers.Serializer):
    word = serializers.CharField()
    backend = serializers.CharField(allow_blank=True)
    at = serializers.DateTimeField(allow_null=True)
    text = serializers.CharField()


class HealthSerializer(serializers.Serializer):
    word = serializers.ChoiceField(
        choices=[
            "healthy",
            "drift",
            "regressed",
            "unreachable",
            "errored",
            "stale",
            "not monitored",
        ]
    )
    reasons = HealthReasonSerializer(many=True)
    checked_at = serializers.DateTimeField(allow_null=True)


class ReadinessReasonSerializer(serializers.Serializer):
    verdict = serializers.ChoiceField(choices=VERDICTS)
    text = serializers.CharField()


class ReadinessSerializer(serializers.Serializer):
    verdict = serializers.ChoiceField(choices=VERDICTS)
    reasons = ReadinessReasonSerializer(many=True)


class VerificationSerializer(serializers.Serializer):
    run = serializers.IntegerField()
    verdict = serializers.CharField()
    sample_set = serializers.CharField()
    finished_at = serializers.DateTimeField(allow_null=True)


class RollbackSerializer(serializers.Serializer):
    target = RevisionRefSerializer(allow_null=True)
    kind = serializers.CharField(allow_null=True, help_text="From the rollback plan; null: none.")
    trigger_conditions = serializers.ListField(child=serializers.CharField())
    expected_minutes = serializers.IntegerField(allow_null=True)
    impact_scope = serializers.CharField(allow_blank=True)
    readiness = ReadinessSerializer()
    last_verification = VerificationSerializer(allow_null=True)


class PlaybookSerializer(serializers.Serializer):
    mode = serializers.CharField()
    title = serializers.CharField()
    diagnosis = serializers.ListField(child=serializers.CharField())
    recovery = serializers.ListField(child=serializers.CharField())


class DegradationSerializer(serializers.Serializer):
    task_type = serializers.CharField()
    may_degrade = serializers.BooleanField()
    how = serializers.CharField()


class ChangeSerializer(serializers.Serializer):
    sequence = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    action = serializers.CharField()
    actor = serializers.CharField()
    subject = serializers.CharField()


class OwnerSerializer(serializers.Serializer):
    role = serializers.CharField()
    name = serializers.CharField()
    username = serializers.CharField()
    email = serializers.CharField(allow_blank=True)


class IncidentSerializer(serializers.Serializer):
    service = serializers.CharField()
    tier = serializers.CharField()
    at = serializers.DateTimeField()
    live = LiveSerializer(allow_null=True)
    health = HealthSerializer()
    rollout = serializers.JSONField(allow_null=True, help_text="The rollout in flight; null: none.")
    rollback = RollbackSerializer()
    playbooks = PlaybookSerializer(many=True)
    degradation = DegradationSerializer(many=True)
    changes_72h = ChangeSerializer(many=True)
    owners = OwnerSerializer(many=True)

    @staticmethod
    def shape(incident: Incident) -> dict[str, Any]:
        service = incident.service
        live = service.live_revision
        serving = incident.serving
        readiness = incident.readiness
        run = readiness.last_verification
        return {
            "service": service.slug,
            "tier": service.tier,
            "at": incident.now,
            "live": (
                {
                    **_revision(live),
                    "since": serving.since if serving else None,
                    "set_by": (
                        {
                            "event": serving.event_sequence,
                            "actor": serving.actor,
                            "reason": serving.reason,
                            "cause": serving.cause,
                        }
                        if serving
                        else None
                    ),
                }
                if live is not None
                else None
            ),
            "health": incident.health,
            "rollout": None,
            "rollback": {
                "target": _revision(readiness.target) if readiness.target else None,
                "kind": None,
                "trigger_conditions": [],
                "expected_minutes": None,
                "impact_scope": "",
                "readiness": {
                    "verdict": readiness.verdict,
                    "reasons": [{"verdict": r.verdict, "text": r.text} for r in readiness.reasons],
                },
                "last_verification": (
                    {
                        "run": run.pk,
                        "verdict": run.verdict,
                        "sample_set": run.sample_set.name,
                        "finished_at": run.finished_at,
                    }
                    if run is not None
                    else None
                ),
            },
            "playbooks": [
                {"mode": p.mode, "title": p.title, "diagnosis": p.diagnosis, "recovery": p.recovery}
                for p in incident.playbooks
            ],
            "degradation": [
                {"task_type": task, "may_degrade": d.may_degrade, "how": d.how}
                for task, d in incident.degradation
            ],
            "changes_72h": [
                {
                    "sequence": e.sequence,
                    "created_at": e.created_at,
                    "action": e.action,
                    "actor": e.actor_label,
                    "subject": e.subject_label,
                }
                for e in incident.changes
            ],
            "owners": [vars(o) for o in incident.owners],
        }


def _revision(revision: Any) -> dict[str, Any]:
    return {
        "id": revision.pk,
        "number": revision.number,
        "model": f"{revision.model_asset.name}@{revision.model_asset.revision}",
        "quantization": revision.model_asset.quantization,
        "engine": revision.runtime.engine,
        "engine_version": revision.runtime.engine_version,
        "image": revision.runtime.image,
        "image_digest": parse_image(revision.runtime.image).digest,
        "context_limit": revision.context_limit,
        "fingerprint": revision.fingerprint,
    }
