"""Everything on the incident screen in one answer (`releases.governance.queries.incident.Incident`):
what a gateway, a chat bot or a pager integration asks during an incident."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from ledger.validators import parse_image
from releases.governance.queries.incident import Incident
from releases.governance.queries.readiness import VERDICTS


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


class RollbackInProgressSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    state = serializers.ChoiceField(choices=["verifying", "awaiting_confirmation"])
    started_at = serializers.DateTimeField()


class RevisionLabelRefSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    label = serializers.CharField()  # type: ignore[assignment]  # like Field.label


class PassedOverSerializer(serializers.Serializer):
    revision = RevisionLabelRefSerializer()
    rollback = serializers.IntegerField(help_text="The rollback that took it off the service.")
    rolled_back_at = serializers.DateTimeField()
    reason = serializers.CharField()


class VerifyNowSerializer(serializers.Serializer):
    backend = serializers.CharField(
        allow_null=True,
        help_text="The enabled backend a verification of the target replays against; null: "
        "none serves it, so nothing can verify it now.",
    )
    pending_run = serializers.IntegerField(
        allow_null=True, help_text="A verification run of the target not finished yet."
    )


class RollbackSerializer(serializers.Serializer):
    target = RevisionRefSerializer(allow_null=True)
    passed_over = PassedOverSerializer(
        allow_null=True,
        help_text="The revision the plan (or the serving history) would have gone back to, "
        "passed over because it was rolled back off the service and no release has put it "
        "live since; null: none.",
    )
    kind = serializers.CharField(allow_null=True, help_text="From the rollback plan; null: none.")
    trigger_conditions = serializers.ListField(child=serializers.CharField())
    expected_minutes = serializers.IntegerField(allow_null=True)
    impact_scope = serializers.CharField(allow_blank=True)
    plan_release = serializers.IntegerField(
        allow_null=True,
        help_text="The release whose rollback plan is in force; null: none, and the target "
        "is the revision that served before.",
    )
    readiness = ReadinessSerializer()
    last_verification = VerificationSerializer(allow_null=True)
    in_progress = RollbackInProgressSerializer(
        allow_null=True, help_text="A recorded rollback not finished yet."
    )
    verify_now = VerifyNowSerializer(
        allow_null=True,
        help_text="Verifying the target now (POST /api/services/{slug}/verify-target/); "
        "null: there is no target.",
    )


class IncidentAnalysisSerializer(serializers.Serializer):
    interval_s = serializers.IntegerField(help_text="How often Prometheus is read.")
    next_at = serializers.DateTimeField(
        allow_null=True,
        help_text="The end of the window measured next; null while paused or stopped.",
    )
    paused_by = serializers.CharField(
        allow_blank=True, help_text="Who paused it; empty when it runs or stopped itself."
    )
    pause_reason = serializers.CharField(allow_blank=True)


class IncidentRolloutSerializer(serializers.Serializer):
    release = serializers.IntegerField()
    to_revision = serializers.CharField(help_text="The candidate's label, e.g. r4.")
    stage = serializers.IntegerField(allow_null=True)
    stages = serializers.IntegerField()
    traffic_pct = serializers.FloatField(help_text="The candidate's share of traffic now.")
    stage_state = serializers.CharField(help_text="observing, held or breached.")
    breached = serializers.BooleanField(help_text="A guard breached the stage: roll back.")
    held = serializers.BooleanField(help_text="The stage waits for a person.")
    why = serializers.CharField(allow_blank=True)
    analysis = IncidentAnalysisSerializer(
        allow_null=True, help_text="The stage's analysis from Prometheus; null: it has none."
    )


class UnauthorizedSerializer(serializers.Serializer):
    open = serializers.IntegerField(help_text="Open unauthorized-change findings.")
    detected_at = serializers.DateTimeField(allow_null=True)
    kind = serializers.ChoiceField(
        choices=["engine", "gateway"],
        help_text="The newest finding's: engine (a probe of a backend) or gateway (the running "
        "gateway's routes).",
    )
    found = serializers.JSONField(
        help_text="The newest finding: engine [{what, registered, reported}], gateway "
        "[{deployment, what, ledger, gateway}]."
    )


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
    phone = serializers.CharField(allow_blank=True, help_text="Phone or pager; blank when none.")


class IncidentSerializer(serializers.Serializer):
    service = serializers.CharField()
    tier = serializers.CharField()
    at = serializers.DateTimeField()
    live = LiveSerializer(allow_null=True)
    health = HealthSerializer()
    rollout = IncidentRolloutSerializer(
        allow_null=True, help_text="The rollout in flight; null: none."
    )
    unauthorized_change = UnauthorizedSerializer(
        allow_null=True,
        help_text="A probe found the live backend serving something else; null: nothing open.",
    )
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
        plan = incident.plan
        rollout = incident.rollout
        finding = incident.unauthorized
        in_progress = incident.rollback_in_progress
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
            "rollout": (
                {
                    "release": rollout.release_id,
                    "to_revision": rollout.to_revision_label,
                    "stage": rollout.stage_number,
                    "stages": rollout.stages,
                    "traffic_pct": rollout.traffic_pct,
                    "stage_state": rollout.stage_state,
                    "breached": rollout.breached,
                    "held": rollout.held,
                    "why": rollout.why,
                    "analysis": vars(rollout.analysis) if rollout.analysis else None,
                }
                if rollout
                else None
            ),
            "unauthorized_change": (
                {
                    "open": finding.open_count,
                    "detected_at": finding.detected_at,
                    "kind": finding.kind,
                    "found": finding.found,
                }
                if finding
                else None
            ),
            "rollback": {
                "target": _revision(readiness.target) if readiness.target else None,
                "passed_over": (
                    {
                        "revision": {"id": passed.revision_id, "label": passed.label},
                        "rollback": passed.rollback_id,
                        "rolled_back_at": passed.at,
                        "reason": passed.reason,
                    }
                    if (passed := plan.passed_over)
                    else None
                ),
                "kind": plan.kind or None,
                "trigger_conditions": plan.triggers,
                "expected_minutes": plan.expected_minutes,
                "impact_scope": plan.impact_scope,
                "plan_release": plan.release.pk if plan.release else None,
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
                "in_progress": (
                    {
                        "id": in_progress.id,
                        "state": in_progress.state,
                        "started_at": in_progress.started_at,
                    }
                    if in_progress
                    else None
                ),
                "verify_now": (
                    {"backend": means["backend"], "pending_run": means["pending_run"]}
                    if (means := incident.verification) is not None
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
