"""License verbs: security & compliance review an asset's license; someone records
accepting a gated license's terms.

Both write their row and append the Event in one transaction. A review's
decision is the asset's `license_approval`; who reviewed, when and why live
in the Event (`model_asset.license_reviewed`), which is the record.
"""

from __future__ import annotations

import datetime as dt

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from ledger import permissions
from ledger.chain import append_event
from ledger.models import LicenseAcceptance, ModelAsset
from lib.actors import Actor

__all__ = [
    "COMMENT_MAX_LENGTH",
    "REVIEW_DECISIONS",
    "REVIEW_DECISION_CHOICES",
    "record_license_acceptance",
    "set_license_approval",
]

# What a review decides; "pending" is the state of an asset nobody has reviewed.
REVIEW_DECISIONS = (ModelAsset.LicenseApproval.APPROVED, ModelAsset.LicenseApproval.REJECTED)
REVIEW_DECISION_CHOICES = [(decision.value, decision.label) for decision in REVIEW_DECISIONS]
COMMENT_MAX_LENGTH = 2000


def _review_problems(approval: str, comment: str) -> dict[str, str]:
    problems = {}
    if approval not in REVIEW_DECISIONS:
        problems["license_approval"] = (
            f"{approval!r} is not a review decision: give approved or rejected."
        )
    if approval == ModelAsset.LicenseApproval.REJECTED and not comment:
        problems["comment"] = (
            "Say why the license is rejected: the asset's team reads it to decide what to do."
        )
    if len(comment) > COMMENT_MAX_LENGTH:
        problems["comment"] = (
            f"The comment has {len(comment)} characters; keep it to {COMMENT_MAX_LENGTH}."
        )
    return problems


@transaction.atomic
def set_license_approval(
    asset: ModelAsset, *, actor: Actor, approval: str, comment: str = ""
) -> bool:
    """Approve or reject the license of `asset`, with a comment (required to reject).

    Takes the asset's row lock, so two reviewers pressing at once apply one after
    the other. The same person giving the same decision and comment again (a
    double click, a retried request) changes nothing and returns False.
    """
    permissions.ensure_can_approve_licenses(actor)
    comment = comment.strip()
    problems = _review_problems(approval, comment)
    if problems:
        raise ValidationError(problems)
    asset.refresh_from_db(
        from_queryset=ModelAsset.objects.select_for_update(), fields=["license_approval"]
    )
    before = asset.license_approval
    if before == approval:
        from ledger.queries import latest_license_review

        last = latest_license_review(asset)
        if (
            last is not None
            and last.decision == approval
            and last.comment == comment
            and last.actor_id == (actor.pk if actor is not None else None)
        ):
            return False
    if before != approval:
        asset.license_approval = approval
        asset.save(update_fields=["license_approval", "updated_at"])
    append_event(
        actor=actor,
        action="model_asset.license_reviewed",
        subject=asset,
        payload={
            "before": {"license_approval": before},
            "after": {"license_approval": approval},
            "license": asset.license.spdx_id,
            "decision": approval,
            "comment": comment,
        },
    )
    return True


@transaction.atomic
def record_license_acceptance(
    asset: ModelAsset,
    *,
    actor: Actor,
    terms_version: str,
    accepted_by: str,
    accepted_at: dt.datetime | None = None,
    note: str = "",
) -> LicenseAcceptance:
    """Record that `accepted_by` accepted version `terms_version` of the asset's gated
    license, at `accepted_at` (now when not given), on behalf of the company."""
    permissions.ensure_can_record_license_acceptance(actor, asset)
    license_ = asset.license
    terms_version, accepted_by, note = terms_version.strip(), accepted_by.strip(), note.strip()
    now = timezone.now()
    accepted_at = accepted_at or now
    problems: dict[str, str] = {}
    if not license_.gated:
        problems["terms_version"] = (
            f"{license_.spdx_id} is not gated: it has no terms to accept before use, so there "
            "is nothing to record."
        )
    if accepted_at > now:
        problems["accepted_at"] = (
            f"{accepted_at:%Y-%m-%d %H:%M %Z} is in the future: record an acceptance once it "
            "has happened."
        )
    if (
        terms_version
        and accepted_by
        and asset.license_acceptances.filter(
            license=license_, terms_version=terms_version, accepted_by=accepted_by
        ).exists()
    ):
        problems["terms_version"] = (
            f"{accepted_by} accepting {license_.spdx_id} terms {terms_version} for {asset} is "
            "already recorded. Record a newer terms version, or leave it as it is."
        )
    if problems:
        raise ValidationError(problems)
    acceptance = LicenseAcceptance(
        model_asset=asset,
        license=license_,
        terms_version=terms_version,
        accepted_by=accepted_by,
        accepted_at=accepted_at,
        recorded_by=actor,
        note=note,
    )
    acceptance.full_clean()
    acceptance.save(force_insert=True)
    append_event(
        actor=actor,
        action="license.accepted",
        subject=acceptance,
        payload={
            "after": {
                "model_asset": asset.pk,
                "license": license_.spdx_id,
                "terms_version": terms_version,
                "accepted_by": accepted_by,
                "accepted_at": accepted_at,
                "note": note,
            }
        },
    )
    return acceptance
