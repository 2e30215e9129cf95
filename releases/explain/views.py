"""`/explain/?trace_id=…`: a trace's model calls against what the ledger approved."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from lib.actors import AuthenticatedHttpRequest
from releases import permissions
from releases.explain.queries import TraceIdInvalid, clean_trace_id, explain_trace


@require_GET
@login_required
def explain(request: AuthenticatedHttpRequest) -> HttpResponse:
    if not permissions.can_explain_traces(request.user):
        raise PermissionDenied
    asked = request.GET.get("trace_id", "")
    error, trace_id, calls = "", "", []
    if asked:
        try:
            trace_id = clean_trace_id(asked)
        except TraceIdInvalid as refused:
            error = str(refused)
        else:
            calls = explain_trace(trace_id)
    status = 400 if error else 404 if trace_id and not calls else 200
    return render(
        request,
        "releases/explain.html",
        {"asked": asked, "trace_id": trace_id, "calls": calls, "error": error},
        status=status,
    )
