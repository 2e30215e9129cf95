"""License obligations: which revisions a service may not serve, and why.

Two levels of judgement, so every page and the release gates say the same:
`license_problems` is what is wrong with an asset's license whatever the
service (its review is pending or rejected, its gated terms unaccepted);
`license_findings` adds what a given service makes of it (its tier, its
exposure) and the asset's lifecycle.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

from ledger.models import Event, LicenseAcceptance, ModelAsset, Revision, Service

# The exposures on which each license kind may be served.
ALLOWED_EXPOSURES: dict[str, set[str]] = {
    "permissive": {"internal", "external", "customer_data"},
    "copyleft": {"internal", "external", "customer_data"},
    "non_commercial": {"internal"},
    "acceptable_use": {"internal", "external", "customer_data"},
}

# The codes of `license_problems`: a license nobody may rely on yet.
LICENSE_PROBLEM_CODES = ("license_unaccepted", "license_rejected", "license_pending")


@dataclass(frozen=True)
class Finding:
    severity: str  # "breach" or "warning"
    code: str
    message: str


@dataclass(frozen=True)
class LicenseReview:
    """The last review of an asset's license, as the ledger recorded it."""

    decision: str
    comment: str
    actor_id: int | None
    actor_label: str
    at: dt.datetime
    sequence: int


def latest_license_review(asset: ModelAsset) -> LicenseReview | None:
    """The newest `model_asset.license_reviewed` event of the asset (one indexed query)."""
    event = (
        Event.objects.for_subject("ledger.modelasset", asset.pk)
        .filter(action="model_asset.license_reviewed")
        .order_by("-sequence")
        .first()
    )
    if event is None:
        return None
    data = event.payload_data
    return LicenseReview(
        decision=str(data.get("decision", "")),
        comment=str(data.get("comment", "")),
        actor_id=event.actor_id,
        actor_label=event.actor_label,
        at=event.created_at,
        sequence=event.sequence,
    )


def license_problems(
    asset: ModelAsset, *, accepted: bool, pending_severity: str = "warning"
) -> list[Finding]:
    """What is wrong with relying on the asset's license, on any service.

    `accepted`: whether an acceptance of the license's terms is recorded for the
    asset (only read when the license is gated; see `accepted_asset_ids`).
    Expects asset.license loaded.
    """
    license_ = asset.license
    problems: list[Finding] = []
    if license_.gated and not accepted:
        problems.append(
            Finding(
                "breach",
                "license_unaccepted",
                f"{license_.spdx_id} is gated and nobody has recorded accepting its terms for {asset}.",
            )
        )
    if asset.license_approval == ModelAsset.LicenseApproval.REJECTED:
        problems.append(
            Finding(
                "breach",
                "license_rejected",
                f"Security & compliance rejected the license of {asset}.",
            )
        )
    elif asset.license_approval == ModelAsset.LicenseApproval.PENDING:
        problems.append(
            Finding(
                pending_severity,
                "license_pending",
                f"The license of {asset} awaits approval by security & compliance.",
            )
        )
    return problems


def accepted_asset_ids(assets: Iterable[ModelAsset]) -> set[int]:
    """Of these assets, those with a recorded acceptance of their current license's
    terms: one query, and none when no license is gated."""
    gated = [asset for asset in assets if asset.license.gated]
    if not gated:
        return set()
    rows = LicenseAcceptance.objects.filter(model_asset__in=gated).values_list(
        "model_asset_id", "license_id"
    )
    current = {asset.pk: asset.license_id for asset in gated}
    return {asset_id for asset_id, license_id in rows if current.get(asset_id) == license_id}


def license_problems_by_asset(assets: Iterable[ModelAsset]) -> dict[int, list[Finding]]:
    """`license_problems` of many assets (a page's list of revisions) in one query."""
    assets = list(assets)
    accepted = accepted_asset_ids(assets)
    return {asset.pk: license_problems(asset, accepted=asset.pk in accepted) for asset in assets}


def license_findings(
    service: Service, revision: Revision, *, accepted: bool | None = None
) -> list[Finding]:
    """What is wrong with serving `revision` on `service`, license- and lifecycle-wise.

    Expects revision.model_asset.license loaded (select_related) and reads the
    asset's acceptances with one query when the license is gated, unless
    `accepted` already says (from `accepted_asset_ids` over many assets).
    """
    asset: ModelAsset = revision.model_asset
    license_ = asset.license
    findings: list[Finding] = []
    if service.exposure not in ALLOWED_EXPOSURES[license_.kind]:
        findings.append(
            Finding(
                "breach",
                "license_exposure",
                f"{license_.spdx_id} is {license_.get_kind_display().lower()}; it may not be served on a "
                f"service whose exposure is '{service.get_exposure_display()}'.",
            )
        )
    findings += license_problems(
        asset,
        accepted=bool(accepted_asset_ids([asset])) if accepted is None else accepted,
        # Production serves nothing whose license nobody has approved.
        pending_severity="breach" if service.tier == Service.Tier.PRODUCTION else "warning",
    )
    if asset.lifecycle == ModelAsset.Lifecycle.RETIRED:
        findings.append(
            Finding("breach", "asset_retired", f"{asset} was retired on {asset.retired_on}.")
        )
    elif asset.lifecycle == ModelAsset.Lifecycle.DEPRECATED:
        findings.append(
            Finding(
                "warning",
                "asset_deprecated",
                f"{asset} is deprecated since {asset.deprecated_on}; plan its replacement.",
            )
        )
    return findings


def license_warnings(findings: Iterable[Finding]) -> list[Finding]:
    """Of a revision's findings, those about its license itself (pending, rejected,
    unaccepted): what the warning at the top of a revision or service page lists."""
    return [finding for finding in findings if finding.code in LICENSE_PROBLEM_CODES]
