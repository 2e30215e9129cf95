"""What the comment verb refuses whoever calls it (the page and the API trim and bound the
body first; a task, a command or the demo call the verb directly): a comment without a
person, an empty one, one too long; and what a comment writes."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from ledger.models import Event
from releases.governance import services
from releases.models import Comment

pytestmark = pytest.mark.django_db


def test_a_comment_is_stored_trimmed_with_an_event(release, sre):
    comment = services.add_comment(release, actor=sre, body="  Is the rollback verified?\n")
    assert Comment.objects.get().body == "Is the rollback verified?"
    event = Event.objects.get(action="release.commented")
    assert event.actor == sre
    assert event.payload_data == {"comment": comment.pk, "body": "Is the rollback verified?"}


def test_a_comment_needs_a_person(release):
    with pytest.raises(ValidationError) as refused:
        services.add_comment(release, actor=None, body="from the system")
    assert refused.value.message_dict == {"author": ["A comment needs a person."]}
    assert not Comment.objects.exists()


def test_an_empty_comment_is_refused(release, sre):
    with pytest.raises(ValidationError) as refused:
        services.add_comment(release, actor=sre, body=" \n\t")
    assert refused.value.message_dict == {
        "body": ["Write something: an empty comment says nothing."]
    }
    assert not Event.objects.filter(action="release.commented").exists()


def test_a_comment_longer_than_ten_thousand_characters_is_refused_counting_them(release, sre):
    with pytest.raises(ValidationError) as refused:
        services.add_comment(release, actor=sre, body="x" * 10_001)
    assert refused.value.message_dict == {
        "body": ["A comment holds at most 10000 characters; this has 10001."]
    }
    # The surrounding blanks do not count: exactly the limit once trimmed is accepted.
    services.add_comment(release, actor=sre, body=" " + "x" * 10_000 + " ")
    assert len(Comment.objects.get().body) == 10_000


def test_an_auditor_does_not_comment(release, auditor):
    with pytest.raises(PermissionDenied, match="Only model owners and signers can comment"):
        services.add_comment(release, actor=auditor, body="looks fine")
    assert not Comment.objects.exists()
