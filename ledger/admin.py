"""Django admin for the ledger: a window onto the registry and the events, not a way around them.

Every registry change must be validated and recorded as an Event by a verb in
`ledger.services`, so the admin writes only where such a verb exists and only
through it: superusers create teams (and add members) and classify licenses.
Everything else is view-only here, events most of all.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, TypedDict

from django import forms
from django.contrib import admin, messages
from django.db import models
from django.db.models import Count
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.translation import gettext as _
from rest_framework.authtoken.admin import TokenAdmin as DRFTokenAdmin
from rest_framework.authtoken.models import TokenProxy

from ledger import services
from ledger.models import (
    Capability,
    Event,
    GatewayPolicy,
    License,
    LicenseAcceptance,
    ModelAsset,
    PriceSheet,
    Revision,
    Runtime,
    Service,
    TaskType,
    Team,
)
from ledger.permissions import can_manage_accounts
from ledger.services.accounts import token_prefix
from lib.actors import admin_actor

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations


class TeamAnnotations(TypedDict):
    """Set by `TeamAdmin.get_queryset`."""

    member_total: int


READ_ONLY_NOTICE = (
    "Read-only in the admin. Registry changes go through the ledger's domain verbs "
    "(the web pages, the REST API or `manage.py apply`), which validate them and "
    "record each one as an event in the hash-chained ledger."
)


class LedgerAdmin(admin.ModelAdmin):
    # Django 6 will assume https for scheme-less URLs; say so now.
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
    notice = ""

    def notice_for(self, request: HttpRequest, obj) -> str:
        """What the change page says about why it is (partly) read-only."""
        if obj is not None and not self.has_change_permission(request, obj):
            return self.notice
        return ""

    def get_fieldsets(self, request: HttpRequest, obj=None):
        fieldsets = super().get_fieldsets(request, obj)
        notice = self.notice_for(request, obj)
        if notice:
            name, options = fieldsets[0]
            fieldsets = [(name, {**options, "description": notice}), *fieldsets[1:]]
        return fieldsets


class ReadOnlyAdmin(LedgerAdmin):
    """View only, for everyone including superusers."""

    notice = READ_ONLY_NOTICE

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


# ---------------------------------------------------------------- written through verbs


class TeamAdminForm(forms.ModelForm):
    class Meta:
        model = Team
        fields = ["slug", "name", "members"]

    def clean_members(self):
        members = self.cleaned_data["members"]
        if self.instance.pk:
            removed = set(self.instance.members.all()) - set(members)
            if removed:
                names = ", ".join(sorted(user.get_username() for user in removed))
                raise forms.ValidationError(
                    _(
                        "Members cannot be removed here yet (%(names)s): the ledger has no verb "
                        "that records a removal. Members can be added."
                    )
                    % {"names": names}
                )
        return members


@admin.register(Team)
class TeamAdmin(LedgerAdmin):
    """Superusers create teams and add members (`create_team`, `add_team_member`).

    Slug and name cannot be edited and members cannot be removed: no verb records those.
    """

    form = TeamAdminForm
    list_display = ["slug", "name", "member_count"]
    list_filter = [("members", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["slug", "name", "members__username"]
    list_select_related = False  # no foreign keys; members are counted in the query
    filter_horizontal = ["members"]

    def get_queryset(self, request: HttpRequest):
        return super().get_queryset(request).annotate(member_total=Count("members"))

    @admin.display(description="members", ordering="member_total")
    def member_count(self, team: WithAnnotations[Team, TeamAnnotations]) -> int:
        return team.member_total

    def get_readonly_fields(self, request: HttpRequest, obj=None):
        return ["slug", "name"] if obj is not None else []

    def notice_for(self, request: HttpRequest, obj) -> str:
        if obj is None:
            return ""
        return (
            "Slug and name cannot change and members cannot be removed: the ledger has no "
            "verb that records those yet. Members added here are recorded as events."
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return request.user.is_superuser

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return request.user.is_superuser

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: Team, form, change: bool) -> None:
        if not change:
            team = services.create_team(
                actor=admin_actor(request),
                slug=obj.slug,
                name=obj.name,
                members=list(form.cleaned_data["members"]),
            )
            obj.pk = team.pk
            return
        current = set(obj.members.all())
        for user in form.cleaned_data["members"]:
            if user not in current:
                services.add_team_member(obj, user, actor=admin_actor(request))

    def save_related(self, request: HttpRequest, form, formsets, change: bool) -> None:
        # Members were written by the verbs in save_model; form.save_m2m() would write around them.
        pass


@admin.register(License)
class LicenseAdmin(LedgerAdmin):
    """Superusers classify new licenses (`create_license`); no verb edits one yet."""

    notice = "A license cannot be edited here yet: the ledger has no verb that records a change."
    list_display = ["spdx_id", "name", "kind", "gated"]
    list_filter = ["kind", "gated"]
    search_fields = ["spdx_id", "name"]
    list_select_related = False  # no foreign keys

    def has_add_permission(self, request: HttpRequest) -> bool:
        return request.user.is_superuser

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: License, form, change: bool) -> None:
        license_ = services.create_license(
            actor=admin_actor(request),
            spdx_id=obj.spdx_id,
            name=obj.name,
            kind=obj.kind,
            gated=obj.gated,
            terms_url=obj.terms_url,
        )
        obj.pk = license_.pk


# ---------------------------------------------------------------- view only


@admin.register(TaskType)
class TaskTypeAdmin(ReadOnlyAdmin):
    """Task types appear when a service names them; no verb creates or renames one."""

    list_display = ["slug", "name"]
    list_filter = [("services", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["slug", "name"]
    list_select_related = False  # no foreign keys


@admin.register(Service)
class ServiceAdmin(ReadOnlyAdmin):
    list_display = [
        "slug",
        "name",
        "team",
        "tier",
        "exposure",
        "live_revision",
        "review_cadence_days",
        "updated_at",
    ]
    list_filter = ["tier", "exposure", "team", "task_types"]
    search_fields = ["slug", "name", "description", "team__slug"]
    list_select_related = ["team", "live_revision__service"]


@admin.register(ModelAsset)
class ModelAssetAdmin(ReadOnlyAdmin):
    list_display = [
        "name",
        "revision",
        "family",
        "quantization",
        "derivation",
        "license",
        "license_approval",
        "lifecycle",
        "team",
    ]
    list_filter = ["lifecycle", "license_approval", "quantization", "derivation", "license", "team"]
    search_fields = ["name", "revision", "family", "source_repository", "weights_digest"]
    list_select_related = ["team", "license"]


@admin.register(Runtime)
class RuntimeAdmin(ReadOnlyAdmin):
    list_display = [
        "name",
        "engine",
        "engine_version",
        "image",
        "gpu_model",
        "gpu_count",
        "cuda_version",
        "driver_version",
        "team",
    ]
    list_filter = ["engine", "gpu_model", "team"]
    search_fields = ["name", "engine_version", "image", "cuda_version", "driver_version"]
    list_select_related = ["team"]


@admin.register(GatewayPolicy)
class GatewayPolicyAdmin(ReadOnlyAdmin):
    list_display = ["service", "label", "version", "sha256", "created_at"]
    search_fields = ["service__slug", "label"]
    list_select_related = ["service"]


@admin.register(PriceSheet)
class PriceSheetAdmin(ReadOnlyAdmin):
    list_display = [
        "gpu_model",
        "price_per_gpu_hour",
        "currency",
        "effective_from",
        "recorded_by",
        "recorded_at",
    ]
    list_filter = ["gpu_model", "currency"]
    search_fields = ["gpu_model", "note"]
    list_select_related = ["recorded_by"]


@admin.register(Revision)
class RevisionAdmin(ReadOnlyAdmin):
    list_display = [
        "__str__",
        "model_asset",
        "runtime",
        "context_limit",
        "gateway_policy_version",
        "fingerprint",
        "served_at",
        "created_at",
    ]
    list_filter = ["service__tier", "runtime__engine", ("served_at", admin.EmptyFieldListFilter)]
    search_fields = ["service__slug", "fingerprint", "model_asset__name", "runtime__name"]
    list_select_related = ["service", "model_asset", "runtime", "gateway_policy"]


@admin.register(Capability)
class CapabilityAdmin(ReadOnlyAdmin):
    list_display = ["__str__", "kind", "status", "verified_at"]
    list_filter = ["kind", "status"]
    search_fields = ["revision__service__slug", "verified_fingerprint"]
    list_select_related = ["revision__service"]


@admin.register(LicenseAcceptance)
class LicenseAcceptanceAdmin(ReadOnlyAdmin):
    list_display = [
        "model_asset",
        "license",
        "terms_version",
        "accepted_by",
        "accepted_at",
        "recorded_by",
    ]
    list_filter = ["license", "accepted_at"]
    search_fields = ["accepted_by", "terms_version", "model_asset__name", "license__spdx_id"]
    list_select_related = ["model_asset", "license", "recorded_by"]


@admin.register(Event)
class EventAdmin(ReadOnlyAdmin):
    """The ledger itself: append-only, for everyone (a database trigger refuses the rest)."""

    notice = (
        "Events are append-only: nobody changes or deletes them, administrators included. "
        "`manage.py verify_ledger` (or GET /api/events/verify/) checks the whole chain."
    )
    list_display = [
        "sequence",
        "created_at",
        "actor_label",
        "action",
        "subject_type",
        "subject_id",
        "subject_label",
    ]
    list_filter = ["action", "subject_type", "created_at"]
    search_fields = ["action", "actor_label", "subject_id", "subject_label", "hash"]
    # actor_label is the record of who acted; the actor row itself is not shown.
    list_select_related = False
    date_hierarchy = "created_at"
    readonly_fields = [
        "sequence",
        "created_at",
        "actor_label",
        "action",
        "subject_type",
        "subject_id",
        "subject_label",
        "payload_pretty",
        "prev_hash",
        "hash",
    ]
    fields = list(readonly_fields)  # all shown, none editable

    @admin.display(description="payload")
    def payload_pretty(self, event: Event) -> str:
        text = json.dumps(event.payload_data, indent=2, sort_keys=True, ensure_ascii=False)
        return format_html("<pre>{}</pre>", text)


# ---------------------------------------------------------------- API tokens
# rest_framework.authtoken's admin showed every key whole: in the list, and, since
# a token's str() is its key, in the titles of its change, delete and history
# pages and in the admin's "Recent actions". A key is now shown whole once, in
# the message after it is created, and as its first characters everywhere after.


# TokenProxy is the model DRF made for its admin alone; its str() is what every
# admin page and log entry shows of a token.
def _token_str(token: TokenProxy) -> str:
    return f"{token_prefix(token.key)} ({token.user})"


setattr(TokenProxy, "__str__", _token_str)  # noqa: B010 - a method of DRF's own model


admin.site.unregister(TokenProxy)


@admin.register(TokenProxy)
class TokenAdmin(DRFTokenAdmin):
    list_display = ("key_prefix", "user", "created")

    @admin.display(description="key", ordering="key")
    def key_prefix(self, token: TokenProxy) -> str:
        return token_prefix(token.key)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return can_manage_accounts(request.user)

    def has_view_permission(self, request: HttpRequest, obj=None) -> bool:
        return can_manage_accounts(request.user)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return can_manage_accounts(request.user)

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False  # a token is issued or revoked, never edited

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return can_manage_accounts(request.user)

    def save_model(self, request: HttpRequest, obj, form, change) -> None:
        # Issued by the verb, which records it; DRF's form only chose the user.
        obj.key = services.issue_api_token(obj.user, actor=admin_actor(request))
        obj._state.adding = False
        messages.success(
            request,
            _("New API token for %(user)s: %(key)s. Copy it now: it is not shown again.")
            % {"user": obj.user, "key": obj.key},
        )

    def delete_model(self, request: HttpRequest, obj) -> None:
        services.revoke_api_token(obj.user, actor=admin_actor(request))

    def delete_queryset(self, request: HttpRequest, queryset) -> None:
        for token in queryset.select_related("user"):
            services.revoke_api_token(token.user, actor=admin_actor(request))


# People, roles, teams and tokens (registers the User admin).
from ledger import admin_accounts  # noqa: E402, F401
