"""Revision pages and forms: what one service runs, exactly, and what it can do."""

from __future__ import annotations

import json
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_GET, require_http_methods

from ledger import queries, services
from ledger.cyclonedx import MEDIA_TYPE, revision_bom
from ledger.forms import CapabilityForm, RevisionForm
from ledger.models import Capability, Revision, Service
from ledger.permissions import can_edit_team_objects, ensure_can_edit
from ledger.views._common import service_for_edit
from ledger.views.loadtests import revision_evidence
from lib.actors import AuthenticatedHttpRequest
from lib.http import post_only
from lib.ids import row_id
from lib.pages import apply_errors, render_field, render_form

COMPONENT_LABELS = {
    "weights_digest": gettext_lazy("Weights digest"),
    "tokenizer_digest": gettext_lazy("Tokenizer digest"),
    "chat_template_digest": gettext_lazy("Chat template digest"),
    "generation_config_digest": gettext_lazy("Generation config digest"),
    "image_digest": gettext_lazy("Image digest"),
    "launch_parameters": gettext_lazy("Launch parameters"),
    "context_limit": gettext_lazy("Context limit (tokens)"),
}


def _revision(slug: str, number: int) -> Revision:
    return get_object_or_404(
        Revision.objects.select_related(
            "service__team",
            "service__live_revision",
            "model_asset__license",
            "runtime",
            "gateway_policy",
            "based_on",
            "created_by",
        ),
        service__slug=slug,
        number=number,
    )


@require_GET
@login_required
def revision_cyclonedx(request: AuthenticatedHttpRequest, slug: str, number: int) -> HttpResponse:
    """The revision's ML-BOM as a file to keep beside the release record."""
    revision = _revision(slug, number)
    response = HttpResponse(
        json.dumps(revision_bom(revision), indent=2, sort_keys=True), content_type=MEDIA_TYPE
    )
    response["Content-Disposition"] = f'attachment; filename="{slug}-{revision.label}.cdx.json"'
    return response


@require_GET
@login_required
def revision_detail(request: AuthenticatedHttpRequest, slug: str, number: int) -> HttpResponse:
    revision = _revision(slug, number)
    check = queries.fingerprint_check(revision)
    rows = [
        {"label": COMPONENT_LABELS.get(name, name), "value": value}
        for name, value in check.components.items()
    ]
    lock_reasons = revision.lock_reasons()
    can_edit = can_edit_team_objects(request.user, revision.service.team)
    context = {
        "revision": revision,
        "license_warnings": queries.license_warnings(
            queries.license_findings(revision.service, revision)
        ),
        "service": revision.service,
        "components": rows,
        "fingerprint_stale": check.stale,
        "same": list(queries.same_fingerprint(revision).order_by("service__slug", "number")),
        "capabilities": queries.capabilities_of(revision),
        "lock_reasons": lock_reasons,
        "is_live": revision.service.live_revision_id == revision.pk,
        "can_edit": can_edit,
        # A served revision may gain new capabilities but not change declared ones.
        "can_declare": can_edit and not lock_reasons,
        # Evidence may be attached to any revision, locked or not.
        **revision_evidence(revision, can_upload=can_edit),
    }
    return render(request, "ledger/revision_detail.html", context)


@post_only(
    "opens the form for a new revision prefilled from this one (New revision from this one)",
    page="ledger:revision_detail",
)
@login_required
def revision_new_from(request: AuthenticatedHttpRequest, slug: str, number: int) -> HttpResponse:
    """'New revision from this one': open the revision form prefilled with its parts."""
    revision = _revision(slug, number)
    ensure_can_edit(request.user, revision.service.team)
    url = reverse("ledger:revision_create", args=[slug])
    return redirect(f"{url}?{urlencode({'from': revision.number})}", permanent=False)


def _copy_source(service: Service, number: str | None) -> Revision | None:
    """The revision named by `?from=<number>`, when it is one of this service's."""
    found = row_id(number)
    if found is None:
        return None
    return (
        service.revisions.select_related("model_asset__team", "runtime")
        .filter(number=found)
        .first()
    )


def _prefill(based_on: Revision | None) -> dict:
    """Everything the source revision had, its runtime and model asset included."""
    if based_on is None:
        return {}
    return {
        "model_asset": based_on.model_asset_id,
        "runtime": based_on.runtime_id,
        "context_limit": based_on.context_limit,
        "gateway_policy_version": based_on.gateway_policy_version,
        "notes": f"Based on {based_on.label}. ",
        "based_on": based_on.pk,
    }


@login_required
@require_http_methods(["GET", "POST"])
def revision_create(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    service = service_for_edit(request, slug)
    copy_of = _copy_source(service, request.GET.get("from")) if request.method == "GET" else None
    form = RevisionForm(
        request.POST if request.method == "POST" else None,
        service=service,
        copy_of=copy_of,
        initial=_prefill(copy_of),
        validate_url=reverse("ledger:revision_create_validate", args=[slug]),
    )
    if request.method == "POST" and form.is_valid():
        fields = dict(form.cleaned_data)
        source = fields.pop("based_on", None)
        try:
            if source is not None:
                revision = services.new_revision_from(source, actor=request.user, **fields)
            else:
                revision = services.create_revision(service, actor=request.user, **fields)
        except ValidationError as error:
            apply_errors(form, error)
        else:
            messages.success(
                request,
                _("Created %(service)s %(revision)s.")
                % {"service": service.slug, "revision": revision.label},
            )
            left_behind = queries.capabilities_left_behind(revision)
            if left_behind:
                messages.warning(
                    request,
                    _(
                        "Not copied from %(source)s, as they do not fit this revision: "
                        "%(kinds)s. Declare them again if they hold."
                    )
                    % {"source": source.label, "kinds": ", ".join(left_behind)},
                )
            return redirect("ledger:revision_detail", slug=slug, number=revision.number)
    based_on = form["based_on"].value()
    return render_form(
        request,
        form,
        title=_("New revision of %(service)s") % {"service": service.slug},
        intro=(
            _("Prefilled from an earlier revision: change what differs.")
            if based_on
            else _(
                "A revision is what a release rolls out and rolls back to: "
                "model asset + runtime + context limit + gateway policy."
            )
        ),
        submit=_("Create revision"),
        cancel_url=reverse("releases:service_detail", args=[slug]),
    )


@post_only("checks one field of the new-revision form as you type", page="ledger:revision_create")
@login_required
def revision_create_validate(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    service = service_for_edit(request, slug)
    return render_field(
        request, RevisionForm(request.POST, validate_url=request.path, service=service)
    )


def _revision_for_edit(request: AuthenticatedHttpRequest, slug: str, number: int) -> Revision:
    revision = _revision(slug, number)
    ensure_can_edit(request.user, revision.service.team)
    return revision


@login_required
@require_http_methods(["GET", "POST"])
def capability_declare(request: AuthenticatedHttpRequest, slug: str, number: int) -> HttpResponse:
    revision = _revision_for_edit(request, slug, number)
    initial = {}
    kind = request.GET.get("kind")
    if kind:
        existing = revision.capabilities.filter(kind=kind).first()
        initial = {"kind": kind, "value": existing.value if existing else None}
    form = CapabilityForm(
        request.POST if request.method == "POST" else None,
        revision=revision,
        initial=initial,
        validate_url=reverse("ledger:capability_declare_validate", args=[slug, number]),
    )
    if request.method == "POST" and form.is_valid():
        try:
            capability = services.declare_capability(
                revision,
                actor=request.user,
                kind=form.cleaned_data["kind"],
                value=form.cleaned_data["value"],
            )
        except ValidationError as error:
            apply_errors(form, error)
        else:
            messages.success(
                request,
                _("Declared %(kind)s for %(service)s %(revision)s.")
                % {
                    "kind": _(capability.get_kind_display()).lower(),
                    "service": slug,
                    "revision": revision.label,
                },
            )
            return redirect("ledger:revision_detail", slug=slug, number=number)
    return render_form(
        request,
        form,
        title=_("Declare a capability of %(service)s %(revision)s")
        % {"service": slug, "revision": revision.label},
        submit=_("Declare capability"),
        cancel_url=reverse("ledger:revision_detail", args=[slug, number]),
        examples=[
            (_(label), services.CAPABILITY_EXAMPLES[value])
            for value, label in Capability.Kind.choices
        ],
    )


@post_only("checks one field of the capability form as you type", page="ledger:revision_detail")
@login_required
def capability_declare_validate(
    request: AuthenticatedHttpRequest, slug: str, number: int
) -> HttpResponse:
    revision = _revision_for_edit(request, slug, number)
    return render_field(
        request, CapabilityForm(request.POST, validate_url=request.path, revision=revision)
    )
