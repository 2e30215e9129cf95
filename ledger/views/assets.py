"""Model asset pages and forms: what each model artifact is, where it came from, its license."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.db.models import F
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods
from django.views.decorators.vary import vary_on_headers

from ledger import queries, services
from ledger.forms import ASSET_FIELDS, AssetForm, AssetListFilter, LifecycleForm
from ledger.models import ModelAsset
from ledger.permissions import (
    can_approve_licenses,
    can_create,
    can_edit_team_objects,
    can_record_license_acceptance,
    editable_teams,
    ensure_can_create,
    ensure_can_edit,
)
from lib.actors import AuthenticatedHttpRequest
from lib.http import post_only
from lib.ids import row_id
from lib.pages import apply_errors, changed_values, paginate, render_field, render_form, render_list


@require_GET
@login_required
@vary_on_headers("HX-Request")
def asset_list(request: AuthenticatedHttpRequest) -> HttpResponse:
    assets = AssetListFilter(
        request.GET or None,
        queryset=ModelAsset.objects.select_related("team", "license", "derived_from").order_by(
            "name", "revision"
        ),
        request=request,
    )
    context = {
        "filter": assets,
        "page": paginate(request, assets.qs),
        "filtered": any(request.GET.get(name) for name in assets.filters),
        "can_create": can_create(request.user),
    }
    return render_list(request, "ledger/asset_list.html", context)


def _asset(pk: int) -> ModelAsset:
    return get_object_or_404(ModelAsset.objects.select_related("team", "license"), pk=pk)


@require_GET
@login_required
def asset_detail(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    asset = _asset(pk)
    revisions = list(
        asset.revisions.select_related("service", "runtime")
        .annotate(live_id=F("service__live_revision"))
        .order_by("service__slug", "-number")
    )
    context = {
        "asset": asset,
        "lineage": asset.lineage(),
        "derivatives": list(asset.derivatives.order_by("name", "revision")),
        "acceptances": list(asset.license_acceptances.select_related("license")),
        "revisions": revisions,
        "lock_reasons": asset.lock_reasons(),
        "can_edit": can_edit_team_objects(request.user, asset.team),
        "review": queries.latest_license_review(asset),
        "can_review_license": can_approve_licenses(request.user),
        "can_record_acceptance": asset.license.gated
        and can_record_license_acceptance(request.user, asset),
    }
    return render(request, "ledger/asset_detail.html", context)


def _prefill(pk: str | None) -> dict:
    """'New asset from this one': every field but the artifact's own revision."""
    found = row_id(pk)
    if found is None:
        return {}
    source = ModelAsset.objects.filter(pk=found).first()
    if source is None:
        return {}
    attnames = {f.name: f.attname for f in ModelAsset._meta.concrete_fields}
    return {name: getattr(source, attnames[name]) for name in ASSET_FIELDS if name != "revision"}


@login_required
@require_http_methods(["GET", "POST"])
def asset_create(request: AuthenticatedHttpRequest) -> HttpResponse:
    teams = ensure_can_create(request.user)
    form = AssetForm(
        request.POST if request.method == "POST" else None,
        teams=teams,
        initial=_prefill(request.GET.get("from")),
        validate_url=reverse("ledger:asset_create_validate"),
    )
    if request.method == "POST" and form.is_valid():
        try:
            asset = services.register_asset(actor=request.user, **form.cleaned_data)
        except ValidationError as error:
            apply_errors(form, error)
        else:
            messages.success(request, _("Registered %(asset)s.") % {"asset": asset})
            return redirect("ledger:asset_detail", pk=asset.pk)
    return render_form(
        request,
        form,
        title=_("Register a model asset"),
        intro=_("Every digest is checked as you type; nothing is saved until you register."),
        submit=_("Register asset"),
        cancel_url=reverse("ledger:asset_list"),
    )


@post_only("checks one field of the new-asset form as you type", page="ledger:asset_create")
@login_required
def asset_create_validate(request: AuthenticatedHttpRequest) -> HttpResponse:
    teams = ensure_can_create(request.user)
    return render_field(request, AssetForm(request.POST, validate_url=request.path, teams=teams))


def _asset_for_edit(request: AuthenticatedHttpRequest, pk: int) -> ModelAsset:
    asset = _asset(pk)
    ensure_can_edit(request.user, asset.team)
    return asset


@login_required
@require_http_methods(["GET", "POST"])
def asset_edit(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    asset = _asset_for_edit(request, pk)
    title = _("Edit %(asset)s") % {"asset": asset}
    lock_reasons = asset.lock_reasons()
    form = AssetForm(
        request.POST if request.method == "POST" else None,
        instance=asset,
        teams=editable_teams(request.user),
        locked=bool(lock_reasons),
        validate_url=reverse("ledger:asset_edit_validate", args=[pk]),
    )
    if request.method == "POST" and form.is_valid():
        stored = ModelAsset.objects.select_related("team").get(pk=pk)
        try:
            changed = services.update_asset(stored, actor=request.user, **changed_values(form))
        except ValidationError as error:
            apply_errors(form, error)
        else:
            messages.success(request, "Saved." if changed else "Nothing changed.")
            return redirect("ledger:asset_detail", pk=pk)
    return render_form(
        request,
        form,
        title=title,
        submit=_("Save asset"),
        cancel_url=reverse("ledger:asset_detail", args=[pk]),
        lock_reasons=lock_reasons,
        new_from_url=f"{reverse('ledger:asset_create')}?from={pk}",
        new_from_label=_("Register a new asset from this one"),
    )


@post_only("checks one field of the asset form as you type", page="ledger:asset_edit")
@login_required
def asset_edit_validate(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    asset = _asset_for_edit(request, pk)
    form = AssetForm(
        request.POST,
        validate_url=request.path,
        instance=asset,
        teams=editable_teams(request.user),
        locked=bool(asset.lock_reasons()),
    )
    return render_field(request, form)


def _lifecycle_change(request: AuthenticatedHttpRequest, pk: int, *, retire: bool) -> HttpResponse:
    asset = _asset_for_edit(request, pk)
    live_revisions = list(
        asset.revisions.filter(service__live_revision=F("pk")).select_related("service")
    )
    refused = services.lifecycle_refusal(asset, retire=retire)
    form = LifecycleForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and not refused and form.is_valid():
        verb = services.retire_asset if retire else services.deprecate_asset
        try:
            verb(asset, actor=request.user, on=form.cleaned_data["on"])
        except ValidationError as error:
            apply_errors(form, error)
        else:
            done = _("Retired %(asset)s.") if retire else _("Deprecated %(asset)s.")
            messages.success(request, done % {"asset": asset})
            return redirect("ledger:asset_detail", pk=pk)
    context = {
        "asset": asset,
        "form": form,
        "retire": retire,
        "refused": refused,
        "live_revisions": live_revisions,
    }
    return render(request, "ledger/asset_lifecycle_confirm.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def asset_deprecate(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    """GET asks for confirmation and says what will happen; POST deprecates."""
    return _lifecycle_change(request, pk, retire=False)


@login_required
@require_http_methods(["GET", "POST"])
def asset_retire(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    """GET asks for confirmation and says what will happen; POST retires."""
    return _lifecycle_change(request, pk, retire=True)
