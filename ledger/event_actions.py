"""What each recorded event action is called on a page.

An event's `action` (`release.submitted`) is recorded as it is, hashed into the chain
and exported unchanged; a page shows it through this table, in the reader's language.
Each app registers the labels of the actions it records (`register`, from its
`AppConfig.ready`), as `ledger.locks.register` takes the releases app's rule: the
ledger knows no action of an app above it. An action without a label shows its key.
"""

from __future__ import annotations

from collections.abc import Mapping

from django.utils.translation import gettext_lazy as _

from ledger.roles import StrOrPromise

ACTION_LABELS: dict[str, StrOrPromise] = {
    "account.roles_changed": _("Roles changed"),
    "account.token_issued": _("API token issued"),
    "account.token_revoked": _("API token revoked"),
    "account.group_map_applied": _("Identity-provider group map applied"),
    "capability.declared": _("Capability declared"),
    "capability.verified": _("Capability verified"),
    "capability.failed": _("Capability failed its check"),
    "gateway_policy.created": _("Gateway policy version recorded"),
    "license.accepted": _("License terms accepted"),
    "license.created": _("License added"),
    "loadtest_report.imported": _("Load-test report imported"),
    "model_asset.deprecated": _("Model asset deprecated"),
    "model_asset.license_reviewed": _("License reviewed"),
    "model_asset.registered": _("Model asset registered"),
    "model_asset.retired": _("Model asset retired"),
    "model_asset.updated": _("Model asset changed"),
    "price_sheet.recorded": _("Price sheet recorded"),
    "retention.request_data_purged": _("Request-level load-test data dropped"),
    "retention.traces_swept": _("Model-call spans past retention dropped"),
    "revision.created": _("Revision created"),
    "revision.fingerprint_changed": _("Revision fingerprint changed"),
    "revision.updated": _("Revision changed"),
    "run_summary.recorded": _("Run summary recorded"),
    "run_summary.replaced": _("Run summary replaced"),
    "runtime.created": _("Runtime registered"),
    "runtime.updated": _("Runtime changed"),
    "service.created": _("Service created"),
    "service.live_revision_changed": _("Live revision changed"),
    "service.updated": _("Service changed"),
    "task_type.created": _("Task type added"),
    "team.created": _("Team created"),
    "team.members_added": _("Team members added"),
    "team.members_removed": _("Team members removed"),
}


def register(labels: Mapping[str, StrOrPromise]) -> None:
    """Add an app's labels (called once per app, at start-up)."""
    ACTION_LABELS.update(labels)


def action_label(action: str) -> str:
    """The action in the reader's language, or its key when it has no label."""
    label = ACTION_LABELS.get(action)
    return str(label) if label is not None else action
