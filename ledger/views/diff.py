"""The diff of two revisions of a service: what changes, and which changes break callers.

A release reads it candidate against live; a rollback reads it live against the
target. The judgement is `ledger.queries.revision_diff`; these views fetch and render.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import pgettext
from django.views.decorators.http import require_GET

from ledger import queries
from ledger.models import Revision, Service
from lib.ids import row_id


def _revision_pair(slug: str, a: int, b: int) -> tuple[Revision, Revision]:
    """Both revisions in one query; 404 naming the number the service does not have."""
    found = {
        revision.number: revision
        for revision in Revision.objects.with_parts().filter(service__slug=slug, number__in={a, b})
    }
    for number in (a, b):
        if number not in found:
            raise Http404(f"{slug} has no revision r{number}.")
    return found[a], found[b]


@require_GET
@login_required
def revision_diff(request: HttpRequest, slug: str, a: int, b: int) -> HttpResponse:
    from_revision, to_revision = _revision_pair(slug, a, b)
    service = to_revision.service
    changes = queries.revision_diff(from_revision, to_revision)
    context = {
        "service": service,
        "from_revision": from_revision,
        "to_revision": to_revision,
        "pair": [
            (pgettext("revision diff", "From"), from_revision),
            (pgettext("revision diff", "To"), to_revision),
        ],
        "changes": changes,
        "breaking": queries.breaking_changes(changes),
        # The pair form's choices, newest first.
        "options": list(service.revisions.order_by("-number").values("pk", "number")),
    }
    return render(request, "ledger/revision_diff.html", context)


def _number(value: str | None) -> int | None:
    """A revision number as typed: 3 or r3."""
    return row_id((value or "").strip().removeprefix("r"))


@require_GET
@login_required
def revision_diff_pick(request: HttpRequest, slug: str) -> HttpResponse:
    """Where the pair form sends its choice (a GET form cannot fill a path).

    A side left out defaults: to the newest revision, from the live one, or from
    the one before `to` when `to` is live.
    """
    service = get_object_or_404(Service.objects.select_related("live_revision"), slug=slug)
    numbers = list(service.revisions.order_by("-number").values_list("number", flat=True))
    if not numbers:
        raise Http404(f"{slug} has no revision to compare yet.")
    b = _number(request.GET.get("b")) or numbers[0]
    a = _number(request.GET.get("a"))
    if a is None:
        live = service.live_revision.number if service.live_revision else None
        earlier = [number for number in numbers if number < b]
        a = live if live is not None and live != b else (earlier[0] if earlier else b)
    return redirect("ledger:revision_diff", slug=slug, a=a, b=b)
