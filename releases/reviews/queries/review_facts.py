"""What the review sweep reads about a batch of services, in a constant number of queries.

`gather(service_ids, today=…)` answers one `ServiceFacts` per service with a live
revision: its run evidence of the last 60 days, the live revision's load tests,
capabilities and latest replay runs (with the tags of their sample sets), the
rollback plan in force with its target's last verification, the license events of the
live asset, the service's reviews (the open one, the last concluded one, and what
concluded reviews acknowledged), the last RECENT_DAYS days priced and split
(the stored cost, `releases.cost.queries.stored_cost_days`) and each tenant's rate-limit hits on those days. The judgements (`review_triggers`) are pure functions
of these facts, so the sweep's cost grows with the number of batches, not of services.

Each read is one query for the whole batch (about fifteen in all, one of them the cost's);
none is per service.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, TypedDict

from django.contrib.auth import get_user_model
from django.db.models import Max, Q, Sum
from django.utils import timezone

from ledger import queries as ledger_queries
from ledger.models import (
    Capability,
    Event,
    LoadTestReport,
    Revision,
    RunBreakdown,
    RunSummary,
    Runtime,
    Service,
)
from ledger.models.run_evidence import UNATTRIBUTED
from ledger.roles import Role
from releases.cost.queries import CostDay, stored_cost_days
from releases.governance.queries import plan as plans
from releases.governance.queries.rolled_back import rolled_back_by_service
from releases.models import Release, Review, ReviewTrigger
from replay.models import Run, Sample

# Run evidence read for each service: the trend's window (the drift's baseline week is
# the live revision's first in it).
EVIDENCE_DAYS = ledger_queries.TREND_DAYS
# The recent window the drift rules judge: the last full days (today is not over yet).
RECENT_DAYS = 7
LIVE_CHANGED = "service.live_revision_changed"
LICENSE_ACTIONS = ("model_asset.updated", "model_asset.license_reviewed")


class Day(TypedDict):
    """One day of run evidence: the gateway's numbers, else the scrape's."""

    date: dt.date
    source: str
    revision_id: int | None
    requests: int | None
    ttft_p95_ms: float | None
    error_rate: float | None
    timeouts: int | None  # None: the day's source did not say


@dataclass(frozen=True)
class LicenseChange:
    sequence: int
    at: dt.datetime
    actor: str
    action: str
    before: dict[str, Any]
    after: dict[str, Any]


@dataclass
class ServiceFacts:
    service: Service  # team, live revision with its asset, license and runtime; task types
    days: list[Day] = field(default_factory=list)
    reports: list[LoadTestReport] = field(default_factory=list)
    capabilities: list[Capability] = field(default_factory=list)
    plan: plans.RollbackPlan | None = None
    last_verification: Run | None = None
    latest_runs: list[Run] = field(default_factory=list)  # newest run of each set on live
    set_tags: dict[int, set[str]] = field(default_factory=dict)  # sample set id → its tags
    license_changes: list[LicenseChange] = field(default_factory=list)
    license_accepted: bool = False
    open_review: Review | None = None
    open_triggers: set[tuple[str, str]] = field(default_factory=set)
    last_concluded: Review | None = None
    acknowledged: set[tuple[str, str]] = field(default_factory=set)
    # The recent window's service-days priced and split, whichever revision served them.
    cost_days: list[CostDay] = field(default_factory=list)
    # tenant → day → the calls the gateway refused for the tenant's rate limit, in the
    # recent window, days without a refusal left out.
    rate_limit_hits: dict[str, dict[dt.date, int]] = field(default_factory=dict)

    @property
    def live(self) -> Revision:
        live = self.service.live_revision
        assert live is not None  # gather() answers services with a live revision only
        return live


@dataclass(frozen=True)
class SweepContext:
    """What the sweep reads once, whatever the number of services."""

    today: dt.date
    now: dt.datetime
    engine_versions: dict[str, list[str]]  # engine → every version the registry knows
    platform_people: list[tuple[int, str, set[int]]]  # (user id, username, team ids)


def sweep_context(*, now: dt.datetime | None = None) -> SweepContext:
    """Two queries: the engine versions of every runtime, and who holds platform SRE."""
    now = now or timezone.now()
    versions: dict[str, set[str]] = defaultdict(set)
    for engine, version in (
        Runtime.objects.order_by().values_list("engine", "engine_version").distinct()
    ):
        versions[engine].add(version)
    User = get_user_model()
    people: dict[int, tuple[str, set[int]]] = {}
    rows = (
        User.objects.filter(is_active=True, groups__name=Role.PLATFORM_SRE)
        .values_list("pk", "username", "teams__pk")
        .order_by("username", "pk")
    )
    for pk, username, team_id in rows:
        _, teams = people.setdefault(pk, (username, set()))
        if team_id is not None:
            teams.add(team_id)
    return SweepContext(
        today=now.astimezone(dt.UTC).date(),
        now=now,
        engine_versions={engine: sorted(found) for engine, found in versions.items()},
        platform_people=[(pk, name, teams) for pk, (name, teams) in people.items()],
    )


def services_to_review() -> list[int]:
    """Every service with a live revision, in a stable order (one query): a service that
    serves nothing has nothing to review."""
    return list(
        Service.objects.filter(live_revision__isnull=False)
        .order_by("pk")
        .values_list("pk", flat=True)
    )


def gather(service_ids: list[int], *, context: SweepContext) -> dict[int, ServiceFacts]:
    """The facts of each service of the batch that has a live revision."""
    services = list(
        Service.objects.filter(pk__in=service_ids, live_revision__isnull=False)
        .select_related(
            "team",
            "live_revision__model_asset__license",
            "live_revision__runtime",
            "live_revision__gateway_policy",  # the tenants' quotas in force
        )
        .prefetch_related("task_types")
        .annotate(plan_release=plans.plan_release_id())
        .order_by("pk")
    )
    facts = {service.pk: ServiceFacts(service=service) for service in services}
    if not facts:
        return facts
    ids = list(facts)
    live_ids = [f.live.pk for f in facts.values()]
    _read_days(facts, ids, context.today)
    _read_reports(facts, live_ids)
    _read_capabilities(facts, live_ids)
    _read_plans(facts)
    _read_verifications(facts)
    _read_latest_runs(facts, live_ids)
    _read_license_changes(facts)
    _read_reviews(facts, ids, context.today)
    _read_cost(facts, context.today)
    _read_rate_limit_hits(facts, ids, context.today)
    return facts


# ---------------------------------------------------------------- the reads


def _read_days(facts: dict[int, ServiceFacts], ids: list[int], today: dt.date) -> None:
    rows = (
        RunSummary.objects.filter(
            service_id__in=ids, date__gte=today - dt.timedelta(days=EVIDENCE_DAYS), date__lt=today
        )
        .order_by("service_id", "date", "source")  # "gateway" before "scrape"
        .values_list(
            "service_id",
            "date",
            "source",
            "revision_id",
            "requests",
            "ttft_p95_ms",
            "error_rate",
            "timeouts",
        )
    )
    for service_id, date, source, revision_id, requests, ttft, error_rate, timeouts in rows:
        days = facts[service_id].days
        if days and days[-1]["date"] == date:
            continue  # the gateway's day already holds it
        days.append(
            Day(
                date=date,
                source=source,
                revision_id=revision_id,
                requests=requests,
                ttft_p95_ms=ttft,
                error_rate=error_rate,
                timeouts=timeouts,
            )
        )


def _read_reports(facts: dict[int, ServiceFacts], live_ids: list[int]) -> None:
    by_revision = {f.live.pk: f for f in facts.values()}
    reports = (
        LoadTestReport.objects.with_context()
        .filter(revision_id__in=live_ids)
        .defer("results", "warnings", "goodput_levels")
        .order_by("revision_id", "-measured_at", "-pk")
    )
    for report in reports:
        by_revision[report.revision_id].reports.append(report)


def _read_capabilities(facts: dict[int, ServiceFacts], live_ids: list[int]) -> None:
    by_revision = {f.live.pk: f for f in facts.values()}
    for capability in Capability.objects.filter(revision_id__in=live_ids).order_by(
        "revision_id", "kind"
    ):
        by_revision[capability.revision_id].capabilities.append(capability)


def _read_plans(facts: dict[int, ServiceFacts]) -> None:
    """The rollback plan in force, as `releases.governance.queries.plan.rollback_plan` finds it, for
    the whole batch: the releases named by the `plan_release` annotation in one query;
    for services without one, the revision that served before the live one, read from
    the serving history in the chain (one query for the events, one for the revisions).
    Never a revision rolled back off the service (one query for them all): a plan whose
    target was is read again as `rollback_plan` reads it."""
    planned = {pk: getattr(f.service, "plan_release", None) for pk, f in facts.items()}
    rolled_back = rolled_back_by_service(facts)
    release_ids = [release_id for release_id in planned.values() if release_id]
    releases = Release.objects.select_related(
        "to_revision",
        "rollback_target__model_asset",
        "rollback_target__runtime",
        "from_revision__model_asset",
        "from_revision__runtime",
    ).in_bulk(release_ids)
    without = {}
    for service_facts in facts.values():
        release = releases.get(planned[service_facts.service.pk])
        passing_over = rolled_back[service_facts.service.pk]
        if release is not None:
            service_facts.plan = plans.pass_over_rolled_back(
                service_facts.service, plans.plan_of(release), passing_over
            )
        else:
            without[service_facts.service.pk] = service_facts
    if not without:
        return
    previous: dict[int, int] = {}
    changes = (
        Event.objects.filter(service_id__in=list(without), action=LIVE_CHANGED)
        .order_by("service_id", "-sequence")
        .values_list("service_id", "payload")
    )
    for service_id, payload in changes:
        if service_id in previous:
            continue
        revision_id = (json.loads(payload).get("after") or {}).get("live_revision")
        if (
            isinstance(revision_id, int)
            and revision_id != without[service_id].live.pk
            and revision_id not in rolled_back[service_id]
        ):
            previous[service_id] = revision_id
    revisions = Revision.objects.select_related("model_asset", "runtime").in_bulk(
        list(previous.values())
    )
    for service_id, service_facts in without.items():
        target = revisions.get(previous.get(service_id, 0))
        service_facts.plan = plans.RollbackPlan(
            release=None, target=target, rolled_back=rolled_back[service_id]
        )


def _read_verifications(facts: dict[int, ServiceFacts]) -> None:
    """The last verification replay of each plan's target (`replay.queries.last_verification`
    of all of them at once)."""
    targets = {f.plan.target.pk for f in facts.values() if f.plan and f.plan.target}
    latest: dict[int, Run] = {}
    runs = (
        Run.objects.filter(
            revision_id__in=targets, trigger=Run.Trigger.VERIFICATION, state=Run.State.FINISHED
        )
        .select_related("backend", "sample_set")
        .order_by("revision_id", "-finished_at", "-pk")
    )
    for run in runs:
        latest.setdefault(run.revision_id, run)
    for service_facts in facts.values():
        if service_facts.plan and service_facts.plan.target:
            service_facts.last_verification = latest.get(service_facts.plan.target.pk)


def _read_latest_runs(facts: dict[int, ServiceFacts], live_ids: list[int]) -> None:
    """The newest finished run of each sample set on each live revision (two queries),
    and the tags of those sets' samples (one)."""
    newest = (
        Run.objects.filter(revision_id__in=live_ids, state=Run.State.FINISHED)
        .values("revision_id", "sample_set__name")
        .annotate(last=Max("pk"))
        .values_list("last", flat=True)
    )
    runs = list(
        Run.objects.filter(pk__in=list(newest))
        .select_related("sample_set", "backend")
        .order_by("revision_id", "sample_set__name")
    )
    by_revision = {f.live.pk: f for f in facts.values()}
    for run in runs:
        by_revision[run.revision_id].latest_runs.append(run)
    tags: dict[int, set[str]] = defaultdict(set)
    set_ids = {run.sample_set_id for run in runs}
    for set_id, sample_tags in Sample.objects.filter(sample_set_id__in=set_ids).values_list(
        "sample_set_id", "tags"
    ):
        if isinstance(sample_tags, list):
            tags[set_id].update(str(tag) for tag in sample_tags)
    for service_facts in facts.values():
        service_facts.set_tags = {
            run.sample_set_id: tags.get(run.sample_set_id, set())
            for run in service_facts.latest_runs
        }


def _changes_license(action: str, before: dict[str, Any], after: dict[str, Any]) -> bool:
    """A change of the asset's license, a revoked approval, or a rejection."""
    if action == "model_asset.updated" and "license" in after:
        return True
    was, now = before.get("license_approval"), after.get("license_approval")
    if now is None:
        return False
    return (was == "approved" and now != "approved") or now == "rejected"


def _read_license_changes(facts: dict[int, ServiceFacts]) -> None:
    """The live assets' license changes since their revision first served (one query for
    the events, at most one for the acceptances of gated licenses)."""
    assets = {f.live.model_asset_id: f.live.model_asset for f in facts.values()}
    since = min(
        (f.live.served_at for f in facts.values() if f.live.served_at is not None),
        default=None,
    )
    events = Event.objects.filter(
        subject_type="ledger.modelasset",
        subject_id__in=[str(pk) for pk in assets],
        action__in=LICENSE_ACTIONS,
    )
    if since is not None:
        events = events.filter(created_at__gte=since)
    found: dict[int, list[LicenseChange]] = defaultdict(list)
    for sequence, at, actor, action, subject_id, payload in events.order_by("sequence").values_list(
        "sequence", "created_at", "actor_label", "action", "subject_id", "payload"
    ):
        data = json.loads(payload)
        before, after = data.get("before") or {}, data.get("after") or {}
        if _changes_license(action, before, after):
            found[int(subject_id)].append(
                LicenseChange(sequence, at, actor, action, dict(before), dict(after))
            )
    accepted = ledger_queries.accepted_asset_ids(assets.values())
    for service_facts in facts.values():
        live = service_facts.live
        served = live.served_at
        service_facts.license_changes = [
            change
            for change in found.get(live.model_asset_id, [])
            if served is None or change.at >= served
        ]
        service_facts.license_accepted = live.model_asset_id in accepted


def _read_reviews(facts: dict[int, ServiceFacts], ids: list[int], today: dt.date) -> None:
    """The open review and its triggers, the last concluded review, and the triggers that
    concluded reviews acknowledged until a next due date still ahead (three queries)."""
    reviews = Review.objects.filter(service_id__in=ids)
    for review in reviews.order_by("service_id", "-concluded_at", "-pk").only(
        "pk", "service_id", "state", "due_on", "concluded_at", "next_due_on", "raised_at"
    ):
        service_facts = facts[review.service_id]
        if review.state != Review.State.CONCLUDED:
            service_facts.open_review = review
        elif service_facts.last_concluded is None:
            service_facts.last_concluded = review
    triggers = ReviewTrigger.objects.filter(review__service_id__in=ids).filter(
        Q(review__state__in=Review.OPEN_STATES)
        | Q(review__state=Review.State.CONCLUDED, review__next_due_on__gt=today)
    )
    for service_id, state, kind, key in triggers.values_list(
        "review__service_id", "review__state", "kind", "key"
    ):
        if state == Review.State.CONCLUDED:
            facts[service_id].acknowledged.add((kind, key))
        else:
            facts[service_id].open_triggers.add((kind, key))


def _read_cost(facts: dict[int, ServiceFacts], today: dt.date) -> None:
    """The recent window's service-days as the cost pages read them (the stored cost,
    `stored_cost_days`: one query for the whole batch)."""
    by_slug = {f.service.slug: f for f in facts.values()}
    first, last = today - dt.timedelta(days=RECENT_DAYS), today - dt.timedelta(days=1)
    for day in stored_cost_days(first, last, list(by_slug)):
        by_slug[day.service].cost_days.append(day)


def _read_rate_limit_hits(facts: dict[int, ServiceFacts], ids: list[int], today: dt.date) -> None:
    """Each tenant's rate-limit hits a day in the recent window (one query): from the
    breakdown rows of the gateway's summaries, the gateway being what refuses a call over
    its quota (an engine's metrics never see it). Calls the gateway could not attribute
    are no tenant's quota."""
    rows = (
        RunBreakdown.objects.filter(
            summary__service_id__in=ids,
            summary__source=RunSummary.Source.GATEWAY,
            summary__date__gte=today - dt.timedelta(days=RECENT_DAYS),
            summary__date__lt=today,
            rate_limit_hits__gt=0,
        )
        .exclude(tenant=UNATTRIBUTED)
        .values_list("summary__service_id", "tenant", "summary__date")
        .annotate(hits=Sum("rate_limit_hits"))
        .order_by("summary__service_id", "tenant", "summary__date")
    )
    for service_id, tenant, date, hits in rows:
        facts[service_id].rate_limit_hits.setdefault(tenant, {})[date] = hits
