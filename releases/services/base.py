"""What every release verb shares: the row lock, the state refusal, and approval.

Below the verbs (`lifecycle`, `signoffs`, `rollout`, `rollbacks`), which import it and
never each other both ways.
"""

from __future__ import annotations

from django.utils import timezone

from ledger.chain import append_event
from lib.actors import Actor
from releases.models import Release
from releases.services.errors import TransitionRefused


def lock_release(release: Release | int) -> Release:
    """The release row, locked until commit, with what the verbs read."""
    pk = release.pk if isinstance(release, Release) else release
    return (
        Release.objects.select_for_update(of=("self",))
        .select_related("service__team", "to_revision", "from_revision", "filed_by")
        .get(pk=pk)
    )


def refuse_unless(release: Release, allowed: tuple[str, ...], doing: str) -> None:
    if release.state not in allowed:
        words = " or ".join(Release.State(s).label.lower() for s in allowed)
        raise TransitionRefused(
            f"Release #{release.pk} is {release.get_state_display().lower()}; "
            f"only a {words} release can be {doing}.",
            state=release.state,
        )


def approve(release: Release, *, actor: Actor, why: str) -> None:
    """submitted → approved (inside a verb that holds the lock)."""
    release.state = Release.State.APPROVED
    release.approved_at = timezone.now()
    release.save(update_fields=["state", "approved_at", "updated_at"])
    append_event(actor=actor, action="release.approved", subject=release, payload={"why": why})
