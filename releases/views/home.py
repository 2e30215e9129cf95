from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from ledger.roles import ROLE_DUTIES, roles_of
from lib.actors import AuthenticatedHttpRequest


@require_GET
@login_required
def home(request: AuthenticatedHttpRequest) -> HttpResponse:
    roles = [(role, ROLE_DUTIES[role]) for role in roles_of(request.user)]
    return render(request, "releases/home.html", {"roles": roles})
