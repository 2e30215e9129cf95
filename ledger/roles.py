"""The roles people hold, kept as Django groups (one group per role)."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.db import models


class Role(models.TextChoices):
    MODEL_OWNER = "model_owner", "Model owner"
    PLATFORM_SRE = "platform_sre", "Platform SRE"
    SECURITY_COMPLIANCE = "security_compliance", "Security & compliance"
    BUSINESS_OWNER = "business_owner", "Business owner"
    AUDITOR = "auditor", "Auditor"


ROLE_DUTIES: dict[str, str] = {
    Role.MODEL_OWNER: "register assets and runtimes, file release forms, drive gray rollouts",
    Role.PLATFORM_SRE: "check rollback paths, record rollbacks, sign off for the platform",
    Role.SECURITY_COMPLIANCE: "approve licenses, sign off security and compliance",
    Role.BUSINESS_OWNER: "sign off releases for the tenants a service serves",
    Role.AUDITOR: "read everything, filter and export records with proof of integrity",
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
