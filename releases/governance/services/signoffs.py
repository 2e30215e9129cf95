"""Sign-offs bound to what the signer saw, voided when it changes; and waivers.

A sign-off keeps the snapshot and its hash (`releases.governance.snapshot`). Whenever
the release's snapshot moves (a form edit, a replaced report, a new replay
run, a waiver), `sync_signoffs` voids each standing sign-off it no longer
matches, with a reason naming what changed, emails that signer to sign again,
and takes an approved release back to submitted. Once the release is closed
(released, rejected, withdrawn, aborted, rolled back) its sign-offs are frozen as
they stood.
"""

from __future__ import annotations

import datetime as dt

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext_noop

from ledger.chain import append_event
from lib.actors import Actor
from releases import permissions, policy
from releases.governance import gates as release_gates
from releases.governance.services.base import approve, lock_release, refuse_unless
from releases.governance.services.errors import TransitionRefused
from releases.governance.services.notify import notify_on_commit
from releases.models import Release, SignOff, Waiver
from releases.transitions import TRANSITIONS, Action


def _event(release: Release, *, actor: Actor, action: str, payload: dict) -> None:
    append_event(
        actor=actor,
        action=action,
        subject=release,
        payload=payload,
        subject_label=str(release),
    )


def sync_signoffs(
    release: Release, *, actor: Actor, assessment: release_gates.Assessment | None = None
) -> release_gates.Assessment:
    """Void the sign-offs the release's snapshot no longer matches (inside a verb's lock).

    Returns the assessment as it stands after (judged again from what `assessment`
    read: voiding changes nothing else it looks at). A closed release's sign-offs are
    frozen (`Release.OPEN_STATES`): nothing voids them after it went out.
    """
    assessment = assessment or release_gates.assess(release)
    if release.state not in Release.OPEN_STATES:
        return assessment
    now = timezone.now()
    voided = []
    for state in assessment.signoffs:
        signoff = state.signoff
        if signoff.voided_at is None and not state.standing:
            signoff.voided_at = now
            signoff.void_reason = state.void_reason
            signoff.save(update_fields=["voided_at", "void_reason"])
            voided.append(signoff)
            _event(
                release,
                actor=actor,
                action="release.signoff_voided",
                payload={
                    "signoff": signoff.pk,
                    "role": signoff.role,
                    "signer": signoff.signer.get_username(),
                    "approved_hash": signoff.snapshot_hash,
                    "hash_now": assessment.snapshot_hash,
                    "reason": signoff.void_reason,
                },
            )
    if not voided:
        return assessment
    if release.state == Release.State.APPROVED:
        release.state = Release.State.SUBMITTED
        release.approved_at = None
        release.save(update_fields=["state", "approved_at", "updated_at"])
        _event(
            release,
            actor=actor,
            action="release.approval_voided",
            payload={"voided": [s.pk for s in voided]},
        )
    required = [s.role for s in voided if s.role in assessment.required_roles]
    notify_on_commit(
        release,
        required,
        why=gettext_noop(
            "A sign-off was voided because the release changed after it was given: %(reasons)s"
        ),
        why_params={"reasons": "; ".join(s.void_reason for s in voided)},
    )
    return release_gates.rejudge(assessment)


@transaction.atomic
def revalidate_release(release: Release, *, actor: Actor = None) -> release_gates.Assessment:
    """Record the voids that changes elsewhere (new evidence, new replay runs) caused."""
    release = lock_release(release)
    return sync_signoffs(release, actor=actor)


@transaction.atomic
def sign_off(
    release: Release, *, actor: Actor, role: str, decision: str, comment: str = ""
) -> SignOff:
    """Approve or reject `release` for `role`, bound to the snapshot as it is now.

    The filer never signs; one person signs one role. The last required
    approval (with every other gate passing or waived) moves a submitted
    release to approved; one rejection moves it to rejected.
    """
    release = lock_release(release)
    permissions.ensure_can_sign(actor, release, role)
    assert actor is not None  # ensure_can_sign refuses the system
    refuse_unless(release, Action.SIGN)
    if decision not in SignOff.Decision.values:
        raise ValidationError(
            {"decision": f"{decision!r} is not a decision; expected approve or reject."}
        )
    if decision == SignOff.Decision.REJECT and not comment.strip():
        raise ValidationError({"comment": "A rejection needs a comment: the filer reads it."})
    assessment = sync_signoffs(release, actor=actor)
    if role not in assessment.required_roles:
        needed = ", ".join(assessment.required_roles) or "none"
        raise ValidationError(
            {
                "role": f"Release #{release.pk} needs no {role} sign-off "
                f"({release.service.tier}, {release.path} path: {needed})."
            }
        )
    held = next(
        (s.signoff for s in assessment.signoffs if s.standing and s.signoff.role == role), None
    )
    if held is not None:
        raise TransitionRefused(
            f"{held.signer.get_username()} already signed for {held.get_role_display().lower()} "
            f"({held.decision}) on release #{release.pk}.",
            state=release.state,
        )
    now = timezone.now()
    try:
        with transaction.atomic():
            signoff = SignOff.objects.create(
                release=release,
                role=role,
                signer=actor,
                decision=decision,
                comment=comment,
                snapshot_hash=assessment.snapshot_hash,
                snapshot=assessment.snapshot,
                signed_at=now,
                as_administrator=permissions.signs_as_administrator(actor, role),
            )
    except IntegrityError as exc:  # the one-role-per-signer rule, raced
        raise TransitionRefused(
            "Someone signed this role, or you signed another, at the same moment.",
            state=release.state,
        ) from exc
    _event(
        release,
        actor=actor,
        action="release.signed_off",
        payload={
            "signoff": signoff.pk,
            "role": role,
            "decision": decision,
            "comment": comment,
            "snapshot_hash": assessment.snapshot_hash,
            "as_administrator": signoff.as_administrator,
        },
    )
    if decision == SignOff.Decision.REJECT:
        _rejected(release, signoff, actor=actor)
    else:
        # The gates judged once: again with this sign-off added, nothing read anew.
        assert assessment.inputs is not None
        signoffs = [*assessment.inputs.signoffs, signoff]
        _maybe_approved(release, release_gates.rejudge(assessment, signoffs=signoffs), actor=actor)
    return signoff


def _rejected(release: Release, signoff: SignOff, *, actor: Actor) -> None:
    if Release.State.REJECTED in TRANSITIONS[Action.SIGN].results(release.state, release.path):
        before = release.state
        release.state = Release.State.REJECTED
        release.closed_at = timezone.now()
        release.save(update_fields=["state", "closed_at", "updated_at"])
        _event(
            release,
            actor=actor,
            action="release.rejected",
            payload={"from_state": before, "signoff": signoff.pk, "role": signoff.role},
        )
    # Rolling out (emergency): the rejection stands on the release page; aborting or
    # rolling back is the rollout's own verb.


def _maybe_approved(
    release: Release, assessment: release_gates.Assessment, *, actor: Actor
) -> None:
    if release.state == Release.State.SUBMITTED and not assessment.failing():
        approve(release, actor=actor, why="the last required sign-off was given")
    elif release.state == Release.State.ROLLING_OUT and not assessment.failing(
        but=frozenset({"blackout"})
    ):
        release.approved_at = timezone.now()
        release.save(update_fields=["approved_at", "updated_at"])
        _event(
            release,
            actor=actor,
            action="release.approved",
            payload={"why": "the emergency release's sign-offs are complete"},
        )


# ---------------------------------------------------------------- waivers


@transaction.atomic
def grant_waiver(
    release: Release, *, actor: Actor, gate: str, reason: str, expires_at: dt.datetime | None
) -> Waiver:
    """Set a gate aside for `release` until `expires_at`, for a stated reason.

    Only the sign-off role that owns the gate waives it (`policy.WAIVER_OWNERS`), never
    the filer nor whoever signed that role (`permissions.waiver_refusal`), and for at
    most the tier's `settings.WAIVER_MAX_DAYS`; the waiver shows on every page, API
    answer and export of the release.
    """
    release = lock_release(release)
    permissions.ensure_can_waive(actor)
    refuse_unless(release, Action.WAIVE)
    errors = {}
    tier = release.service.tier
    applies = policy.gates_for(tier, release.change_kind)
    if gate not in policy.GATES:
        errors["gate"] = f"{gate!r} is not a gate; expected one of {', '.join(policy.GATES)}."
    elif gate in policy.NOT_WAIVABLE:
        errors["gate"] = f"The {gate} gate cannot be waived."
    elif gate not in applies:
        errors["gate"] = f"The {gate} gate does not apply to release #{release.pk}."
    else:
        # Who may, before what they wrote: the gate's owner, not its signer.
        permissions.ensure_can_waive_gate(actor, release, gate)
        judged = release_gates.assess(release).gate(gate)
        refusal = release_gates.waiver_refusal(judged) if judged is not None else None
        # A gate waived already is refused below, as a conflict naming its waiver.
        if refusal is not None and judged is not None and judged["status"] != "waived":
            errors["gate"] = refusal
    if not (reason or "").strip():
        errors["reason"] = "A waiver needs a reason."
    now = timezone.now()
    bound = policy.waiver_bound(tier, now)
    if expires_at is None:
        errors["expires_at"] = "A waiver needs an expiry (an ISO date and time)."
    elif expires_at <= now:
        errors["expires_at"] = f"The expiry {expires_at:%Y-%m-%d %H:%M %Z} has already passed."
    elif expires_at > bound:
        errors["expires_at"] = (
            f"A waiver on {'an' if tier[0] in 'aeiou' else 'a'} {tier} service may last at "
            f"most {policy.waiver_max_days(tier)} days: until "
            f"{timezone.localtime(bound):%Y-%m-%d %H:%M %Z}; "
            f"{expires_at:%Y-%m-%d %H:%M %Z} is later."
        )
    if errors or expires_at is None:
        raise ValidationError(errors)
    held = Waiver.objects.filter(release=release, gate=gate, revoked_at__isnull=True).first()
    if held is not None:
        if held.expires_at > now:
            raise TransitionRefused(
                f"The {gate} gate is already waived until {held.expires_at:%Y-%m-%d %H:%M %Z}; "
                "revoke that waiver first.",
                state=release.state,
            )
        _revoke(release, held, actor=actor, why="expired")
    waiver = Waiver(
        release=release,
        gate=gate,
        reason=reason.strip(),
        expires_at=expires_at,
        granted_by=actor or release.filed_by,
        granted_at=now,
    )
    waiver.full_clean(exclude=["release", "granted_by"])
    waiver.save(force_insert=True)
    _event(
        release,
        actor=actor,
        action="release.waiver_granted",
        payload={
            "waiver": waiver.pk,
            "gate": gate,
            "reason": waiver.reason,
            "expires_at": expires_at,
        },
    )
    sync_signoffs(release, actor=actor)
    return waiver


def _revoke(release: Release, waiver: Waiver, *, actor: Actor, why: str) -> None:
    waiver.revoked_at = timezone.now()
    waiver.revoked_by = actor
    waiver.save(update_fields=["revoked_at", "revoked_by"])
    _event(
        release,
        actor=actor,
        action="release.waiver_revoked",
        payload={"waiver": waiver.pk, "gate": waiver.gate, "why": why},
    )


@transaction.atomic
def revoke_waiver(waiver: Waiver, *, actor: Actor, why: str = "") -> Waiver:
    release = lock_release(waiver.release_id)
    permissions.ensure_can_waive(actor)
    waiver = Waiver.objects.select_for_update().get(pk=waiver.pk)
    if waiver.revoked_at is not None:
        raise TransitionRefused(
            f"Waiver #{waiver.pk} was already revoked on {waiver.revoked_at:%Y-%m-%d}.",
            state=release.state,
        )
    _revoke(release, waiver, actor=actor, why=why)
    sync_signoffs(release, actor=actor)
    return waiver
