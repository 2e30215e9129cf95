"""The state machine (`releases.transitions`) is what the verbs and the release page
both follow: every (state, action) pair walked through the verb and through the page
of the person who would act."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from ledger import services as ledger_services
from releases.governance import services
from releases.governance.services import GatesNotPassed, TransitionRefused
from releases.models import Release
from releases.transitions import TRANSITIONS, Action
from tests.factories import UserFactory
from tests.releases.factories import approve, observe, roll_out

pytestmark = pytest.mark.django_db

# The states each action applies to on the normal path, as the verbs refused before the
# table stated them once.
APPLIES = {
    Action.EDIT: {"draft", "submitted", "approved"},
    Action.SUBMIT: {"draft"},
    Action.WITHDRAW: {"draft", "submitted", "approved"},
    Action.REOPEN: {"rejected", "withdrawn"},
    Action.SIGN: {"submitted", "approved", "rolling_out"},
    Action.WAIVE: {"draft", "submitted", "approved", "rolling_out"},
    Action.START_ROLLOUT: {"approved"},
    Action.OBSERVE: {"rolling_out"},
    Action.PROMOTE: {"rolling_out"},
    Action.HOLD: {"rolling_out"},
    Action.ABORT: {"rolling_out"},
    Action.ROLL_BACK: {"rolling_out", "released"},
    Action.CLOSE: {"released", "aborted", "rolled_back"},
}
GOOD = {"requests": 1200, "ttft_p95_ms": 640, "error_rate_pct": 0.2, "json_valid_pct": 99.5}


def _released(release: Release, owner, signers, sre) -> Release:
    roll_out(release, owner, signers)
    # The emergency path promotes before the observation window ends.
    Release.objects.filter(pk=release.pk).update(path="emergency", emergency_reason="OOM")
    for _ in range(2):
        observe(release, sre, GOOD)
        services.promote_release(release, actor=sre)
    release.refresh_from_db()
    return release


def _bring(state: str, release: Release, world, owner, signers, sre) -> Release:
    """`release` (a complete draft) taken to `state` by the verbs."""
    if state == "submitted":
        services.submit_release(release, actor=owner)
    elif state == "approved":
        approve(release, owner, signers)
    elif state == "rejected":
        services.submit_release(release, actor=owner)
        services.sign_off(
            release, actor=signers["platform"], role="platform", decision="reject", comment="no"
        )
    elif state == "withdrawn":
        services.withdraw_release(release, actor=owner, reason="not this quarter")
    elif state == "rolling_out":
        roll_out(release, owner, signers)
    elif state == "aborted":
        roll_out(release, owner, signers)
        services.abort_release(release, actor=sre, reason="the tenant asked to wait")
    elif state == "released":
        _released(release, owner, signers, sre)
    elif state == "rolled_back":
        _released(release, owner, signers, sre)
        services.record_rollback(world.service, actor=sre, reason="errors at 4 %")
    release.refresh_from_db()
    assert release.state == state
    return release


def _verbs(world, owner, signers, sre, security) -> dict[Action, tuple[Any, Callable]]:
    """Each action: who acts, and the verb as they would call it."""
    later = timezone.now() + dt.timedelta(days=2)
    return {
        Action.EDIT: (
            owner,
            lambda r: services.update_release(r, actor=owner, summary="A clearer summary"),
        ),
        Action.SUBMIT: (owner, lambda r: services.submit_release(r, actor=owner)),
        Action.WITHDRAW: (owner, lambda r: services.withdraw_release(r, actor=owner, reason="x")),
        Action.REOPEN: (owner, lambda r: services.reopen_release(r, actor=owner)),
        Action.SIGN: (
            signers["model_team"],
            lambda r: services.sign_off(
                r, actor=signers["model_team"], role="model_team", decision="approve"
            ),
        ),
        Action.WAIVE: (
            security,
            lambda r: services.grant_waiver(
                r, actor=security, gate="license", reason="terms read", expires_at=later
            ),
        ),
        Action.START_ROLLOUT: (owner, lambda r: services.start_rollout(r, actor=owner)),
        Action.OBSERVE: (sre, lambda r: observe(r, sre, GOOD)),
        Action.PROMOTE: (sre, lambda r: services.promote_release(r, actor=sre)),
        Action.HOLD: (sre, lambda r: services.hold_release(r, actor=sre, reason="a look")),
        Action.ABORT: (sre, lambda r: services.abort_release(r, actor=sre, reason="stop")),
        Action.ROLL_BACK: (
            sre,
            lambda r: services.record_rollback(world.service, actor=sre, reason="errors at 4 %"),
        ),
        Action.CLOSE: (
            sre,
            lambda r: services.close_release(r, actor=sre, close_code="successful_with_issues"),
        ),
    }


def _marks(release: Release) -> dict[Action, str]:
    """What on the release page offers each action."""
    pk = release.pk

    def rollout(name: str) -> str:
        return reverse("releases:rollout_action", args=[pk, name])

    def transition(name: str) -> str:
        return reverse("releases:release_transition", args=[pk, name])

    return {
        Action.EDIT: reverse("releases:release_edit", args=[pk]),
        Action.SUBMIT: transition("submit"),
        Action.WITHDRAW: transition("withdraw"),
        Action.REOPEN: transition("reopen"),
        Action.SIGN: reverse("releases:release_signoff", args=[pk]),
        Action.WAIVE: reverse("releases:release_waiver", args=[pk]),
        Action.START_ROLLOUT: rollout("start"),
        Action.OBSERVE: reverse("releases:release_observation", args=[pk]),
        Action.PROMOTE: rollout("promote"),
        Action.HOLD: rollout("hold"),
        Action.ABORT: rollout("abort"),
        Action.ROLL_BACK: reverse("releases:rollback_new", args=[release.service.slug]),
        Action.CLOSE: reverse("releases:release_close", args=[pk]),
    }


class _Undo(Exception):
    pass


def _try(verb: Callable, release: Release) -> tuple[str, Any]:
    """Run the verb and undo what it wrote: ("done", what it returned, with the release's
    state then) or ("refused", the message)."""
    outcome: tuple[str, Any] = ("refused", "")
    try:
        with transaction.atomic():
            try:
                result = verb(Release.objects.get(pk=release.pk))
            except (TransitionRefused, GatesNotPassed) as refused:
                outcome = ("refused", refused.message)
            except ValidationError as invalid:
                outcome = ("invalid", " ".join(invalid.messages))
            else:
                after = Release.objects.get(pk=release.pk).state
                made = (
                    result.state
                    if isinstance(result, Release) and result.pk != release.pk
                    else None
                )
                outcome = ("done", made or after)
            raise _Undo
    except _Undo:
        pass
    return outcome


@contextmanager
def _license_failing(world) -> Iterator[None]:
    """The candidate's license not approved for as long as the block runs: a waiver is for
    a gate that does not pass, so the page and the verb are asked about a failing one."""
    with transaction.atomic():
        ledger_services.set_license_approval(
            world.candidate.model_asset, actor=None, approval="rejected", comment="terms unread"
        )
        yield
        transaction.set_rollback(True)


@pytest.mark.parametrize("state", [s.value for s in Release.State])
def test_the_verbs_and_the_page_follow_the_transitions_table(
    state, client, world, release, owner, signers, sre
):
    release = _bring(state, release, world, owner, signers, sre)
    # Who waives the license gate has not signed security & compliance on the release.
    security = UserFactory(username="sue", roles=["security_compliance"])
    marks = _marks(release)
    verbs = _verbs(world, owner, signers, sre, security)
    pages: dict[int, str] = {}
    disagreements = []
    for action in Action:
        actor, verb = verbs[action]
        with _license_failing(world) if action == Action.WAIVE else nullcontext():
            if actor.pk not in pages:
                client.force_login(actor)
                response = client.get(reverse("releases:release_detail", args=[release.pk]))
                assert response.status_code == 200
                pages[actor.pk] = response.content.decode()
            kind, said = _try(verb, release)
        offered = f'"{marks[action]}"' in pages[actor.pk]
        allowed = release.allowed(action)
        assert allowed == (state in APPLIES[action]), action
        results = TRANSITIONS[action].results(state, release.path)
        refusal = release.refusal(action)
        if action == Action.ROLL_BACK:
            # A service's verb: it ends the release only where the table lets it.
            state_refused = kind != "done" or said == state
        else:
            state_refused = kind == "refused" and said == refusal
        if state_refused == allowed:
            disagreements.append(f"{action}: allowed={allowed}, the verb: {kind} {said!r}")
        if offered and not allowed:
            disagreements.append(f"{action}: the page offers it, the table refuses it")
        if action == Action.WAIVE and allowed and not (kind == "done" and offered):
            disagreements.append(f"waive of a failing gate: the verb {kind}, offered={offered}")
        if kind == "done" and action != Action.ROLL_BACK and not offered:
            disagreements.append(f"{action}: the verb did it, the page does not offer it")
        if (
            kind == "done"
            and said not in results
            and not (action == Action.ROLL_BACK and not allowed)
        ):
            disagreements.append(f"{action}: ended {said}, the table says {results}")
        if not allowed:
            assert refusal is not None and f"is {release.get_state_display().lower()};" in refusal
    assert disagreements == []


def test_the_emergency_path_starts_from_submitted_and_its_refusal_says_so(world, release, owner):
    services.update_release(release, actor=owner, path="emergency", emergency_reason="OOM")
    release.refresh_from_db()
    assert release.allowed(Action.START_ROLLOUT) is False
    assert release.refusal(Action.START_ROLLOUT) == (
        f"Release #{release.pk} is draft; only a approved or submitted release can be rolled out."
    )
    release.state = "submitted"
    assert release.allowed(Action.START_ROLLOUT) is True
    release.path = "normal"
    assert release.allowed(Action.START_ROLLOUT) is False
    assert release.refusal(Action.START_ROLLOUT) == (
        f"Release #{release.pk} is submitted; only a approved release can be rolled out."
    )
