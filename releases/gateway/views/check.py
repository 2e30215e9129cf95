"""The "Check the gateway now" button of the service page and the incident screen."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.utils.translation import gettext as _

from ledger.models import Service
from lib.actors import AuthenticatedHttpRequest
from lib.http import post_only
from releases import permissions
from releases.gateway.services import checks as services


@post_only("checks the running gateway", page="releases:service_detail")
@login_required
def gateway_check(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    """Read the running gateway now and record the comparison, as the beat does (the whole
    gateway: one /model/info answers for every service); back to the page it came from."""
    service = get_object_or_404(Service.objects.select_related("team"), slug=slug)
    # Whoever may reconcile a finding may ask the gateway for a new one.
    permissions.ensure_can_reconcile(request.user, service)
    outcome = services.check_gateway(actor=request.user)
    if outcome is None:
        messages.warning(
            request,
            _("Not checked: no gateway is configured (GATEWAY_URL), or a check is running now."),
        )
    elif outcome.state == "unknown":
        messages.error(
            request, _("The gateway could not be read: %(reason)s") % {"reason": outcome.reason}
        )
    elif slug in outcome.drifted:
        messages.warning(
            request, _("The gateway does not route %(slug)s as the ledger says.") % {"slug": slug}
        )
    else:
        messages.success(
            request, _("The gateway routes %(slug)s as the ledger says.") % {"slug": slug}
        )
    page = (
        "releases:incident" if request.POST.get("back") == "incident" else "releases:service_detail"
    )
    return redirect(reverse(page, args=[slug]) + "#gateway-check")
