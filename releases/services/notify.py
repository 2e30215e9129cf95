"""Tell signers, by email, that a release waits for them. Called from a verb's on_commit."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mass_mail
from django.urls import NoReverseMatch, reverse

from releases import policy
from releases.models import Release, SignOff

log = logging.getLogger("releases.notify")


def release_url(release: Release) -> str:
    try:
        path = reverse("releases:release_detail", kwargs={"pk": release.pk})
    except NoReverseMatch:  # the release page arrives with its own branch
        path = f"/releases/{release.pk}/"
    return settings.LEDGER_BASE_URL + path


def signers_for(release: Release, role: str) -> list:
    """The people who could sign `role` on `release` (the filer never)."""
    users = (
        get_user_model()
        .objects.filter(is_active=True, groups__name=policy.SIGNER_ROLES[role])
        .exclude(pk=release.filed_by_id)
    )
    if role == "model_team":
        users = users.filter(teams=release.service.team_id)
    return list(users.exclude(email="").distinct().order_by("username"))


def notify_signers(release_id: int, roles: Iterable[str], *, why: str) -> int:
    """One email to each person who could sign one of `roles`; returns how many went out."""
    release = Release.objects.select_related("service", "to_revision", "filed_by").get(
        pk=release_id
    )
    labels = dict(SignOff.Role.choices)
    messages = []
    for role in roles:
        for user in signers_for(release, role):
            subject = (
                f"Release #{release.pk} of {release.service.slug} waits for your sign-off "
                f"({labels[role].lower()})"
            )
            body = (
                f"{release.filed_by.get_username()} filed release #{release.pk}: "
                f"{release.service.slug} to {release.to_revision.label} "
                f"({release.get_change_kind_display().lower()}, {release.get_path_display()}).\n\n"
                f"{why}\n\n{release.summary}\n\nReview and sign: {release_url(release)}\n"
            )
            messages.append((subject, body, settings.DEFAULT_FROM_EMAIL, [user.email]))
    if messages:
        sent = send_mass_mail(messages, fail_silently=False)
        log.info("release %s: %s sign-off emails sent", release.pk, sent)
        return sent
    return 0


def notify_on_commit(release: Release, roles: Iterable[str], *, why: str) -> None:
    """After the verb's transaction commits, email the signers of `roles`.

    A mail server that is down must not undo (nor fail) a change already
    committed: the failure is logged, and the release page still shows who is
    awaited.
    """
    from django.db import transaction

    wanted = [r for r in roles]
    if not wanted:
        return
    release_id = release.pk

    def send() -> None:
        try:
            notify_signers(release_id, wanted, why=why)
        except Exception:
            log.exception("release %s: sign-off emails could not be sent", release_id)

    transaction.on_commit(send)
