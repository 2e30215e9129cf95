"""Drill pages: the list, one drill (plan, results, conclusion), planning one and
concluding one. Views fetch, call the verbs and render."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods

from lib.actors import AuthenticatedHttpRequest
from lib.pages import paginate
from releases import permissions
from releases.drills import services as verbs
from releases.drills.forms import ConclusionForm, PlanForm, place_errors
from releases.drills.plan import PlanRefused
from releases.drills.queries import drill_queryset, drill_view
from releases.governance.services import TransitionRefused
from releases.models import Drill


def _drill(pk: int) -> Drill:
    drill = drill_queryset().filter(pk=pk).first()
    if drill is None:
        raise Http404(f"There is no drill #{pk}.")
    return drill


@require_GET
@login_required
def drill_list(request: AuthenticatedHttpRequest) -> HttpResponse:
    page = paginate(request, drill_queryset())
    return render(
        request,
        "releases/drills/drill_list.html",
        {"page": page, "can_plan": permissions.can_plan_some_drill(request.user)},
    )


@require_GET
@login_required
def drill_detail(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    drill = _drill(pk)
    return render(
        request,
        "releases/drills/drill_detail.html",
        {
            "drill": drill,
            "view": drill_view(drill),
            "can_conclude": drill.state == Drill.State.RAN
            and permissions.can_conclude_drill(request.user, drill.signers),
            "form": ConclusionForm(drill=drill),
        },
    )


@require_http_methods(["GET", "POST"])
@login_required
def drill_new(request: AuthenticatedHttpRequest) -> HttpResponse:
    if not permissions.can_plan_some_drill(request.user):
        raise PermissionDenied(
            _("Only platform, or model owners of every service in scope, can plan a drill.")
        )
    form = PlanForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            drill = verbs.plan_drill(form.plan(), actor=request.user)
        except PlanRefused as refused:
            place_errors(form, refused.errors)
        except PermissionDenied as denied:
            form.add_error(None, str(denied))
        else:
            messages.success(request, _("Drill #%(id)s planned.") % {"id": drill.pk})
            return redirect("releases:drill_detail", pk=drill.pk)
    status = 400 if request.method == "POST" else 200
    return render(request, "releases/drills/drill_new.html", {"form": form}, status=status)


@require_http_methods(["POST"])
@login_required
def drill_conclude(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    drill = _drill(pk)
    if not permissions.can_conclude_drill(request.user, drill.signers):
        raise PermissionDenied(
            _("Only %(roles)s can conclude this drill.") % {"roles": ", ".join(drill.signers)}
        )
    form = ConclusionForm(request.POST, drill=drill)
    if form.is_valid():
        try:
            verbs.conclude_drill(drill, form.answers(), actor=request.user)
        except PlanRefused as refused:
            place_errors(form, refused.errors)
        except (TransitionRefused, PermissionDenied) as refused:
            form.add_error(None, str(refused))
        else:
            messages.success(request, _("Drill #%(id)s concluded.") % {"id": drill.pk})
            return redirect("releases:drill_detail", pk=drill.pk)
    context = {
        "drill": drill,
        "view": drill_view(drill),
        "can_conclude": True,
        "form": form,
    }
    return render(request, "releases/drills/drill_detail.html", context, status=400)
