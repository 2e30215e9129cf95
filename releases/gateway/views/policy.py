"""A service's gateway policy in the browser: the version in force with its history, a
form per section to record the next version (with a preview of the gateway config it
renders and what it changes against the version in force), and each version's page."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods

from ledger.models import GatewayPolicy, Revision, Service
from ledger.permissions import can_edit_team_objects
from ledger.queries.policy_diff import policy_changes
from ledger.services.gateway_policies import create_gateway_policy, revision_running
from lib.actors import AuthenticatedHttpRequest
from lib.http import post_only
from lib.pages import apply_errors, paginate
from releases import permissions
from releases.gateway.forms.policy import GatewayPolicyForm
from releases.gateway.queries import policy_preview, service_config_yaml


def _service(slug: str) -> Service:
    return get_object_or_404(
        Service.objects.select_related("team", "live_revision__gateway_policy"), slug=slug
    )


def _in_force(service: Service) -> GatewayPolicy | None:
    return service.live_revision.gateway_policy if service.live_revision else None


@login_required
@require_http_methods(["GET", "POST"])
def gateway_policy(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    service = _service(slug)
    can_edit = can_edit_team_objects(request.user, service.team)
    if request.method == "POST" and not can_edit:
        raise PermissionDenied(
            _("Only model owners of team %(team)s record gateway policy versions.")
            % {"team": service.team.slug}
        )
    in_force = _in_force(service)
    task_types = list(service.task_types.order_by("slug").values_list("slug", flat=True))
    form = GatewayPolicyForm(
        request.POST if request.method == "POST" else None,
        service=service,
        task_types=task_types,
        initial=GatewayPolicyForm.initial_from(in_force.document if in_force else None),
    )
    preview = None
    if request.method == "POST" and form.is_valid():
        preview = policy_preview(service, in_force, form.document())
        if request.POST.get("action") == "record":
            try:
                version = create_gateway_policy(
                    service,
                    actor=request.user,
                    document=preview.document,
                    note=form.cleaned_data["note"],
                )
            except ValidationError as error:
                apply_errors(form, error)
            else:
                messages.success(
                    request,
                    _(
                        "Recorded %(service)s gateway policy %(label)s. A revision that names "
                        "it brings it into force through a release."
                    )
                    % {"service": service.slug, "label": version.label},
                )
                return redirect(
                    "releases:gateway_policy_version", slug=slug, version=version.version
                )
    versions = paginate(request, service.gateway_policies.order_by("-version"))
    return render(
        request,
        "releases/gateway_policy.html",
        {
            "service": service,
            "in_force": in_force,
            "can_edit": can_edit,
            "form": form,
            "versions": versions,
            "config": service_config_yaml(service.slug),
            "preview": preview,
        },
        status=400 if form.errors else 200,
    )


@login_required
@require_GET
def gateway_policy_version(
    request: AuthenticatedHttpRequest, slug: str, version: int
) -> HttpResponse:
    service = _service(slug)
    found = get_object_or_404(
        GatewayPolicy.objects.select_related("created_by"), service=service, version=version
    )
    in_force = _in_force(service)
    revisions = Revision.objects.filter(gateway_policy=found).order_by("-number")
    return render(
        request,
        "releases/gateway_policy_version.html",
        {
            "service": service,
            "policy": found,
            "in_force": in_force,
            "revisions": revisions[:50],
            "can_file": in_force is not None
            and in_force.pk != found.pk
            and permissions.can_file_release(request.user, service),
            "changes": (
                policy_changes(in_force.document, found.document)
                if in_force is not None and in_force.pk != found.pk
                else []
            ),
        },
    )


@login_required
@post_only(
    "files a routing release for a gateway policy version", page="releases:gateway_policy_version"
)
def gateway_policy_release(
    request: AuthenticatedHttpRequest, slug: str, version: int
) -> HttpResponse:
    """A policy change is a routing release: make (or find) the revision like the live one
    running this version, and open the release form on it."""
    service = _service(slug)
    if not permissions.can_file_release(request.user, service):
        raise PermissionDenied(
            _("Only model owners of team %(team)s file releases of %(service)s.")
            % {"team": service.team.slug, "service": service.slug}
        )
    found = get_object_or_404(GatewayPolicy, service=service, version=version)
    try:
        candidate = revision_running(found, actor=request.user)
    except ValidationError as error:
        messages.error(request, " ".join(error.messages))
        return redirect("releases:gateway_policy_version", slug=slug, version=version)
    target = reverse("releases:release_new", args=[slug])
    return redirect(f"{target}?to_revision={candidate.pk}&change_kind=routing")
