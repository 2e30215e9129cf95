"""The release list (filters in the URL) and "waiting for me"."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from ledger.models import Service
from ledger.permissions import editable_teams
from lib.actors import AuthenticatedHttpRequest
from lib.pages import paginate, render_list
from releases.governance import gates as release_gates
from releases.governance.forms.lists import ReleaseListFilter
from releases.governance.queries import pages as page_queries
from releases.governance.queries.waiting import signer_roles_of, waiting_for
from releases.models import SignOff


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
    listed, total = waiting_for(request.user, limit=WAITING_LISTED)
    now = timezone.now()
    labels = dict(SignOff.Role.choices)
    rows = []
    # The most urgent few, which are the ones to sign first; their gates are assessed
    # together, in as many queries as one release's, on the releases as listed.
    assessments = release_gates.assess_many([item.release for item in listed], reload=False)
    for item, assessment in zip(listed, assessments, strict=True):
        keys = [*item.gates_of_interest, "signoffs"]
        rows.append(
            {
                "release": item.release,
                "gates": [g for key in keys if (g := assessment.gate(key)) is not None],
                "role_labels": [labels[role] for role in item.roles],
                "overdue": assessment.overdue
                or (
                    item.release.signoffs_due_at is not None and item.release.signoffs_due_at <= now
                ),
            }
        )
    context = {
        "rows": rows,
        "roles": signer_roles_of(request.user),
        "more": total - len(rows),
    }
    return render(request, "releases/waiting_for_me.html", context)
