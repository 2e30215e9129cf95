"""Who may do what with a release: one function per rule.

Pages, the API and the verbs all ask these. `can_*` answer a yes/no for a page
to offer an action; `ensure_*` raise PermissionDenied with the reason (the
verbs call them; `actor=None` is the system, which may do anything). Reading a
release needs only to be signed in, like the rest of the ledger.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeGuard

from django.core.exceptions import PermissionDenied
from django.utils.translation import gettext as _

from ledger.permissions import can_edit_team_objects
from ledger.roles import Role, has_permission, has_role
from lib.actors import Actor, Requester
from releases import policy

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from ledger.models import Service
    from releases.models import Release, Review, ReviewAction, SignOff, Waiver

# Django permissions of the releases app, and the roles granted each by default (an
# administrator grants them to anyone else in the admin). `ledger.set_live_revision`
# (pointing a service at a revision outside a release) is granted alongside.
DEFAULT_GRANTS: dict[str, tuple[Role, ...]] = {
    # Each waives only the gates of its own part (`policy.WAIVER_OWNERS`, `waiver_refusal`).
    "releases.waive_gate": (Role.SECURITY_COMPLIANCE, Role.PLATFORM_SRE, Role.BUSINESS_OWNER),
    "releases.promote_release": (Role.PLATFORM_SRE,),
    "releases.record_rollback": (Role.PLATFORM_SRE,),
    "ledger.set_live_revision": (Role.PLATFORM_SRE,),
}


def _signed_in(user: Requester) -> TypeGuard[User]:
    return user is not None and user.is_authenticated


def can_view_release(user: Requester, release: Release) -> bool:
    return _signed_in(user)


def can_view_cost(user: Requester) -> bool:
    """Cost pages and their API: anyone signed in, as every service's evidence is."""
    return _signed_in(user)


def can_file_release(user: Requester, service: Service) -> bool:
    """A model owner of the service's team files its releases."""
    return can_edit_team_objects(user, service.team)


def can_file_some_release(user: Requester) -> bool:
    """Whether any service at all has the person as a model owner of its team."""
    from ledger.models import Service
    from ledger.permissions import editable_teams

    return _signed_in(user) and Service.objects.filter(team__in=editable_teams(user)).exists()


def can_edit_release(user: Requester, release: Release) -> bool:
    """Change the form, submit or withdraw it: a model owner of the team, while it is open."""
    return can_file_release(user, release.service)


def holds_signer_role(user: Requester, release: Release, role: str) -> bool:
    """Whether `user` holds what signing `role` needs (not whether they may sign now).

    Superusers hold every ledger role. The model team is the service's team, not any
    model owner, and not an administrator outside it: its sign-off says the team
    approves, which only a member can say (issue 26)."""
    if not _signed_in(user):
        return False
    if not user.is_superuser and not has_role(user, Role(policy.SIGNER_ROLES[role])):
        return False
    if role == "model_team":
        return release.service.team.members.filter(pk=user.pk).exists()
    return True


def signs_as_administrator(user: Requester, role: str) -> bool:
    """Whether `user` may sign `role` only by being a superuser: they do not hold the
    ledger role it needs (SIGNER_ROLES). Such a sign-off is shown as an administrator's,
    and separation of duties does not count it as the role's approval."""
    if not _signed_in(user) or not user.is_superuser:
        return False
    return not has_role(user, Role(policy.SIGNER_ROLES[role]))


def _own_waivers(user: User, release: Release, waivers: Sequence[Waiver] | None) -> list[Waiver]:
    """The waivers `user` granted on `release` that stand (not revoked; expired or not).

    `waivers`: the release's unrevoked waivers when the caller has just read them."""
    if waivers is None:
        return list(release.waivers.filter(granted_by=user, revoked_at__isnull=True))
    return [w for w in waivers if w.granted_by_id == user.pk and w.revoked_at is None]


def signoff_refusal(
    user: Requester,
    release: Release,
    role: str,
    *,
    signoffs: Sequence[SignOff] | None = None,
    waivers: Sequence[Waiver] | None = None,
) -> str | None:
    """Why `user` may not sign `role` on `release` now, or None when they may.

    `signoffs`, `waivers`: the release's sign-offs and unrevoked waivers when the
    caller has just read them (a page that assessed the release); otherwise the
    person's are read."""
    from releases.models import SignOff

    labels = dict(SignOff.Role.choices)
    if role not in labels:
        return _("%(role)s is not a sign-off role; expected one of %(roles)s.") % {
            "role": repr(role),
            "roles": ", ".join(labels),
        }
    if not _signed_in(user):
        return _("Sign in to sign off.")
    if release.filed_by_id == user.pk:
        return _("You filed this release: the filer cannot sign it off.")
    if not holds_signer_role(user, release, role):
        needed = Role(policy.SIGNER_ROLES[role]).label
        if role == "model_team" and user.is_superuser:
            return _(
                "You are not in team %(team)s: only a member of the service's team signs off "
                "for %(role)s, administrators included."
            ) % {"team": repr(release.service.team.slug), "role": _(labels[role]).lower()}
        if role == "model_team":
            return _("Only a %(needed)s of the service's team can sign off for %(role)s.") % {
                "needed": needed.lower(),
                "role": labels[role].lower(),
            }
        return _("Only a %(needed)s can sign off for %(role)s.") % {
            "needed": needed.lower(),
            "role": labels[role].lower(),
        }
    given = release.signoffs.filter(signer=user) if signoffs is None else signoffs
    other = next(
        (s for s in given if s.signer_id == user.pk and s.voided_at is None and s.role != role),
        None,
    )
    if other is not None:
        return _(
            "You already signed for %(role)s on this release: one person signs one role only."
        ) % {"role": labels[other.role].lower()}
    waived = next(
        (w for w in _own_waivers(user, release, waivers) if policy.waiver_owner(w.gate) == role),
        None,
    )
    if waived is not None:
        return _(
            "You waived the %(gate)s gate of this release: someone else signs off for "
            "%(role)s, or you would approve your own waiver."
        ) % {"gate": waived.gate, "role": _(labels[role]).lower()}
    return None


def can_sign(
    user: Requester,
    release: Release,
    role: str,
    *,
    signoffs: Sequence[SignOff] | None = None,
    waivers: Sequence[Waiver] | None = None,
) -> bool:
    return signoff_refusal(user, release, role, signoffs=signoffs, waivers=waivers) is None


def can_waive(user: Requester) -> bool:
    """Set some gate aside: the `releases.waive_gate` permission (security & compliance,
    platform and business owners by default). Which gate, on which release:
    `waiver_refusal`."""
    return _signed_in(user) and has_permission(user, "releases.waive_gate")


def waiver_refusal(
    user: Requester, release: Release, gate: str, *, signoffs: Sequence[SignOff] | None = None
) -> str | None:
    """Why `user` may not waive `gate` on `release` now, or None when they may.

    A gate is waived by a holder of the sign-off role that owns it
    (`policy.WAIVER_OWNERS`) with the permission to waive, never by the filer, and
    never by someone who signed that role on the release: they would approve their own
    waiver (nor, the other way round, may they sign it after: `signoff_refusal`).
    `signoffs`: the release's sign-offs when the caller has just read them."""
    from releases.models import SignOff

    owner = policy.waiver_owner(gate)
    if owner is None:
        return _("Nobody can waive the %(gate)s gate.") % {"gate": gate}
    if not _signed_in(user):
        return _("Sign in to waive a gate.")
    role = _(dict(SignOff.Role.choices)[owner]).lower()
    if not holds_signer_role(user, release, owner):
        return _(
            "Only %(role)s may waive the %(gate)s gate: it is part of what that role signs off."
        ) % {"role": role, "gate": gate}
    if not can_waive(user):
        return _(
            "You hold the role but not the permission to waive gates (releases.waive_gate); "
            "an administrator grants it."
        )
    if release.filed_by_id == user.pk:
        return _("You filed this release: waivers are for someone else to grant.")
    given = release.signoffs.filter(signer=user) if signoffs is None else signoffs
    if any(s.signer_id == user.pk and s.voided_at is None and s.role == owner for s in given):
        return _(
            "You signed off for %(role)s on this release: someone else waives its %(gate)s "
            "gate, or you would approve your own waiver."
        ) % {"role": role, "gate": gate}
    return None


def can_waive_gate(
    user: Requester, release: Release, gate: str, *, signoffs: Sequence[SignOff] | None = None
) -> bool:
    return waiver_refusal(user, release, gate, signoffs=signoffs) is None


# The rollout's operational permissions: each its own Django permission, granted to the
# platform role by default (`releases.apps.grant_default_permissions`) and grantable to
# anyone else in the admin; distinct from editing a release. Auditors only read.


def can_promote(user: Requester, release: Release | None = None) -> bool:
    """Start, promote, hold or abort a rollout: `releases.promote_release`."""
    return _signed_in(user) and has_permission(user, "releases.promote_release")


def can_end_observation_window(user: Requester, release: Release | None = None) -> bool:
    """End a stage's observation window early and promote it: a platform SRE (or a
    superuser) holding the promote permission; never a machine's token that holds only
    the permission, since this sets the plan's window aside on a person's word."""
    return (
        _signed_in(user)
        and (user.is_superuser or has_role(user, Role.PLATFORM_SRE))
        and can_promote(user, release)
    )


def can_record_rollback(user: Requester, service: Service | None = None) -> bool:
    """Record a rollback (and confirm how it ended): `releases.record_rollback`."""
    return _signed_in(user) and has_permission(user, "releases.record_rollback")


def can_verify_rollback_target(user: Requester, service: Service) -> bool:
    """Queue the verification replay of a rollback target now ("Verify now"), or again
    for a rollback that awaits confirmation: platform SREs and the service's model
    owners, who may replay against its backends (`replay.permissions.can_manage_backend`)."""
    if not _signed_in(user):
        return False
    return (
        user.is_superuser
        or has_role(user, Role.PLATFORM_SRE)
        or can_edit_team_objects(user, service.team)
    )


def can_post_observation(user: Requester, release: Release) -> bool:
    """Post what a stage measured: whoever may promote (the gateway's token holds that
    permission), and the model owners of the service's team."""
    return can_promote(user, release) or can_edit_release(user, release)


def can_start_rollout(user: Requester, release: Release) -> bool:
    """Start an approved release's rollout at stage 1: its team, or whoever may promote."""
    return can_edit_release(user, release) or can_promote(user, release)


def can_hold(user: Requester, release: Release) -> bool:
    """Stop the line: anyone who may post observations may hold a stage."""
    return can_post_observation(user, release)


def can_edit_playbooks(user: Requester, service: Service) -> bool:
    """A service's playbooks and degradation policies: platform, and the service's team."""
    return can_record_rollback(user, service) or can_edit_team_objects(user, service.team)


def can_reconcile(user: Requester, service: Service) -> bool:
    """Close an unauthorized-change finding with a note: whoever may record a rollback."""
    return can_record_rollback(user, service)


def can_close_release(user: Requester, release: Release) -> bool:
    """Correct a finished release's close code and link incidents: platform, or the team."""
    return can_promote(user, release) or can_edit_release(user, release)


def can_comment(user: Requester, release: Release) -> bool:
    """Anyone with a part in releases: model owners, signers of every role (not auditors only)."""
    if not _signed_in(user):
        return False
    if user.is_superuser:
        return True
    return any(
        has_role(user, role)
        for role in (
            Role.MODEL_OWNER,
            Role.PLATFORM_SRE,
            Role.SECURITY_COMPLIANCE,
            Role.BUSINESS_OWNER,
        )
    )


def can_manage_calendar(user: Requester) -> bool:
    """Standard change templates and blackout windows: platform."""
    return _signed_in(user) and (user.is_superuser or has_role(user, Role.PLATFORM_SRE))


# ---------------------------------------------------------------- ensure_*


def ensure_can_file(actor: Actor, service: Service) -> None:
    if actor is not None and not can_file_release(actor, service):
        raise PermissionDenied(
            _("Only model owners of team %(team)s can file releases of %(service)s.")
            % {"team": repr(service.team.slug), "service": service.slug}
        )


def ensure_can_file_some(actor: Actor) -> None:
    if actor is not None and not can_file_some_release(actor):
        raise PermissionDenied(
            _(
                "Only model owners file releases, each for the services of their own teams; "
                "you can file for no service."
            )
        )


def ensure_can_edit(actor: Actor, release: Release) -> None:
    if actor is not None and not can_edit_release(actor, release):
        raise PermissionDenied(
            _("Only model owners of team %(team)s can change release #%(pk)s.")
            % {"team": repr(release.service.team.slug), "pk": release.pk}
        )


def ensure_can_sign(actor: Actor, release: Release, role: str) -> None:
    if actor is None:
        raise PermissionDenied(_("A sign-off needs a person: the system cannot sign."))
    refusal = signoff_refusal(actor, release, role)
    if refusal:
        raise PermissionDenied(refusal)


def ensure_can_waive(actor: Actor) -> None:
    if actor is not None and not can_waive(actor):
        raise PermissionDenied(
            _(
                "Only security & compliance, platform and business owners can waive a gate, "
                "each the gates of their own part of a release."
            )
        )


def ensure_can_waive_gate(actor: Actor, release: Release, gate: str) -> None:
    if actor is None:
        return
    refusal = waiver_refusal(actor, release, gate)
    if refusal:
        raise PermissionDenied(refusal)


def ensure_can_comment(actor: Actor, release: Release) -> None:
    if actor is not None and not can_comment(actor, release):
        raise PermissionDenied(_("Only model owners and signers can comment on a release."))


def ensure_can_promote(actor: Actor, release: Release) -> None:
    if actor is not None and not can_promote(actor, release):
        raise PermissionDenied(
            _(
                "Only people with the promote permission (platform by default) can start, "
                "promote, hold or abort a rollout."
            )
        )


def ensure_can_end_observation_window(actor: Actor, release: Release) -> None:
    if actor is not None and not can_end_observation_window(actor, release):
        raise PermissionDenied(
            _(
                "Only platform SREs with the promote permission can end a stage's observation "
                "window early."
            )
        )


def ensure_can_record_rollback(actor: Actor, service: Service) -> None:
    if actor is not None and not can_record_rollback(actor, service):
        raise PermissionDenied(
            _(
                "Only people with the rollback permission (platform by default) can record a rollback of %(service)s."
            )
            % {"service": service.slug}
        )


def ensure_can_verify_rollback_target(actor: Actor, service: Service) -> None:
    if actor is not None and not can_verify_rollback_target(actor, service):
        raise PermissionDenied(
            _(
                "Only platform SREs or model owners of team %(team)s can verify the rollback "
                "target of %(service)s."
            )
            % {"team": repr(service.team.slug), "service": service.slug}
        )


def ensure_can_post_observation(actor: Actor, release: Release) -> None:
    if actor is not None and not can_post_observation(actor, release):
        raise PermissionDenied(
            _(
                "Only platform, the gateway, or model owners of team %(team)s can post observations of release #%(pk)s."
            )
            % {"team": repr(release.service.team.slug), "pk": release.pk}
        )


def ensure_can_start_rollout(actor: Actor, release: Release) -> None:
    if actor is not None and not can_start_rollout(actor, release):
        raise PermissionDenied(
            _(
                "Only model owners of team %(team)s or people with the promote permission can start the rollout of release #%(pk)s."
            )
            % {"team": repr(release.service.team.slug), "pk": release.pk}
        )


def ensure_can_hold(actor: Actor, release: Release) -> None:
    if actor is not None and not can_hold(actor, release):
        raise PermissionDenied(
            _(
                "Only platform or model owners of team %(team)s can hold the rollout of release #%(pk)s."
            )
            % {"team": repr(release.service.team.slug), "pk": release.pk}
        )


def ensure_can_edit_playbooks(actor: Actor, service: Service) -> None:
    if actor is not None and not can_edit_playbooks(actor, service):
        raise PermissionDenied(
            _(
                "Only platform or model owners of team %(team)s can change the playbooks of %(service)s."
            )
            % {"team": repr(service.team.slug), "service": service.slug}
        )


def ensure_can_reconcile(actor: Actor, service: Service) -> None:
    if actor is not None and not can_reconcile(actor, service):
        raise PermissionDenied(
            _(
                "Only people with the rollback permission (platform by default) can reconcile an unauthorized change on %(service)s."
            )
            % {"service": service.slug}
        )


def ensure_can_close(actor: Actor, release: Release) -> None:
    if actor is not None and not can_close_release(actor, release):
        raise PermissionDenied(
            _("Only platform or model owners of team %(team)s can set how release #%(pk)s ended.")
            % {"team": repr(release.service.team.slug), "pk": release.pk}
        )


def ensure_can_manage_calendar(actor: Actor) -> None:
    if actor is not None and not can_manage_calendar(actor):
        raise PermissionDenied(
            _("Only platform can change standard change templates and blackout windows.")
        )


# ---------------------------------------------------------------- audit exports, webhooks

# Who may take the record away: an export is a copy of everything, beyond reading a page.
EXPORT_ROLES = (Role.AUDITOR, Role.SECURITY_COMPLIANCE)


def can_request_exports(user: Requester) -> bool:
    """Request an export and download it: auditors, security & compliance, superusers.
    Reading the auditor's page and change records needs only to be signed in."""
    return _signed_in(user) and (
        user.is_superuser or any(has_role(user, role) for role in EXPORT_ROLES)
    )


def ensure_can_request_exports(actor: Actor) -> None:
    if actor is not None and not can_request_exports(actor):
        raise PermissionDenied(
            _("Only auditors and security & compliance can request or download exports.")
        )


def can_manage_webhooks(user: Requester) -> bool:
    """Create, pause, resume and delete webhook subscriptions, read their delivery logs
    and send a delivery again: platform."""
    return _signed_in(user) and (user.is_superuser or has_role(user, Role.PLATFORM_SRE))


def ensure_can_manage_webhooks(actor: Actor) -> None:
    if actor is not None and not can_manage_webhooks(actor):
        raise PermissionDenied(_("Only platform can manage webhook subscriptions."))


# ---------------------------------------------------------------- periodic reviews

# Who conducts any review and may give one to someone else; a review's assignee conducts
# their own. Everyone signed in reads reviews (auditors included).
REVIEW_ROLES = (Role.PLATFORM_SRE, Role.SECURITY_COMPLIANCE)


def can_manage_reviews(user: Requester) -> bool:
    """Conduct any review and reassign it: platform, security & compliance, superusers."""
    return _signed_in(user) and (
        user.is_superuser or any(has_role(user, role) for role in REVIEW_ROLES)
    )


def can_conduct_review(user: Requester, review: Review) -> bool:
    """Start a review, answer its checklist and conclude it: its assignee, platform, or
    security & compliance."""
    if not _signed_in(user):
        return False
    return review.assignee_id == user.pk or can_manage_reviews(user)


def can_complete_review_action(user: Requester, action: ReviewAction) -> bool:
    """Mark a conclusion's action done: its owner, whoever may conduct reviews, or a model
    owner of the service's team."""
    if not _signed_in(user):
        return False
    return (
        action.owner_id == user.pk
        or can_manage_reviews(user)
        or can_edit_team_objects(user, action.service.team)
    )


def assignee_refusal(user: User | None, service: Service) -> str | None:
    """Why `user` cannot be a review's assignee, or None: platform, security &
    compliance, or a model owner of the service's team."""
    if user is None or not user.is_active:
        return "Name an active user."
    if user.is_superuser or has_role(user, Role.PLATFORM_SRE):
        return None
    if has_role(user, Role.SECURITY_COMPLIANCE) or can_edit_team_objects(user, service.team):
        return None
    return (
        f"{user.get_username()} cannot conduct a review of {service.slug}: name a platform SRE, "
        f"someone of security & compliance, or a model owner of team {service.team.slug}."
    )


def ensure_can_manage_reviews(actor: Actor) -> None:
    if actor is not None and not can_manage_reviews(actor):
        raise PermissionDenied(
            _("Only platform or security & compliance can raise or reassign reviews.")
        )


def ensure_can_conduct_review(actor: Actor, review: Review) -> None:
    if actor is not None and not can_conduct_review(actor, review):
        raise PermissionDenied(
            _(
                "Only review #%(pk)s's assignee, platform or security & compliance can answer its checklist or conclude it."
            )
            % {"pk": review.pk}
        )


def ensure_can_complete_review_action(actor: Actor, action: ReviewAction) -> None:
    if actor is not None and not can_complete_review_action(actor, action):
        raise PermissionDenied(
            _(
                "Only the action's owner, platform, security & compliance or model owners of team %(team)s can mark it done."
            )
            % {"team": repr(action.service.team.slug)}
        )


# ---------------------------------------------------------------- peak drills


def can_plan_drill(user: Requester, services: Sequence[Service] = ()) -> bool:
    """Plan a drill: platform, or a model owner of every service it names (a drill sends
    load to their backends)."""
    if not _signed_in(user):
        return False
    if user.is_superuser or has_role(user, Role.PLATFORM_SRE):
        return True
    return bool(services) and all(can_edit_team_objects(user, s.team) for s in services)


def can_plan_some_drill(user: Requester) -> bool:
    """Open the drill form or post a plan: platform, and model owners of some team (the
    plan's services are then checked by `can_plan_drill`)."""
    return can_plan_drill(user) or can_file_some_release(user)


def can_run_drill(user: Requester) -> bool:
    """Start a drill's load: platform (it is a peak's worth of traffic on shared backends)."""
    return _signed_in(user) and (user.is_superuser or has_role(user, Role.PLATFORM_SRE))


def can_conclude_drill(user: Requester, signers: Sequence[str]) -> bool:
    """Conclude a drill: a person holding one of the roles it names as its signers."""
    if not _signed_in(user):
        return False
    return user.is_superuser or any(has_role(user, Role(role)) for role in signers)


def ensure_can_plan_drill(actor: Actor, services: Sequence[Service]) -> None:
    if actor is not None and not can_plan_drill(actor, services):
        raise PermissionDenied(
            _("Only platform, or model owners of every service in scope, can plan a drill.")
        )


def ensure_can_run_drill(actor: Actor) -> None:
    if actor is not None and not can_run_drill(actor):
        raise PermissionDenied(_("Only platform can run a drill."))


def ensure_can_conclude_drill(actor: Actor, signers: Sequence[str]) -> None:
    if actor is not None and not can_conclude_drill(actor, signers):
        raise PermissionDenied(
            _("Only %(roles)s can conclude this drill.") % {"roles": ", ".join(signers)}
        )


def can_explain_traces(user: Requester) -> bool:
    """Explain a request from its trace: anyone signed in, as anyone reads the catalog,
    the serving history and the evidence the explanation joins (no content is kept)."""
    return _signed_in(user)
