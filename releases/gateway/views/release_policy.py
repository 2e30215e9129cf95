"""The candidate's gateway policy, edited from the release form (a routing change).

The release form loads this editor into its page (htmx, on load); without JavaScript
its link opens the same editor as a page. It shows the policy the candidate runs and
what that changes against the version in force, and gives the filer the policy form,
filled in from the candidate's version: **Preview** judges the draft and records
nothing; **Record and use it** records the version (or reuses the one that already says
the same), makes the revision like the candidate that runs it, and — on a draft — makes
it the release's candidate (`releases.gateway.services.policy_change`). A new release's
form then opens on that revision with change kind routing.
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
from django.views.decorators.http import require_http_methods
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HttpResponseClientRedirect

from ledger.models import GatewayPolicy, Revision, Service
from ledger.queries.policy_diff import policy_changes
from lib.actors import AuthenticatedHttpRequest
from lib.ids import row_id
from lib.pages import apply_errors, wants_fragment
from releases import permissions
from releases.gateway.forms.policy import GatewayPolicyForm
from releases.gateway.queries import PolicyPreview, policy_preview
from releases.gateway.services.policy_change import (
    PolicyCandidate,
    candidate_with_policy,
    change_release_policy,
)
from releases.models import Release

PREFIX = "policy"


def _form(
    request: AuthenticatedHttpRequest, service: Service, base: Revision | None, *, bound: bool
) -> GatewayPolicyForm:
    running = base.gateway_policy if base is not None else None
    return GatewayPolicyForm(
        request.POST if bound else None,
        prefix=PREFIX,
        service=service,
        task_types=list(service.task_types.order_by("slug").values_list("slug", flat=True)),
        initial=GatewayPolicyForm.initial_from(running.document if running else None),
    )


def _judge(
    request: AuthenticatedHttpRequest, service: Service, form: GatewayPolicyForm
) -> PolicyPreview | None:
    if not form.is_valid():
        return None
    in_force = service.live_revision.gateway_policy if service.live_revision else None
    return policy_preview(service, in_force, form.document())


def _render(
    request: AuthenticatedHttpRequest,
    *,
    service: Service,
    release: Release | None,
    base: Revision | None,
    form: GatewayPolicyForm | None,
    preview: PolicyPreview | None = None,
    notice: str = "",
) -> HttpResponse:
    in_force: GatewayPolicy | None = (
        service.live_revision.gateway_policy if service.live_revision else None
    )
    running = base.gateway_policy if base is not None else None
    context: dict[str, Any] = {
        "service": service,
        "release": release,
        "base": base,
        "running": running,
        "in_force": in_force,
        "running_changes": (
            policy_changes(in_force.document, running.document)
            if in_force is not None and running is not None and running.pk != in_force.pk
            else []
        ),
        "form": form,
        "preview": preview,
        "notice": notice,
        "action": (
            reverse("releases:release_policy", args=[release.pk])
            if release is not None
            else reverse("releases:release_new_policy", args=[service.slug])
        ),
    }
    fragment = wants_fragment(request)
    template = "releases/release_policy.html" + ("#editor" if fragment else "")
    status = 400 if (form is not None and form.errors) or notice else 200
    return render(request, template, context, status=status)


def _done(request: AuthenticatedHttpRequest, target: str) -> HttpResponse:
    """After a record: the release form, as a whole page even when htmx asked."""
    if wants_fragment(request):
        return HttpResponseClientRedirect(target)
    return redirect(target)


def _recorded_message(candidate: PolicyCandidate) -> str:
    what = {"label": candidate.policy.label, "revision": candidate.revision.label}
    if candidate.recorded:
        return (
            _("Recorded gateway policy %(label)s; the candidate is %(revision)s, which runs it.")
            % what
        )
    return (
        _(
            "%(label)s already said this, so nothing new was recorded; the candidate is "
            "%(revision)s, which runs it."
        )
        % what
    )


def _chosen_base(request: AuthenticatedHttpRequest, service: Service) -> Revision | None:
    """The revision a new release starts from: the one the form chose, else the live one."""
    chosen = row_id((request.POST if request.method == "POST" else request.GET).get("to_revision"))
    if chosen is not None:
        found = (
            Revision.objects.select_related("gateway_policy")
            .filter(service=service, pk=chosen)
            .first()
        )
        if found is not None:
            return found
    return service.live_revision


@login_required
@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
def release_new_policy(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    """The gateway policy of a release not filed yet: recording one opens the release
    form on the revision that runs it, change kind routing."""
    service = get_object_or_404(
        Service.objects.select_related("team", "live_revision__gateway_policy"), slug=slug
    )
    permissions.ensure_can_file(request.user, service)
    base = _chosen_base(request, service)
    if base is None:
        return _render(request, service=service, release=None, base=None, form=None)
    form = _form(request, service, base, bound=request.method == "POST")
    preview = _judge(request, service, form) if request.method == "POST" else None
    if preview is not None and not preview.problems and request.POST.get("action") == "record":
        try:
            candidate = candidate_with_policy(
                service,
                actor=request.user,
                document=preview.document,
                note=form.cleaned_data["note"],
                base=base,
            )
        except ValidationError as error:
            apply_errors(form, error)
        else:
            messages.success(request, _recorded_message(candidate))
            target = reverse("releases:release_new", args=[slug])
            return _done(
                request, f"{target}?to_revision={candidate.revision.pk}&change_kind=routing"
            )
    return _render(request, service=service, release=None, base=base, form=form, preview=preview)


@login_required
@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
def release_policy(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    """The gateway policy of a release's candidate; a draft's can be changed here."""
    release = get_object_or_404(
        Release.objects.select_related(
            "service__team", "service__live_revision__gateway_policy", "to_revision__gateway_policy"
        ),
        pk=pk,
    )
    service = release.service
    if not permissions.can_view_release(request.user, release):
        raise PermissionDenied(_("Sign in to read releases."))
    editable = release.is_draft and permissions.can_edit_release(request.user, release)
    if request.method == "POST":
        permissions.ensure_can_edit(request.user, release)
    base = release.to_revision
    if not editable:
        notice = (
            _("Release #%(pk)s is %(state)s: its candidate changes only while a draft.")
            % {"pk": release.pk, "state": release.get_state_display().lower()}
            if request.method == "POST"
            else ""
        )
        return _render(
            request, service=service, release=release, base=base, form=None, notice=notice
        )
    stale = request.method == "POST" and request.POST.get("for_revision") != str(base.pk)
    form = _form(request, service, base, bound=request.method == "POST" and not stale)
    if stale:
        notice = _(
            "The candidate changed to %(revision)s since this policy was opened: nothing was "
            "recorded. Here is the policy %(revision)s runs; change it again."
        ) % {"revision": base.label}
        return _render(
            request, service=service, release=release, base=base, form=form, notice=notice
        )
    preview = _judge(request, service, form) if request.method == "POST" else None
    if preview is not None and not preview.problems and request.POST.get("action") == "record":
        try:
            candidate = change_release_policy(
                release,
                actor=request.user,
                document=preview.document,
                note=form.cleaned_data["note"],
            )
        except ValidationError as error:
            apply_errors(form, error)
        else:
            messages.success(request, _recorded_message(candidate))
            return _done(request, reverse("releases:release_edit", args=[release.pk]))
    return _render(request, service=service, release=release, base=base, form=form, preview=preview)
