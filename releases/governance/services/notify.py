"""Tell signers, by email, that a release waits for them. Called from a verb's on_commit.

Each email is written in its recipient's language (their preference, else the site's
default), whoever caused it: `why` arrives as an English message marked for the
catalog (gettext_noop) with its parameters, and is translated per recipient.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mass_mail
from django.db import transaction
from django.urls import NoReverseMatch, reverse
from django.utils import translation
from django.utils.translation import gettext as _

from ledger.queries.preferences import languages_of
from releases import policy
from releases.models import Release, SignOff, Waiver

log = logging.getLogger("releases.notify")


def release_url(release: Release) -> str:
    try:
        path = reverse("releases:release_detail", kwargs={"pk": release.pk})
    except NoReverseMatch:  # the release page arrives with its own branch
        path = f"/releases/{release.pk}/"
    return settings.LEDGER_BASE_URL + path


def signers_for(release: Release, role: str) -> list:
    """The people who could sign `role` on `release`: never the filer, nor whoever
    waived a gate that role owns (`permissions.signoff_refusal`)."""
    waived = Waiver.objects.filter(
        release=release, revoked_at__isnull=True, gate__in=policy.gates_waived_by(role)
    ).values("granted_by")
    users = (
        get_user_model()
        .objects.filter(is_active=True, groups__name=policy.SIGNER_ROLES[role])
        .exclude(pk=release.filed_by_id)
        .exclude(pk__in=waived)
    )
    if role == "model_team":
        users = users.filter(teams=release.service.team_id)
    return list(users.exclude(email="").distinct().order_by("username"))


def _message(release: Release, role: str, why: str, why_params: dict[str, str]) -> tuple[str, str]:
    """Subject and body in the active language."""
    labels = dict(SignOff.Role.choices)
    subject = _("Release #%(release)s of %(service)s waits for your sign-off (%(role)s)") % {
        "release": release.pk,
        "service": release.service.slug,
        "role": _(labels[role]).lower(),
    }
    body = _(
        "%(filer)s filed release #%(release)s: %(service)s to %(revision)s (%(kind)s, %(path)s)."
        "\n\n%(why)s\n\n%(summary)s\n\nReview and sign: %(url)s\n"
    ) % {
        "filer": release.filed_by.get_username(),
        "release": release.pk,
        "service": release.service.slug,
        "revision": release.to_revision.label,
        "kind": _(release.get_change_kind_display()).lower(),
        "path": _(release.get_path_display()),
        "why": _(why) % why_params if why_params else _(why),
        "summary": release.summary,
        "url": release_url(release),
    }
    return subject, body


def notify_signers(
    release_id: int, roles: Iterable[str], *, why: str, why_params: dict[str, str] | None = None
) -> int:
    """One email to each person who could sign one of `roles`, in their language;
    returns how many went out."""
    release = Release.objects.select_related("service", "to_revision", "filed_by").get(
        pk=release_id
    )
    recipients = [(role, user) for role in roles for user in signers_for(release, role)]
    languages = languages_of([user for _role, user in recipients])
    messages = []
    for role, user in recipients:
        with translation.override(languages[user.pk]):
            subject, body = _message(release, role, why, why_params or {})
        messages.append((subject, body, settings.DEFAULT_FROM_EMAIL, [user.email]))
    if messages:
        sent = send_mass_mail(messages, fail_silently=False)
        log.info("release %s: %s sign-off emails sent", release.pk, sent)
        return sent
    return 0


def notify_on_commit(
    release: Release,
    roles: Iterable[str],
    *,
    why: str,
    why_params: dict[str, str] | None = None,
) -> None:
    """After the verb's transaction commits, email the signers of `roles`.

    A mail server that is down must not undo (nor fail) a change already
    committed: the failure is logged, and the release page still shows who is
    awaited.
    """
    wanted = [r for r in roles]
    if not wanted:
        return
    release_id = release.pk

    def send() -> None:
        try:
            notify_signers(release_id, wanted, why=why, why_params=why_params)
        except Exception:
            log.exception("release %s: sign-off emails could not be sent", release_id)

    transaction.on_commit(send)
