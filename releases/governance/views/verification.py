"""Verify now: queue the verification replay of a rollback target, from the incident
screen, the service page or a release's `rollback_plan` gate; and verify again a
rollback whose verification could not reach its backend."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.utils.translation import gettext as _

from ledger.models import Service
from lib.actors import AuthenticatedHttpRequest
from lib.http import post_only
from releases import permissions
from releases.governance import services
from releases.governance.gates import Assessment
from releases.governance.services.errors import TransitionRefused
from releases.models import Release, RollbackEvent
from replay.models import Run

# Where a press of Verify now came from, and goes back to (never a free URL).
_BACK = {
    "incident": lambda slug: reverse("releases:incident", args=[slug]),
    "service": lambda slug: reverse("releases:service_detail", args=[slug]) + "#rollback",
}


def verify_target_offered(
    request: AuthenticatedHttpRequest, release: Release, assessment: Assessment
) -> bool:
    """Whether the release's `rollback_plan` gate offers Verify now: it does not pass, the
    release is open, and the reader may verify the service's rollback targets."""
    gate = assessment.gate("rollback_plan")
    return (
        gate is not None
        and gate["status"] != "pass"
        and release.state in Release.OPEN_STATES
        and permissions.can_verify_rollback_target(request.user, release.service)
    )


def _queued(request: AuthenticatedHttpRequest, run: Run) -> None:
    messages.success(
        request,
        _(
            "Queued verification run #%(pk)s of %(revision)s on %(backend)s: it shows here when it ends."
        )
        % {"pk": run.pk, "revision": run.revision.label, "backend": run.backend.name},
    )


def _refused(request: AuthenticatedHttpRequest, error: ValidationError | TransitionRefused) -> None:
    text = error.message if isinstance(error, TransitionRefused) else " ".join(error.messages)
    messages.error(request, text)


@post_only("verifies a rollback target", page="releases:incident")
@login_required
def verify_target(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    service = get_object_or_404(
        Service.objects.select_related(
            "team", "live_revision__model_asset", "live_revision__runtime"
        ),
        slug=slug,
    )
    permissions.ensure_can_verify_rollback_target(request.user, service)
    try:
        run = services.verify_rollback_target(service, actor=request.user)
    except (ValidationError, TransitionRefused) as error:
        _refused(request, error)
    else:
        _queued(request, run)
    back = _BACK.get(request.POST.get("back", ""), _BACK["incident"])
    return redirect(back(slug))


@post_only("verifies a release's rollback target", page="releases:release_detail")
@login_required
def release_verify_target(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    release = get_object_or_404(Release.objects.select_related("service__team"), pk=pk)
    permissions.ensure_can_verify_rollback_target(request.user, release.service)
    try:
        run = services.verify_release_rollback_target(release, actor=request.user)
    except (ValidationError, TransitionRefused) as error:
        _refused(request, error)
    else:
        _queued(request, run)
    return redirect(reverse("releases:release_detail", args=[pk]) + "#gate-rollback_plan")


@post_only("verifies a rollback again", page="releases:rollback_detail")
@login_required
def rollback_reverify(request: AuthenticatedHttpRequest, slug: str, pk: int) -> HttpResponse:
    rollback = get_object_or_404(
        RollbackEvent.objects.select_related("service__team"), pk=pk, service__slug=slug
    )
    permissions.ensure_can_verify_rollback_target(request.user, rollback.service)
    try:
        rollback = services.reverify_rollback(rollback, actor=request.user)
    except ValidationError as error:
        _refused(request, error)
    else:
        assert rollback.verification_run is not None
        _queued(request, rollback.verification_run)
    return redirect("releases:rollback_detail", slug=slug, pk=pk)
