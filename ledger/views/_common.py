"""What the registry's page views share: fetching an object for a change."""

from __future__ import annotations

from django.shortcuts import get_object_or_404

from ledger.models import Service
from ledger.permissions import ensure_can_edit
from lib.actors import AuthenticatedHttpRequest


def service_for_edit(request: AuthenticatedHttpRequest, slug: str) -> Service:
    """The service of a form that changes it or adds to it: 404, or 403 unless editable."""
    service = get_object_or_404(Service.objects.select_related("team"), slug=slug)
    ensure_can_edit(request.user, service.team)
    return service
