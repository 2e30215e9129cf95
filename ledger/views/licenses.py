"""An asset's license on the pages: security & compliance approve or reject it; the
acceptance of a gated license's terms is recorded.

GET asks for confirmation and says what the decision will do; POST (with CSRF)
calls the verb. Who may is asked of `ledger.permissions`, as the API does.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.db.models import F
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods

from ledger import queries, services
from ledger.forms import LicenseAcceptanceForm, LicenseReviewForm
from ledger.forms.licenses import DECISIONS
from ledger.models import ModelAsset, Revision
from ledger.permissions import ensure_can_approve_licenses, ensure_can_record_license_acceptance
from lib.actors import AuthenticatedHttpRequest
from lib.pages import apply_errors


def _asset(pk: int) -> ModelAsset:
    return get_object_or_404(ModelAsset.objects.select_related("team", "license"), pk=pk)


def _live_revisions(asset: ModelAsset) -> list[Revision]:
    return list(
        asset.revisions.filter(service__live_revision=F("pk"))
        .select_related("service")
        .order_by("service__slug")
    )


@login_required
@require_http_methods(["GET", "POST"])
def asset_license_review(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    """Approve or reject the license of an asset, with a comment (required to reject)."""
    asset = _asset(pk)
    ensure_can_approve_licenses(request.user)
    decision = request.GET.get("decision", "")
    initial = {"license_approval": decision} if decision in dict(DECISIONS) else {}
    form = LicenseReviewForm(request.POST if request.method == "POST" else None, initial=initial)
    if request.method == "POST" and form.is_valid():
        approval = form.cleaned_data["license_approval"]
        try:
            changed = services.set_license_approval(
                asset, actor=request.user, approval=approval, comment=form.cleaned_data["comment"]
            )
        except ValidationError as error:
            apply_errors(form, error)
        else:
            done = (
                _("Approved the license of %(asset)s.")
                if approval == ModelAsset.LicenseApproval.APPROVED
                else _("Rejected the license of %(asset)s.")
            )
            if changed:
                messages.success(request, done % {"asset": asset})
            else:
                messages.info(request, _("Nothing changed: you had already recorded this review."))
            return redirect("ledger:asset_detail", pk=pk)
    context = {
        "asset": asset,
        "form": form,
        "review": queries.latest_license_review(asset),
        "live_revisions": _live_revisions(asset),
        "revision_count": asset.revisions.count(),
    }
    return render(request, "ledger/asset_license_review.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def asset_license_accept(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    """Record that someone accepted the gated license's terms for this asset."""
    asset = _asset(pk)
    ensure_can_record_license_acceptance(request.user, asset)
    initial = {"accepted_by": request.user.get_full_name() or request.user.get_username()}
    form = LicenseAcceptanceForm(
        request.POST if request.method == "POST" else None, initial=initial
    )
    refused = (
        ""
        if asset.license.gated
        else _(
            "%(license)s is not gated: it has no terms to accept before use, "
            "so there is nothing to record."
        )
        % {"license": asset.license.spdx_id}
    )
    if request.method == "POST" and not refused and form.is_valid():
        fields = form.cleaned_data
        try:
            acceptance = services.record_license_acceptance(
                asset,
                actor=request.user,
                terms_version=fields["terms_version"],
                accepted_by=fields["accepted_by"],
                accepted_at=fields["accepted_at"] or timezone.now(),
                note=fields["note"],
            )
        except ValidationError as error:
            apply_errors(form, error)
        else:
            messages.success(
                request,
                _(
                    "Recorded: %(accepted_by)s accepted %(license)s terms "
                    "%(terms_version)s for %(asset)s."
                )
                % {
                    "accepted_by": acceptance.accepted_by,
                    "license": asset.license.spdx_id,
                    "terms_version": acceptance.terms_version,
                    "asset": asset,
                },
            )
            return redirect("ledger:asset_detail", pk=pk)
    context = {"asset": asset, "form": form, "refused": refused}
    return render(request, "ledger/asset_license_accept.html", context)
