"""A person takes over from the analysis: pause it (with a reason, confirmed on its own
page) and resume it. Both answer to whoever may hold the rollout."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods

from lib.actors import AuthenticatedHttpRequest
from lib.http import post_only
from lib.pages import apply_errors
from releases import permissions
from releases.analysis import services
from releases.governance.forms.rollout import ReasonForm
from releases.governance.services import TransitionRefused
from releases.models import Release


def _release(request: AuthenticatedHttpRequest, pk: int) -> Release:
    release = get_object_or_404(Release.objects.select_related("service__team"), pk=pk)
    if not permissions.can_hold(request.user, release):
        raise PermissionDenied(
            _("Only whoever may hold release #%(pk)s pauses or resumes its analysis.")
            % {"pk": release.pk}
        )
    return release


def _back(pk: int) -> HttpResponse:
    return redirect(reverse("releases:release_detail", args=[pk]) + "#analysis-heading")


@login_required
@require_http_methods(["GET", "POST"])
def analysis_pause(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    release = _release(request, pk)
    form = ReasonForm(request.POST if request.method == "POST" else None)
    refusal = ""
    if request.method == "POST" and form.is_valid():
        try:
            stage = services.pause_analysis(
                release, actor=request.user, reason=form.cleaned_data["reason"]
            )
        except ValidationError as error:
            apply_errors(form, error)
        except TransitionRefused as refused:
            refusal = refused.message
        else:
            messages.success(
                request,
                _(
                    "Paused the analysis of stage %(stage)s: it measures and acts no more "
                    "until someone resumes it. Post observations, hold or promote by hand."
                )
                % {"stage": stage.number},
            )
            return _back(pk)
    status = 409 if refusal else 400 if form.errors else 200
    return render(
        request,
        "releases/analysis_pause.html",
        {"release": release, "form": form, "refusal": refusal},
        status=status,
    )


@login_required
@post_only("resumes a rollout's analysis", page="releases:release_detail")
def analysis_resume(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    release = _release(request, pk)
    try:
        stage = services.resume_analysis(release, actor=request.user)
    except TransitionRefused as refused:
        messages.error(request, refused.message)
    else:
        messages.success(
            request,
            _("Resumed the analysis of stage %(stage)s: it measures again at its next interval.")
            % {"stage": stage.number},
        )
    return _back(pk)
