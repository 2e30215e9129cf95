"""The roles people hold, kept as Django groups (one group per role)."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.db import models
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _


class Role(models.TextChoices):
    MODEL_OWNER = "model_owner", _("Model owner")
    PLATFORM_SRE = "platform_sre", _("Platform SRE")
    SECURITY_COMPLIANCE = "security_compliance", _("Security & compliance")
    BUSINESS_OWNER = "business_owner", _("Business owner")
    AUDITOR = "auditor", _("Auditor")
    TRACE_INGEST = "trace_ingest", _("Trace ingest")


StrOrPromise = str | Promise

# What each role can do in the product as it stands; a duty is added here when the
# feature that carries it lands, so the home page never promises what is not there.
ROLE_DUTIES: dict[str, StrOrPromise] = {
    Role.MODEL_OWNER: _(
        "register assets, runtimes and revisions of your team's services, attach load-test evidence, run replays, file release forms and sign off for the model team on your teammates' releases"
    ),
    Role.PLATFORM_SRE: _(
        "register backends, schedule and run replays, check what is live and how each service behaves, sign off releases for platform, waive a gate of platform's part (image, load evidence, metrics, replay, rollback and gray plans, decommission moves) with a reason and a bounded expiry, and conduct, conclude or reassign periodic reviews"
    ),
    Role.SECURITY_COMPLIANCE: _(
        "approve or reject model licenses, record the acceptance of gated terms, sign off releases for security & compliance, waive a gate of its part (license, provenance, logging) with a reason and a bounded expiry, and conduct, conclude or reassign periodic reviews"
    ),
    Role.BUSINESS_OWNER: _(
        "read every service, its evidence and its history, sign off releases for the business owner, and waive the gate of task fitness (every failure sample classified) with a reason and a bounded expiry"
    ),
    Role.AUDITOR: _(
        "read everything, filter the record on the Audit page, print any release's change record, export the record (CSV, JSON Lines or a signed evidence bundle) and verify the event chain's integrity"
    ),
    Role.TRACE_INGEST: _(
        "send OpenTelemetry traces to /api/otlp/v1/traces with an API token (a service account for the collector or gateway): the model calls' structured facts are kept, their content never"
    ),
}


def roles_of(user: User | AnonymousUser) -> list[Role]:
    """The roles a user holds, in declaration order (cached on the user object)."""
    if not user.is_authenticated:
        return []
    cached = getattr(user, "_ledger_roles", None)
    if cached is None:
        names = set(user.groups.values_list("name", flat=True))
        cached = [role for role in Role if role.value in names]
        # Cached on the object as Django's ModelBackend caches _perm_cache; User declares neither.
        user._ledger_roles = cached  # type: ignore[attr-defined]
    return cached


def has_role(user: User | AnonymousUser, role: Role) -> bool:
    return role in roles_of(user)


def permissions_of(user: User | AnonymousUser) -> frozenset[str]:
    """The Django permissions a user holds directly or through a role, as
    "app_label.codename", in one query (cached on the user object); Django's own
    `has_perm` takes two. Superusers are answered by `has_permission` without it."""
    if not user.is_authenticated or not user.is_active:
        return frozenset()
    cached = getattr(user, "_ledger_permissions", None)
    if cached is None:
        from django.contrib.auth.models import Permission
        from django.db.models import Q

        rows = (
            Permission.objects.filter(Q(user=user) | Q(group__user=user))
            .values_list("content_type__app_label", "codename")
            .distinct()
        )
        cached = frozenset(f"{app}.{codename}" for app, codename in rows)
        user._ledger_permissions = cached  # type: ignore[attr-defined]  # as _ledger_roles
    return cached


def has_permission(user: User | AnonymousUser, permission: str) -> bool:
    if user.is_authenticated and user.is_active and user.is_superuser:
        return True
    return permission in permissions_of(user)
