"""The release form: filed as a draft, saved at any time, gates recomputed beside it.

Without JavaScript it is a plain form (POST, CSRF, redirect after a save). With
htmx every change of the form saves the draft and answers with the gate panel,
recomputed, plus out-of-band pieces: the saved notice, the error summary, the
suggested risk, the blackout warning and the failed samples to classify.
Nothing is saved while a field is wrong: the errors name it.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods
from django.views.decorators.vary import vary_on_headers

from ledger.models import Revision, Service
from lib.actors import AuthenticatedHttpRequest
from lib.ids import row_id
from lib.pages import apply_errors, wants_fragment
from releases import permissions
from releases.governance import gates as release_gates
from releases.governance import services
from releases.governance.forms.release import ReleaseForm
from releases.governance.queries import pages as page_queries
from releases.governance.views.verification import verify_target_offered
from releases.models import Release
from releases.schemas import DOWNSTREAM_SYSTEMS
from releases.transitions import Action


def _service_for_filing(request: AuthenticatedHttpRequest, slug: str) -> Service:
    service = get_object_or_404(
        Service.objects.select_related(
            "team",
            "live_revision__model_asset",
            "live_revision__runtime",
            "live_revision__gateway_policy",
        ),
        slug=slug,
    )
    permissions.ensure_can_file(request.user, service)
    return service


def _release_for_edit(request: AuthenticatedHttpRequest, pk: int) -> Release:
    release = get_object_or_404(
        Release.objects.select_related(
            "service__team",
            "service__live_revision__model_asset",
            "service__live_revision__runtime",
            "service__live_revision__gateway_policy",
            "from_revision",
            "to_revision",
            "filed_by",
        ),
        pk=pk,
    )
    permissions.ensure_can_edit(request.user, release)
    return release


def _failed_samples(release: Release) -> list[tuple[str, str]]:
    return release_gates.failed_samples(release_gates.load_inputs(release))


def _context(
    request: AuthenticatedHttpRequest,
    form: ReleaseForm,
    service: Service,
    release: Release | None,
    **extra: Any,
) -> dict[str, Any]:
    planned = (
        form.cleaned_data.get("planned_start")
        if form.is_bound and hasattr(form, "cleaned_data")
        else None
    )
    if planned is None and release is not None and not form.is_bound:
        planned = release.planned_start
    path = (form.data.get("path") if form.is_bound else None) or (
        release.path if release else "normal"
    )
    assessment = release_gates.assess(release) if release is not None else None
    if form.is_bound:
        change_kind = form.data.get("change_kind")
    else:
        change_kind = release.change_kind if release else form.initial.get("change_kind")
    return {
        "change_kind": change_kind,
        "form": form,
        "service": service,
        "release": release,
        "live": service.live_revision,
        "assessment": assessment,
        "suggested_risk": form.suggested_risk(),
        "strict_task_types": form.never_degrading(),
        "impact_suggested": _impact_suggested(assessment),
        "blackout_warning": page_queries.blackout_warning(service, planned, str(path)),
        "can_submit": release is not None and release.allowed(Action.SUBMIT),
        **extra,
    }


def _impact_suggested(assessment: Any) -> list[tuple[str, list[str]]] | None:
    """The systems the diff suggests, by label, with the fields that suggest each;
    None before the draft is saved."""
    if assessment is None or assessment.inputs is None:
        return None
    return [
        (_(DOWNSTREAM_SYSTEMS.get(system, system)), list(dict.fromkeys(fields)))
        for system, fields in assessment.inputs.impact_suggested.items()
    ]


@require_http_methods(["GET", "POST"])
@login_required
def release_new(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    """File a release of `slug`: the whole form; the first save makes the draft."""
    service = _service_for_filing(request, slug)
    form = ReleaseForm(
        request.POST if request.method == "POST" else None,
        service=service,
        initial=_chosen(request, service),
    )
    if request.method == "POST" and form.is_valid():
        try:
            release = services.create_release(
                actor=request.user, service=service, **form.to_release_fields()
            )
        except ValidationError as error:
            apply_errors(form, error)
        else:
            messages.success(
                request,
                _(
                    "Saved release #%(pk)s as a draft. The gates beside the form say what "
                    "it still needs before you can submit it."
                )
                % {"pk": release.pk},
            )
            return redirect("releases:release_edit", pk=release.pk)
    status = 400 if form.is_bound and form.errors else 200
    return render(
        request, "releases/release_form.html", _context(request, form, service, None), status=status
    )


def _chosen(request: AuthenticatedHttpRequest, service: Service) -> dict[str, Any]:
    """What a link into the form chose already (`?to_revision=<id>&change_kind=routing`,
    as the gateway policy page sends): kept only when it names a revision of the service
    and a change kind that exists."""
    chosen: dict[str, Any] = {}
    revision = row_id(request.GET.get("to_revision"))
    if revision is not None and Revision.objects.filter(service=service, pk=revision).exists():
        chosen["to_revision"] = revision
    if request.GET.get("change_kind") in Release.ChangeKind.values:
        chosen["change_kind"] = request.GET["change_kind"]
    return chosen


@require_http_methods(["GET", "POST"])
@login_required
@vary_on_headers("HX-Request")
def release_edit(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    """Change a release's form; every save recomputes the gates (and voids sign-offs it touches)."""
    release = _release_for_edit(request, pk)
    service = release.service
    if not release.allowed(Action.EDIT):
        messages.info(
            request,
            _("Release #%(pk)s is %(state)s: its form can no longer change.")
            % {"pk": release.pk, "state": release.get_state_display().lower()},
        )
        return redirect("releases:release_detail", pk=release.pk)
    failed = _failed_samples(release)
    candidate_before = release.to_revision_id
    form = ReleaseForm(
        request.POST if request.method == "POST" else None,
        service=service,
        failed=failed,
        release=release,
    )
    saved: bool | None = None
    if request.method == "POST" and form.is_valid():
        try:
            saved = services.update_release(release, actor=request.user, **form.to_release_fields())
        except ValidationError as error:
            apply_errors(form, error)
        except services.TransitionRefused as refused:
            form.add_error(None, refused.message)
        else:
            release.refresh_from_db()
            if not wants_fragment(request):
                messages.success(
                    request,
                    f"Saved release #{release.pk}."
                    if saved
                    else "Nothing changed: nothing to save.",
                )
                return redirect("releases:release_edit", pk=release.pk)
    fresh_failures = None
    if saved:
        now_failed = _failed_samples(release)
        if now_failed != failed:
            fresh_failures = ReleaseForm(service=service, failed=now_failed, release=release)
    context = _context(request, form, service, release, saved=saved, fresh_failures=fresh_failures)
    if wants_fragment(request):
        response = render(request, "releases/release_form.html#live", context)
        if saved and release.to_revision_id != candidate_before:
            # The gateway policy editor beside the form reloads for the new candidate.
            response["HX-Trigger"] = "candidate-changed"
        return response
    status = 400 if form.is_bound and form.errors else 200
    return render(request, "releases/release_form.html", context, status=status)


@require_GET
@login_required
@vary_on_headers("HX-Request")
def release_gates_panel(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    """The gates, recomputed now (after evidence was attached elsewhere, say)."""
    release = get_object_or_404(Release.objects.select_related("service"), pk=pk)
    if not permissions.can_view_release(request.user, release):
        raise PermissionDenied(_("Sign in to read releases."))
    if not wants_fragment(request):
        return redirect(reverse("releases:release_detail", args=[pk]) + "#gates")
    assessment = release_gates.assess(release)
    context = {
        "release": release,
        "assessment": assessment,
        "verify_target_offered": verify_target_offered(request, release, assessment),
    }
    return render(request, "releases/_gates.html", context)
