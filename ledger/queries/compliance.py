"""License obligations: which revisions a service may not serve, and why."""

from __future__ import annotations

from dataclasses import dataclass

from ledger.models import ModelAsset, Revision, Service

# The exposures on which each license kind may be served.
ALLOWED_EXPOSURES: dict[str, set[str]] = {
    "permissive": {"internal", "external", "customer_data"},
    "copyleft": {"internal", "external", "customer_data"},
    "non_commercial": {"internal"},
    "acceptable_use": {"internal", "external", "customer_data"},
}


@dataclass(frozen=True)
class Finding:
    severity: str  # "breach" or "warning"
    code: str
    message: str


def license_findings(service: Service, revision: Revision) -> list[Finding]:
    """What is wrong with serving `revision` on `service`, license- and lifecycle-wise.

    Expects revision.model_asset.license loaded (select_related) and reads the
    asset's acceptances with one query when the license is gated.
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
    if license_.gated and not asset.license_acceptances.filter(license=license_).exists():
        findings.append(
            Finding(
                "breach",
                "license_unaccepted",
                f"{license_.spdx_id} is gated and nobody has recorded accepting its terms for {asset}.",
            )
        )
    if asset.license_approval == ModelAsset.LicenseApproval.REJECTED:
        findings.append(
            Finding(
                "breach",
                "license_rejected",
                f"Security & compliance rejected the license of {asset}.",
            )
        )
    elif asset.license_approval == ModelAsset.LicenseApproval.PENDING:
        severity = "breach" if service.tier == Service.Tier.PRODUCTION else "warning"
        findings.append(
            Finding(
                severity,
                "license_pending",
                f"The license of {asset} awaits approval by security & compliance.",
            )
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
