"""Reading the registry: revisions that are the same thing, capabilities still verified."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple, TypeAlias, TypedDict, cast

from django.db.models import QuerySet

from ledger import locks
from ledger.fingerprint import FingerprintComponents, compute_fingerprint, fingerprint_components
from ledger.models import Capability, Revision, Service
from ledger.queries.compliance import Finding, license_problems_by_asset

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations


class RevisionPageAttrs(TypedDict):
    """Set by `service_revisions` for pages."""

    same_as: list[str]
    locks: list[str]
    license_problems: list[Finding]


class CapabilityPageAttrs(TypedDict):
    """Set by `capabilities_of` for pages."""

    stale: bool


RevisionForPage: TypeAlias = "WithAnnotations[Revision, RevisionPageAttrs]"
CapabilityForPage: TypeAlias = "WithAnnotations[Capability, CapabilityPageAttrs]"


def same_fingerprint(revision: Revision) -> QuerySet[Revision]:
    """Other revisions, of any service, that are by their inference config the same thing."""
    return (
        Revision.objects.with_parts()
        .filter(fingerprint=revision.fingerprint)
        .exclude(pk=revision.pk)
    )


def fingerprint_twins(revisions: Sequence[Revision]) -> dict[int, list[Revision]]:
    """For revisions already loaded, the others among them with the same fingerprint,
    oldest first: `same_fingerprint` without a query per revision."""
    by_fingerprint: dict[str, list[Revision]] = {}
    for revision in sorted(revisions, key=lambda r: (r.service_id, r.number)):
        by_fingerprint.setdefault(revision.fingerprint, []).append(revision)
    return {
        revision.pk: [
            twin for twin in by_fingerprint[revision.fingerprint] if twin.pk != revision.pk
        ]
        for revision in revisions
    }


def service_revisions(service: Service) -> list[RevisionForPage]:
    """A service's revisions, newest first, each with `.same_as` (labels of its twins in
    the service), `.locks` (why it may not change) and `.license_problems` (its asset's
    license is pending, rejected or unaccepted). Queries: the revisions, whatever the
    registered lock rules need for all of them at once, and the acceptances of gated
    licenses."""
    revisions = cast(
        "list[RevisionForPage]", list(service.revisions.with_parts().order_by("-number"))
    )
    twins = fingerprint_twins(revisions)
    reasons = locks.reasons_for_many(revisions)
    problems = license_problems_by_asset(
        {revision.model_asset_id: revision.model_asset for revision in revisions}.values()
    )
    for revision in revisions:
        revision.same_as = [twin.label for twin in twins[revision.pk]]
        revision.locks = reasons[revision.pk]
        revision.license_problems = problems[revision.model_asset_id]
    return revisions


def capabilities_of(revision: Revision) -> list[CapabilityForPage]:
    """The revision's capabilities, each with `.stale`: verified, but for another
    fingerprint than the revision has now (its asset or runtime changed since)."""
    capabilities = cast(
        "list[CapabilityForPage]", list(Capability.objects.filter(revision=revision))
    )
    for capability in capabilities:
        capability.stale = (
            capability.status == Capability.Status.VERIFIED
            and capability.verified_fingerprint != revision.fingerprint
        )
    return capabilities


def capabilities_left_behind(revision: Revision) -> list[str]:
    """The kinds its source revision declares that a copy does not (see
    `services.new_revision_from`): empty for a revision made from nothing."""
    if revision.based_on_id is None:
        return []
    copied = Capability.objects.filter(revision=revision).values("kind")
    return list(
        Capability.objects.filter(revision_id=revision.based_on_id)
        .exclude(kind__in=copied)
        .order_by("kind")
        .values_list("kind", flat=True)
    )


class FingerprintCheck(NamedTuple):
    components: FingerprintComponents
    # The stored fingerprint no longer matches its components: the verbs keep it
    # true, so a row was changed outside them.
    stale: bool


def fingerprint_check(revision: Revision) -> FingerprintCheck:
    """What the revision's fingerprint is computed from, and whether it still matches."""
    parts = (
        revision.model_asset,
        revision.runtime,
        revision.context_limit,
        revision.gateway_policy,
    )
    return FingerprintCheck(
        components=fingerprint_components(*parts),
        stale=compute_fingerprint(*parts) != revision.fingerprint,
    )
