"""Where each person starts: what needs them now, what changed in the last day, the search."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from ledger.roles import ROLE_DUTIES, roles_of
from lib.actors import AuthenticatedHttpRequest
from releases.overview.queries.attention import attention_for, recent_changes


@require_GET
@login_required
def home(request: AuthenticatedHttpRequest) -> HttpResponse:
    roles = [(role, ROLE_DUTIES[role]) for role in roles_of(request.user)]
    context = {
        "roles": roles,
        "attention": attention_for(request.user),
        "recent": recent_changes(),
    }
    return render(request, "releases/home.html", context)
