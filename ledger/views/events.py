"""The event ledger: every change, in order, and a check that nobody rewrote it."""

from __future__ import annotations

from collections import defaultdict

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from ledger import signing
from ledger.checkpoints import verify_ledger
from ledger.forms import EventListFilter
from ledger.models import Capability, Event, LicenseAcceptance, Revision, Runtime, Service
from ledger.queries import event_notes, subject_type_names
from lib.actors import AuthenticatedHttpRequest
from lib.pages import paginate, render_list, wants_fragment


def _subject_urls(events: list[Event]) -> dict[int, str]:
    """Where each event's subject lives, if it has a page: one query per subject type."""
    ids: dict[str, set[int]] = defaultdict(set)
    for event in events:
        if event.subject_id.isdigit():
            ids[event.subject_type].add(int(event.subject_id))
    urls: dict[tuple[str, int], str] = {}
    for pk in ids.get("ledger.modelasset", ()):
        urls["ledger.modelasset", pk] = reverse("ledger:asset_detail", args=[pk])
    if "ledger.service" in ids:
        for pk, slug in Service.objects.filter(pk__in=ids["ledger.service"]).values_list(
            "pk", "slug"
        ):
            urls["ledger.service", pk] = reverse("releases:service_detail", args=[slug])
    if "ledger.runtime" in ids:
        for pk, name in Runtime.objects.filter(pk__in=ids["ledger.runtime"]).values_list(
            "pk", "name"
        ):
            urls["ledger.runtime", pk] = reverse("ledger:runtime_detail", args=[name])
    if "ledger.revision" in ids:
        for pk, slug, number in Revision.objects.filter(pk__in=ids["ledger.revision"]).values_list(
            "pk", "service__slug", "number"
        ):
            urls["ledger.revision", pk] = reverse("ledger:revision_detail", args=[slug, number])
    if "ledger.capability" in ids:
        for pk, slug, number in Capability.objects.filter(
            pk__in=ids["ledger.capability"]
        ).values_list("pk", "revision__service__slug", "revision__number"):
            urls["ledger.capability", pk] = reverse("ledger:revision_detail", args=[slug, number])
    if "ledger.licenseacceptance" in ids:
        for pk, asset_id in LicenseAcceptance.objects.filter(
            pk__in=ids["ledger.licenseacceptance"]
        ).values_list("pk", "model_asset_id"):
            urls["ledger.licenseacceptance", pk] = reverse("ledger:asset_detail", args=[asset_id])
    return {
        event.pk: urls[event.subject_type, int(event.subject_id)]
        for event in events
        if event.subject_id.isdigit() and (event.subject_type, int(event.subject_id)) in urls
    }


@require_GET
@login_required
@vary_on_headers("HX-Request")
def event_list(request: AuthenticatedHttpRequest) -> HttpResponse:
    ledger = EventListFilter(
        request.GET or None, queryset=Event.objects.order_by("-sequence"), request=request
    )
    page = paginate(request, ledger.qs)
    urls = _subject_urls(list(page.object_list))
    names = subject_type_names()
    for event in page.object_list:
        event.subject_url = urls.get(event.pk)
        event.subject_type_name = names.get(event.subject_type, event.subject_type)
        event.note = event_notes(event)
    active = [name for name in ledger.filters if request.GET.get(name)]
    context = {
        "filter": ledger,
        "page": page,
        "filtered": bool(active),
        "active_filters": len(active),
    }
    return render_list(request, "ledger/event_list.html", context)


@require_GET
@login_required
@vary_on_headers("HX-Request")
def event_verify(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Recompute the whole chain and check it against the newest checkpoint: on demand
    only, since it reads every event."""
    ledger = verify_ledger()
    context = {"report": ledger.chain, "checkpoint": ledger.checkpoint}
    if wants_fragment(request):
        return render(request, "ledger/_chain_status.html", context)
    return render(request, "ledger/event_verify.html", context)


@require_GET
@login_required
def signing_keys_pem(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The public keys to pin (the signing key, then retired ones), as the file
    `scripts/verify_bundle.py --key` reads."""
    response = HttpResponse(signing.trusted_keys_pem(), content_type="application/x-pem-file")
    response["Content-Disposition"] = 'attachment; filename="ledger-signing-keys.pem"'
    return response
