"""What every release verb shares: the row lock, the state refusal, and approval.

Below the verbs (`lifecycle`, `signoffs`, `rollout`, `rollbacks`), which import it and
never each other both ways.
"""

from __future__ import annotations

from django.utils import timezone

from ledger.chain import append_event
from lib.actors import Actor
from releases.governance.services.errors import TransitionRefused
from releases.models import Release
from releases.transitions import Action


def lock_release(release: Release | int) -> Release:
    """The release row, locked until commit, with what the verbs read."""
    pk = release.pk if isinstance(release, Release) else release
    return (
        Release.objects.select_for_update(of=("self",))
        .select_related("service__team", "to_revision", "from_revision", "filed_by")
        .get(pk=pk)
    )


def refuse_unless(release: Release, action: Action) -> None:
    """Refuse `action` where the state machine (`releases.transitions`) does not apply it."""
    refusal = release.refusal(action)
    if refusal is not None:
        raise TransitionRefused(refusal, state=release.state)


def approve(release: Release, *, actor: Actor, why: str) -> None:
    """submitted → approved (inside a verb that holds the lock)."""
    release.state = Release.State.APPROVED
    release.approved_at = timezone.now()
    release.save(update_fields=["state", "approved_at", "updated_at"])
    append_event(actor=actor, action="release.approved", subject=release, payload={"why": why})
