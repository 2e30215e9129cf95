"""Who may change what in the registry: one function per rule.

Pages, the API, admin and the domain verbs all ask these, so a page never
offers what the API refuses, nor the reverse. The `ensure_*` forms raise
PermissionDenied with the reason; `actor=None` is the system itself
(commands, tasks, `manage.py apply`), which may do anything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeGuard

from django.core.exceptions import PermissionDenied
from django.utils.translation import gettext as _

from ledger.roles import Role, has_permission, has_role
from lib.actors import Actor, Requester

if TYPE_CHECKING:
    from django.contrib.auth.models import User
    from django.db.models import QuerySet

    from ledger.models import ModelAsset, Revision, Runtime, Service, Team


def _signed_in(user: Requester) -> TypeGuard[User]:
    return user is not None and user.is_authenticated


def editable_teams(user: Requester) -> QuerySet[Team]:
    """The teams whose services, assets and runtimes this person may change."""
    from ledger.models import Team

    if not _signed_in(user):
        return Team.objects.none()
    if user.is_superuser:
        return Team.objects.all()
    if has_role(user, Role.MODEL_OWNER):
        return Team.objects.filter(members=user)
    return Team.objects.none()


def can_edit_team_objects(user: Requester, team: Team) -> bool:
    """Model owners change the services, assets and runtimes of their own teams."""
    if not _signed_in(user):
        return False
    if user.is_superuser:
        return True
    return has_role(user, Role.MODEL_OWNER) and team.members.filter(pk=user.pk).exists()


def can_create(user: Requester) -> bool:
    """Add services, assets and runtimes: a model owner who belongs to a team."""
    return _signed_in(user) and editable_teams(user).exists()


def can_approve_licenses(user: Requester) -> bool:
    """Classify licenses and review (approve or reject) the license of an asset:
    security & compliance."""
    return _signed_in(user) and (user.is_superuser or has_role(user, Role.SECURITY_COMPLIANCE))


def can_record_price_sheet(user: Requester) -> bool:
    """Record a version of a GPU model's price per GPU-hour: platform SREs (who run the
    hardware and know what it costs) and administrators. There is no FinOps role; a
    FinOps analyst who records prices is given the platform SRE role. Anyone signed in
    reads the prices."""
    return _signed_in(user) and (user.is_superuser or has_role(user, Role.PLATFORM_SRE))


def ensure_can_record_price_sheet(actor: Actor) -> None:
    if actor is not None and not can_record_price_sheet(actor):
        raise PermissionDenied(
            _(
                "Only platform SREs and administrators can record price sheets; anyone can read them."
            )
        )


def can_record_license_acceptance(user: Requester, asset: ModelAsset) -> bool:
    """Record that someone accepted a gated license's terms for an asset: security &
    compliance, who keep the company's agreements, or a model owner of the asset's team,
    who usually clicks "accept" on the model hub."""
    if not _signed_in(user):
        return False
    return can_approve_licenses(user) or can_edit_team_objects(user, asset.team)


def runtimes_usable_by(service: Service) -> QuerySet[Runtime]:
    """Runtimes a revision of `service` may run on: every one. A runtime's team owns
    editing it, not using it (the platform team provides runtimes for all services)."""
    from ledger.models import Runtime

    return Runtime.objects.all()


def assets_usable_by(service: Service) -> QuerySet[ModelAsset]:
    """Model assets a revision of `service` may serve: the active or deprecated ones of
    the service's team (its owners answer for the weights and their license)."""
    from ledger.models import ModelAsset

    return ModelAsset.objects.usable().filter(team=service.team_id)


def asset_refusal(service: Service, asset: ModelAsset) -> str | None:
    """Why a revision of `service` may not serve `asset`, or None when it may."""
    from ledger.models import ModelAsset

    if asset.lifecycle == ModelAsset.Lifecycle.RETIRED:
        return (
            f"{asset} was retired on {asset.retired_on}; a retired asset cannot go into "
            "a new revision. Choose an active asset."
        )
    if asset.team_id != service.team_id:
        return (
            f"{asset} belongs to team {asset.team.slug!r}; a revision of {service.slug} "
            f"serves assets of its own team {service.team.slug!r}. Register the asset "
            "under that team, or ask its owners to."
        )
    return None


def can_set_live(user: Requester, service: Service) -> bool:
    """Point a service at a revision outside a release: the `ledger.set_live_revision`
    permission (platform by default); the service's team may name the first live
    revision of a service that has none, registering what already runs."""
    if not _signed_in(user):
        return False
    if has_permission(user, "ledger.set_live_revision"):
        return True
    return service.live_revision_id is None and can_edit_team_objects(user, service.team)


def ensure_can_set_live(actor: Actor, service: Service) -> None:
    if actor is not None and not can_set_live(actor, service):
        raise PermissionDenied(
            _(
                "Only people with the set-live permission (platform by default) can change what "
                "serves on %(service)s outside a release; file a release instead."
            )
            % {"service": service.slug}
        )


def ensure_can_edit(actor: Actor, team: Team) -> None:
    if actor is not None and not can_edit_team_objects(actor, team):
        raise PermissionDenied(
            _("Only model owners of team %(team)r can change this.") % {"team": team.slug}
        )


def ensure_can_attach_evidence(revision: Revision, *, actor: Actor) -> None:
    """Load-test reports go to a revision of a service of one's own team (any revision,
    locked or not: evidence is not the revision's content)."""
    team = revision.service.team
    if actor is not None and not can_edit_team_objects(actor, team):
        raise PermissionDenied(
            _("Only model owners of team %(team)r can attach load-test reports to %(revision)s.")
            % {"team": team.slug, "revision": revision}
        )


def ensure_can_create(actor: Actor) -> QuerySet[Team]:
    """The teams `actor` may add to; refused when there are none."""
    teams = editable_teams(actor)
    if not teams.exists():
        raise PermissionDenied(_("Only model owners who belong to a team can add to the registry."))
    return teams


def ensure_can_approve_licenses(actor: Actor) -> None:
    if actor is not None and not can_approve_licenses(actor):
        raise PermissionDenied(_("Only security & compliance can approve or reject a license."))


def can_record_run_summary(user: Requester, service: Service) -> bool:
    """Who may push a service's daily run evidence.

    The gateway pushes with the API token of a service account that holds the
    platform SRE role (it sees every service); a team's own pipeline may push
    its services' days with a model owner's token. Anyone else may read them,
    not write them: a day's numbers feed reviews and release gates.
    """
    if not _signed_in(user):
        return False
    if user.is_superuser or has_role(user, Role.PLATFORM_SRE):
        return True
    return can_edit_team_objects(user, service.team)


def ensure_can_record_run_summary(service: Service, *, actor: Actor) -> None:
    if actor is not None and not can_record_run_summary(actor, service):
        raise PermissionDenied(
            _(
                "Only platform SREs (the gateway's account) or model owners of team "
                "%(team)r can record run summaries of %(service)s."
            )
            % {"team": service.team.slug, "service": service.slug}
        )


def ensure_can_record_license_acceptance(actor: Actor, asset: ModelAsset) -> None:
    if actor is not None and not can_record_license_acceptance(actor, asset):
        raise PermissionDenied(
            _(
                "Only security & compliance or model owners of team "
                "%(team)r can record accepting the license terms of %(asset)s."
            )
            % {"team": asset.team.slug, "asset": asset}
        )


def can_manage_accounts(user: Requester) -> bool:
    """Create people, give them roles and teams, issue and revoke their API tokens:
    administrators only (a role or a token is the power to sign off or to write)."""
    return _signed_in(user) and user.is_superuser


def ensure_can_manage_accounts(actor: Actor) -> None:
    if actor is not None and not can_manage_accounts(actor):
        raise PermissionDenied(
            _("Only an administrator can manage accounts, roles and API tokens.")
        )


def can_manage_teams(user: Requester) -> bool:
    """Create teams and change who is in them: administrators only (a team is the power
    to edit its registry objects and to sign for it)."""
    return _signed_in(user) and user.is_superuser


def ensure_can_manage_teams(actor: Actor, *, refusal: str) -> None:
    if actor is not None and not can_manage_teams(actor):
        raise PermissionDenied(refusal)


def can_ingest_traces(user: Requester) -> bool:
    """Send OpenTelemetry traces: the trace-ingest role (the collector's or gateway's
    service account) and administrators. Nobody else writes spans: they explain what
    served a request, so who may add them is as narrow as who may push run evidence."""
    return _signed_in(user) and (user.is_superuser or has_role(user, Role.TRACE_INGEST))
