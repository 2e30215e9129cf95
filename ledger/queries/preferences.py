"""A user's reading preferences: language and time zone (blank: the browser's)."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from ledger.models import UserPreference


def preference_of(user: Any) -> UserPreference:
    """The user's preference, or an unsaved blank one."""
    return UserPreference.objects.filter(user=user).first() or UserPreference(user=user)


def languages_of(users: Any) -> dict[int, str]:
    """Each user's language for what is sent to them (emails): their preference, else
    the site's default (one query)."""
    chosen = dict(
        UserPreference.objects.filter(user__in=[u.pk for u in users])
        .exclude(language="")
        .values_list("user_id", "language")
    )
    return {user.pk: chosen.get(user.pk, settings.LANGUAGE_CODE) for user in users}
