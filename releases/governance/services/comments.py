"""Comments on a release: what anyone signed in adds to its discussion."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from ledger.chain import append_event
from lib.actors import Actor
from releases import permissions
from releases.models import Comment, Release

COMMENT_MAX_CHARS = 10_000


@transaction.atomic
def add_comment(release: Release, *, actor: Actor, body: str) -> Comment:
    permissions.ensure_can_comment(actor, release)
    if actor is None:
        raise ValidationError({"author": "A comment needs a person."})
    text = (body or "").strip()
    if not text:
        raise ValidationError({"body": "Write something: an empty comment says nothing."})
    if len(text) > COMMENT_MAX_CHARS:
        raise ValidationError(
            {
                "body": f"A comment holds at most {COMMENT_MAX_CHARS} characters; this has {len(text)}."
            }
        )
    comment = Comment.objects.create(
        release=release, author=actor, body=text, created_at=timezone.now()
    )
    append_event(
        actor=actor,
        action="release.commented",
        subject=release,
        payload={"comment": comment.pk, "body": text},
    )
    return comment
