"""A minimal admin: read the releases and their reviews; changes go through the verbs."""

from __future__ import annotations

from django.contrib import admin

from releases.models import (
    BlackoutWindow,
    Comment,
    Drill,
    GatewayCheck,
    Release,
    SignOff,
    StandardChangeTemplate,
    Waiver,
)


class _ReadOnly(admin.ModelAdmin):
    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class SignOffInline(admin.TabularInline):
    model = SignOff
    extra = 0
    can_delete = False
    fields = (
        "role",
        "signer",
        "decision",
        "signed_at",
        "snapshot_hash",
        "voided_at",
        "void_reason",
    )
    readonly_fields = fields


class WaiverInline(admin.TabularInline):
    model = Waiver
    extra = 0
    can_delete = False
    fields = ("gate", "reason", "expires_at", "granted_by", "revoked_at")
    readonly_fields = fields


@admin.register(Release)
class ReleaseAdmin(_ReadOnly):
    list_display = [
        "id",
        "service",
        "to_revision",
        "change_kind",
        "path",
        "state",
        "filed_by",
        "created_at",
    ]
    list_filter = ["state", "path", "change_kind", "service__tier"]
    search_fields = ["service__slug", "summary"]
    list_select_related = ["service", "to_revision__service", "filed_by"]
    inlines = [SignOffInline, WaiverInline]


@admin.register(BlackoutWindow)
class BlackoutWindowAdmin(_ReadOnly):
    list_display = ["name", "service", "starts_at", "ends_at", "recurrence"]


@admin.register(StandardChangeTemplate)
class StandardChangeTemplateAdmin(_ReadOnly):
    list_display = ["key", "version", "tier", "change_kind", "retired_at"]


@admin.register(Comment)
class CommentAdmin(_ReadOnly):
    list_display = ["release", "author", "created_at"]


@admin.register(GatewayCheck)
class GatewayCheckAdmin(_ReadOnly):
    """What the last check of the running gateway found per service (rewritten by each)."""

    list_display = ["service", "state", "checked_at", "since"]
    list_filter = ["state"]
    search_fields = ["service__slug"]


@admin.register(Drill)
class DrillAdmin(_ReadOnly):
    list_display = ["pk", "name", "state", "window_starts_at", "created_by", "concluded_at"]
    list_filter = ["state"]
    search_fields = ["name", "business_event"]
