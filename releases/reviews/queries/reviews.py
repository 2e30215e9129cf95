"""Reading reviews for pages and the API: the lists, one review with its links, a
service's review status and open actions, the catalog's column, and what home lists.

Each read is a fixed number of queries, whatever the number of reviews, triggers or
actions shown.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Literal

from django.db.models import (
    Case,
    Count,
    IntegerField,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _

from ledger.models import Event, Service
from lib.actors import Requester
from releases.models import Review, ReviewAction, ReviewTrigger
from releases.models.periodic_reviews import ReviewQuerySet

MAX_ATTENTION_REVIEWS = 10
Urgency = Literal["act", "look"]


def utc_today() -> dt.date:
    return timezone.now().astimezone(dt.UTC).date()


def with_triggers(reviews: ReviewQuerySet) -> QuerySet[Review]:
    """Reviews with their service, people and triggers (one query more for the triggers)."""
    return reviews.for_page().prefetch_related(
        Prefetch("triggers", queryset=ReviewTrigger.objects.order_by("detected_at", "pk"))
    )


def review_list_queryset() -> QuerySet[Review]:
    """Every review: those still to do first, then concluded ones; each by due date."""
    return with_triggers(
        Review.objects.annotate(
            done=Case(
                When(state=Review.State.CONCLUDED, then=Value(1)),
                default=Value(0),
                output_field=IntegerField(),
            )
        ).order_by("done", "due_on", "-pk")
    )


def my_reviews(user: Requester) -> QuerySet[Review]:
    """The person's open reviews, due soonest first (the index releases_review_mine_idx)."""
    if user is None or not user.is_authenticated:
        return Review.objects.none()
    return with_triggers(Review.objects.not_concluded().filter(assignee=user)).order_by(
        "due_on", "pk"
    )


def is_late(review: Review, today: dt.date | None = None) -> bool:
    """Past its due date and not concluded, whether or not the sweep marked it yet."""
    return review.is_open and review.due_on < (today or utc_today())


# ---------------------------------------------------------------- one review


@dataclass(frozen=True)
class Link:
    label: str
    url: str


def trigger_links(trigger: ReviewTrigger, service: Service) -> list[Link]:
    """Where to look at what a trigger found: the runs, reports, assets and revisions its
    numbers name."""
    n: dict[str, Any] = trigger.numbers if isinstance(trigger.numbers, dict) else {}
    slug = service.slug
    links: list[Link] = []
    kind = trigger.kind
    if kind == ReviewTrigger.Kind.CADENCE and n.get("last_review"):
        links.append(
            Link(
                f"review #{n['last_review']}",
                reverse("releases:review_detail", args=[n["last_review"]]),
            )
        )
    elif kind in (ReviewTrigger.Kind.LATENCY_DRIFT, ReviewTrigger.Kind.ERROR_RATE_DRIFT):
        links.append(
            Link("the daily trend", reverse("releases:service_detail", args=[slug]) + "#run-trend")
        )
        if n.get("baseline_report") and n.get("revision_number"):
            links.append(
                Link(
                    f"the {n.get('baseline_workload')} load test at release",
                    reverse(
                        "ledger:loadtest_detail",
                        args=[slug, n["revision_number"], n["baseline_report"]],
                    ),
                )
            )
    elif kind in (ReviewTrigger.Kind.LICENSE, ReviewTrigger.Kind.ASSET_DEPRECATED):
        if n.get("asset"):
            links.append(
                Link(
                    str(n.get("asset_label") or "the asset"),
                    reverse("ledger:asset_detail", args=[n["asset"]]),
                )
            )
    elif kind == ReviewTrigger.Kind.ROLLBACK_VERIFICATION:
        links.append(Link(f"run #{n.get('run')}", reverse("replay:run_detail", args=[n["run"]])))
        if n.get("target_number"):
            links.append(
                Link(
                    f"target {n.get('target')}",
                    reverse("ledger:revision_detail", args=[slug, n["target_number"]]),
                )
            )
    elif kind == ReviewTrigger.Kind.EVIDENCE_EXPIRED and n.get("revision_number"):
        for item in n.get("reports") or []:
            links.append(
                Link(
                    f"{item.get('workload')} load test",
                    reverse(
                        "ledger:loadtest_detail",
                        args=[slug, n["revision_number"], item.get("report")],
                    ),
                )
            )
    elif kind == ReviewTrigger.Kind.REPLAY_REGRESSION:
        for item in n.get("runs") or []:
            links.append(
                Link(f"run #{item.get('run')}", reverse("replay:run_detail", args=[item["run"]]))
            )
    elif kind == ReviewTrigger.Kind.ENGINE_OUTDATED and n.get("runtime"):
        links.append(Link(n["runtime"], reverse("ledger:runtime_detail", args=[n["runtime"]])))
    elif kind == ReviewTrigger.Kind.COST_DRIFT:
        links.append(
            Link("the cost page", reverse("releases:service_cost", args=[slug]) + "?days=7")
        )
    elif kind == ReviewTrigger.Kind.QUOTA_PRESSURE and n.get("policy_version"):
        url = reverse("releases:gateway_policy_version", args=[slug, n["policy_version"]])
        if n.get("in_policy"):
            links.append(
                Link(
                    f"{n.get('tenant')}'s quota in {n.get('policy')}",
                    f"{url}#tenant-{n.get('tenant')}",
                )
            )
        else:
            links.append(Link(f"gateway policy {n.get('policy')}", url))
    return links


def review_for_page(pk: int) -> Review | None:
    """One review with everything its page shows: triggers, checklist, actions (four
    queries)."""
    return (
        with_triggers(Review.objects.filter(pk=pk))
        .select_related("started_by", "service__live_revision")
        .prefetch_related(
            Prefetch("items", queryset=_items()),
            Prefetch(
                "actions",
                queryset=ReviewAction.objects.select_related("owner", "done_by").order_by(
                    "due_on", "pk"
                ),
            ),
        )
        .first()
    )


def _items() -> QuerySet[Any]:
    from releases.models import ReviewChecklistItem

    return ReviewChecklistItem.objects.select_related("answered_by").order_by("position")


def review_events(review: Review) -> list[Event]:
    """The review's story from the ledger, oldest first."""
    return list(Event.objects.for_subject("releases.review", review.pk).order_by("sequence"))


# ---------------------------------------------------------------- the service page


@dataclass(frozen=True)
class ServiceReviews:
    open: Review | None
    last: Review | None
    actions: list[ReviewAction]
    next_due: dt.date | None
    today: dt.date


def service_reviews(service: Service) -> ServiceReviews:
    """The open review, the last concluded one, and the actions not done yet (three
    queries)."""
    open_review = with_triggers(Review.objects.not_concluded().filter(service=service)).first()
    last = (
        Review.objects.filter(service=service, state=Review.State.CONCLUDED)
        .select_related("concluded_by")
        .order_by("-concluded_at", "-pk")
        .first()
    )
    actions = list(
        ReviewAction.objects.filter(service=service, done_at__isnull=True)
        .select_related("owner", "review")
        .order_by("due_on", "pk")
    )
    if last is not None:
        next_due = last.next_due_on
    elif service.live_revision_id is not None:
        next_due = service.created_at.astimezone(dt.UTC).date() + dt.timedelta(
            days=service.review_cadence_days
        )
    else:
        next_due = None
    return ServiceReviews(open_review, last, actions, next_due, utc_today())


# ---------------------------------------------------------------- the catalog


def with_review_status(services: QuerySet[Service]) -> QuerySet[Service]:
    """Each service's open review (id, state, due date), in the catalog's own query."""
    open_review = Review.objects.filter(service=OuterRef("pk")).not_concluded()
    return services.annotate(
        review_id=Subquery(open_review.values("pk")[:1]),
        review_state=Subquery(open_review.values("state")[:1]),
        review_due_on=Subquery(open_review.values("due_on")[:1]),
    )


REVIEW_FILTERS = [
    ("overdue", "overdue"),
    ("open", "open (any)"),
    ("none", "no open review"),
]


def filter_review_status(services: QuerySet[Service], value: str) -> QuerySet[Service]:
    reviews = Review.objects.not_concluded()
    if value == "overdue":
        late = reviews.filter(Q(state=Review.State.OVERDUE) | Q(due_on__lt=utc_today()))
        return services.filter(pk__in=late.values("service_id"))
    if value == "open":
        return services.filter(pk__in=reviews.values("service_id"))
    if value == "none":
        return services.exclude(pk__in=reviews.values("service_id"))
    return services


# ---------------------------------------------------------------- home, metrics


def attention_items(user: Requester) -> list[tuple[Urgency, str, str, str]]:
    """(urgency, subject, text, url) for home: the person's open reviews, overdue ones
    to act on; and their actions past due (two queries)."""
    if user is None or not user.is_authenticated:
        return []
    today = utc_today()
    items: list[tuple[Urgency, str, str, str]] = []
    reviews = (
        Review.objects.not_concluded()
        .filter(assignee=user)
        .select_related("service")
        .order_by("due_on", "pk")[:MAX_ATTENTION_REVIEWS]
    )
    for review in reviews:
        late = is_late(review, today)
        due = {"review": review.pk, "due": f"{review.due_on:%Y-%m-%d}"}
        text = (
            _("overdue: review #%(review)s is yours and was due %(due)s") % due
            if late
            else _("review #%(review)s is yours and due %(due)s") % due
        )
        items.append(
            (
                "act" if late else "look",
                review.service.slug,
                text,
                reverse("releases:review_detail", args=[review.pk]),
            )
        )
    actions = (
        ReviewAction.objects.filter(owner=user, done_at__isnull=True, due_on__lt=today)
        .select_related("service")
        .order_by("due_on", "pk")[:MAX_ATTENTION_REVIEWS]
    )
    for action in actions:
        items.append(
            (
                "act",
                action.service.slug,
                _("overdue: your action from review #%(review)s was due %(due)s: %(what)s")
                % {
                    "review": action.review_id,
                    "due": f"{action.due_on:%Y-%m-%d}",
                    "what": action.description[:120],
                },
                reverse("releases:service_detail", args=[action.service.slug]) + "#reviews",
            )
        )
    return items


def review_work_counts() -> dict[str, int]:
    """The metrics gauge (lib.metrics.register_gauges), in one query: reviews not
    concluded, and of those the ones past due."""
    counts = Review.objects.not_concluded().aggregate(
        open=Count("pk"),
        overdue=Count("pk", filter=Q(state=Review.State.OVERDUE) | Q(due_on__lt=utc_today())),
    )
    return {"open": counts["open"], "overdue": counts["overdue"]}
