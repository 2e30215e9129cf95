"""Revisions rolled back off a service: never a default rollback target again until a
release puts them live.

A rollback takes a revision off a service: the one that was live (`from_revision`), or,
when it ends a rollout in flight, the release's candidate, which carried part of the
traffic without being live. Pressing *Record rollback* with the default target must not
put it back: the rollback plan, the incident screen, the rollback form and readiness
pass over it, and going back to it anyway takes a confirmation with a reason. It stays
so until a release of it is released (reaches 100 %) after the rollback.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Exists, OuterRef, QuerySet

from lib.querysets import built_once
from releases.models import Release, RollbackEvent


@dataclass(frozen=True)
class RolledBack:
    """The newest rollback that took a revision off its service."""

    revision_id: int
    revision_number: int
    rollback_id: int
    at: dt.datetime
    reason: str

    @property
    def label(self) -> str:
        return f"r{self.revision_number}"

    def sentence(self, service_slug: str) -> str:
        """As the ledger records it (English, UTC): e.g. in a readiness reason."""
        at = self.at.astimezone(dt.UTC)
        return (
            f"{self.label} was rolled back off {service_slug} at {at:%Y-%m-%d %H:%M} UTC by "
            f"rollback #{self.rollback_id}: {self.reason}"
        )


@built_once
def _rollbacks() -> QuerySet[RollbackEvent]:
    def released_since(revision: str) -> Exists:
        return Exists(
            Release.objects.filter(
                service_id=OuterRef("service_id"),
                state=Release.State.RELEASED,
                to_revision_id=OuterRef(revision),
                closed_at__gt=OuterRef("started_at"),
            )
        )

    return RollbackEvent.objects.annotate(
        live_released_since=released_since("from_revision_id"),
        candidate_released_since=released_since("release__to_revision_id"),
    ).order_by("-started_at", "-pk")


@dataclass(frozen=True)
class NewestRollback:
    """A service's newest rollback, and what its SRE said of the caches after it."""

    rollback_id: int
    at: dt.datetime
    prefix_cache: str  # a `RollbackEvent.CacheAnswer`; "" while not answered
    response_cache: str


@dataclass(frozen=True)
class ServiceRollbacks:
    rolled_back: dict[int, RolledBack]
    newest: NewestRollback | None = None


def rollbacks_by_service(service_ids: Iterable[int]) -> dict[int, ServiceRollbacks]:
    """Each service's revisions rolled back off it (`rolled_back_revisions`) and its
    newest rollback, by service id (one query, none for none)."""
    ids = set(service_ids)
    if not ids:
        return {}
    rows = (
        _rollbacks()
        .filter(service_id__in=ids)
        .values_list(
            "service_id",
            "pk",
            "started_at",
            "reason",
            "from_revision_id",
            "from_revision__number",
            "to_revision_id",
            "release__to_revision_id",
            "release__to_revision__number",
            "live_released_since",
            "candidate_released_since",
            "prefix_cache",
            "response_cache",
        )  # type: ignore[misc]  # the stubs do not see the annotations
    )
    found: dict[int, dict[int, RolledBack]] = {pk: {} for pk in ids}
    newest: dict[int, NewestRollback] = {}
    decided: set[tuple[int, int]] = set()
    # Newest first: a revision's newest rollback decides, and a release after it clears it.
    for (
        service_id,
        pk,
        started_at,
        reason,
        live_id,
        live_number,
        to_id,
        candidate_id,
        candidate_number,
        live_again,
        candidate_again,
        prefix_cache,
        response_cache,
    ) in rows:
        newest.setdefault(service_id, NewestRollback(pk, started_at, prefix_cache, response_cache))
        for revision_id, number, again in (
            (live_id, live_number, live_again),
            (candidate_id, candidate_number, candidate_again),
        ):
            if revision_id is None or revision_id == to_id:
                continue
            if (service_id, revision_id) in decided:
                continue
            decided.add((service_id, revision_id))
            if not again:
                found[service_id][revision_id] = RolledBack(
                    revision_id, number, pk, started_at, reason
                )
    return {pk: ServiceRollbacks(found[pk], newest.get(pk)) for pk in ids}


def rolled_back_by_service(service_ids: Iterable[int]) -> dict[int, dict[int, RolledBack]]:
    """`rolled_back_revisions` of many services, by service id (one query, none for none)."""
    return {pk: read.rolled_back for pk, read in rollbacks_by_service(service_ids).items()}


def service_rollbacks(service_id: int) -> ServiceRollbacks:
    """`rollbacks_by_service` of one service (one query)."""
    return rollbacks_by_service([service_id])[service_id]


def rolled_back_revisions(service_id: int) -> dict[int, RolledBack]:
    """The revisions rolled back off the service that no release has put live since, by
    revision id, each with its newest rollback (one query)."""
    return service_rollbacks(service_id).rolled_back
