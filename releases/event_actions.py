"""The labels of the event actions the releases app records (`ledger.event_actions`),
and which of them change what serves: the incident screen lists those first."""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _

from ledger.queries.serving import LIVE_CHANGED
from ledger.roles import StrOrPromise

ACTION_LABELS: dict[str, StrOrPromise] = {
    "export.downloaded": _("Export downloaded"),
    "export.failed": _("Export failed"),
    "export.ready": _("Export ready"),
    "export.requested": _("Export requested"),
    "gateway.check_drifted": _("Gateway drift found"),
    "gateway.check_in_sync": _("Gateway in sync with the ledger"),
    "gateway.check_unknown": _("Gateway could not be read"),
    "gateway.config_changed": _("Gateway config changed"),
    "release.aborted": _("Rollout aborted"),
    "release.approval_voided": _("Approval voided"),
    "release.approved": _("Release approved"),
    "release.blackout_window_created": _("Blackout window created"),
    "release.closed": _("Close code and incidents recorded"),
    "release.commented": _("Comment added"),
    "release.filed": _("Release filed"),
    "release.observation_recorded": _("Observation recorded"),
    "release.promoted": _("Stage promoted"),
    "release.rejected": _("Release rejected"),
    "release.released": _("Released"),
    "release.reopened": _("Release reopened"),
    "release.rolled_back": _("Release rolled back"),
    "release.rollout_started": _("Rollout started"),
    "release.signed_off": _("Signed off"),
    "release.signoff_voided": _("Sign-off voided"),
    "release.stage_breached": _("Stage breached"),
    "release.stage_held": _("Stage held"),
    "release.stage_started": _("Stage started"),
    "release.stage_window_ended": _("Observation window ended early"),
    "release.standard_template_created": _("Standard change template created"),
    "release.standard_template_retired": _("Standard change template retired"),
    "release.submitted": _("Release submitted"),
    "release.updated": _("Release form changed"),
    "release.waiver_granted": _("Waiver granted"),
    "release.waiver_revoked": _("Waiver revoked"),
    "release.withdrawn": _("Release withdrawn"),
    "review.action_done": _("Review action done"),
    "review.checklist_answered": _("Checklist answered"),
    "review.concluded": _("Review concluded"),
    "review.overdue": _("Review overdue"),
    "review.raised": _("Review raised"),
    "review.reassigned": _("Review reassigned"),
    "review.started": _("Review started"),
    "review.trigger_added": _("Review trigger added"),
    "rollback.finished": _("Rollback finished"),
    "rollback.recorded": _("Rollback recorded"),
    "rollback.verification_requested": _("Rollback target verification requested"),
    "rollback.verification_retried": _("Rollback verified again"),
    "rollback.verification_unknown": _("Rollback verification inconclusive"),
    "service.degradation_changed": _("Degradation policy changed"),
    "service.playbook_changed": _("Playbook changed"),
    "service.unauthorized_change": _("Unauthorized change found"),
    "service.unauthorized_change_reconciled": _("Unauthorized change reconciled"),
    "webhook.delivery_resent": _("Webhook delivery sent again"),
    "webhook.subscription_created": _("Webhook subscription created"),
    "webhook.subscription_deleted": _("Webhook subscription deleted"),
    "webhook.subscription_paused": _("Webhook subscription paused"),
    "webhook.subscription_resumed": _("Webhook subscription resumed"),
}

# Actions that change what serves a service's traffic, or find that something else does:
# the live revision, a rollout's shares, a rollback, an unauthorized change.
SERVING_ACTIONS: frozenset[str] = frozenset(
    {
        LIVE_CHANGED,
        "release.rollout_started",
        "release.stage_started",
        "release.stage_breached",
        "release.stage_held",
        "release.stage_window_ended",
        "release.promoted",
        "release.released",
        "release.aborted",
        "release.rolled_back",
        "rollback.recorded",
        "rollback.finished",
        "service.unauthorized_change",
        "service.unauthorized_change_reconciled",
        "replay.drift_detected",
        "replay.drift_cleared",
    }
)
