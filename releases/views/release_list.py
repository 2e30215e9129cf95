"""The release list (filters in the URL) and "waiting for me"."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from ledger.models import Service
from ledger.permissions import editable_teams
from lib.actors import AuthenticatedHttpRequest
from lib.pages import paginate, render_list
from releases import gates as release_gates
from releases.forms import ReleaseListFilter
from releases.models import SignOff
from releases.queries import pages as page_queries


@require_GET
@login_required
@vary_on_headers("HX-Request")
def release_list(request: AuthenticatedHttpRequest) -> HttpResponse:
    releases = ReleaseListFilter(
        request.GET or None, queryset=page_queries.release_list_queryset(), request=request
    )
    page = paginate(request, releases.qs)
    context = {
        "filter": releases,
        "page": page,
        "filtered": any(request.GET.get(name) for name in releases.filters),
        "fileable": list(
            Service.objects.filter(team__in=editable_teams(request.user))
            .order_by("slug")
            .values_list("slug", flat=True)[:200]
        ),
    }
    return render_list(request, "releases/release_list.html", context)


@require_GET
@login_required
def release_new_pick(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Where the list's "file a release" form sends its service (a GET form cannot fill a path)."""
    slug = (request.GET.get("service") or "").strip()
    if not slug:
        return redirect("releases:release_list")
    return redirect("releases:release_new", slug=slug)


WAITING_LISTED = 10


@require_GET
@login_required
def waiting_for_me(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Releases awaiting a sign-off this person may give, with the gates their role reads."""
    # The gates of each are computed (a constant number of queries each): list the
    # oldest few, which are the ones to sign first.
    waiting = page_queries.waiting_for(request.user, limit=WAITING_LISTED)
    rows = []
    for item in waiting:
        assessment = release_gates.assess(item.release)
        keys = page_queries.gates_of_interest(item.roles)
        gates = [g for key in keys if (g := assessment.gate(key)) is not None]
        labels = [dict(SignOff.Role.choices)[role] for role in item.roles]
        rows.append({"item": item, "gates": gates, "role_labels": labels})
    context = {
        "rows": rows,
        "roles": page_queries.signer_roles(request.user),
        "more": len(waiting) == WAITING_LISTED,
    }
    return render(request, "releases/waiting_for_me.html", context)
