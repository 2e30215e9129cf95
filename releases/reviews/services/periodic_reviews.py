"""Periodic and triggered reviews: the daily sweep that raises them, and the verbs that
conduct them (start, answer the checklist, conclude, reassign, mark an action done).

Every change goes through one of these functions: it takes the row lock, checks who may
(`releases.permissions`), writes, and appends its Event in the same transaction. A
concluded review is read-only (the verbs refuse with TransitionRefused, and the database
refuses an UPDATE of it).

The sweep (`sweep_reviews`, the `raise_reviews` task and command) reads services in
batches (`releases.reviews.queries.review_facts.gather`: a constant number of queries per batch),
judges each with `releases.reviews.queries.review_triggers`, and raises a review for a service
whose triggers are new: one open review per service, a new trigger on an open review is
added to it, and a trigger a conclusion acknowledged stays quiet until the service's next
due date.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from ledger.chain import append_event
from ledger.models import Service
from lib.actors import Actor
from releases import permissions
from releases.governance.services.errors import TransitionRefused
from releases.models import Review, ReviewAction, ReviewChecklistItem, ReviewTrigger
from releases.reviews.queries import review_facts
from releases.reviews.queries.review_triggers import Finding, ItemPrefill, checklist_of, findings_of
from replay.services.common import try_singleton_lock

logger = logging.getLogger(__name__)

# Services judged per batch: one set of reads each (about twenty queries).
SWEEP_BATCH = 250
NOTE_MAX_CHARS = 5000


# An answer: {"key", "answer", "note"}; an action: {"description", "owner" (a username),
# "due_on" (a date)}.
Answer = Mapping[str, Any]
Action = Mapping[str, Any]


def _today(now: dt.datetime) -> dt.date:
    return now.astimezone(dt.UTC).date()


def due_days(tier: str) -> int:
    """How long a review of a service of this tier may take (settings.REVIEW_DUE_DAYS)."""
    limits = settings.REVIEW_DUE_DAYS
    return limits.get(tier, min(limits.values()))


def _lock(review: Review) -> Review:
    return Review.objects.select_for_update().select_related("service__team").get(pk=review.pk)


def _refuse_concluded(review: Review) -> None:
    if review.state == Review.State.CONCLUDED:
        when = review.concluded_at.strftime("%Y-%m-%d %H:%M %Z") if review.concluded_at else ""
        raise TransitionRefused(
            f"Review #{review.pk} was concluded ({review.get_outcome_display().lower()}) on "
            f"{when}: it is read-only.",
            state=review.state,
        )


def _trigger_json(trigger: ReviewTrigger | Finding) -> dict[str, Any]:
    return {
        "kind": trigger.kind,
        "key": trigger.key,
        "summary": trigger.summary,
        "numbers": trigger.numbers,
    }


# ---------------------------------------------------------------- raising


@transaction.atomic
def raise_review(
    service: Service,
    *,
    actor: Actor,
    findings: Sequence[Finding],
    checklist: Sequence[ItemPrefill],
    assignee_id: int | None,
    now: dt.datetime | None = None,
) -> tuple[Review, list[ReviewTrigger], bool]:
    """A new review of `service` for `findings`, pre-filled with `checklist`; or, when one
    is open, the findings it does not hold yet added to it. Returns the review, the
    triggers written and whether the review is new. The service row lock serializes two
    sweeps, so a service never gets two open reviews."""
    permissions.ensure_can_manage_reviews(actor)
    if not findings:
        raise ValidationError({"triggers": "A review is raised for at least one reason."})
    now = now or timezone.now()
    Service.objects.select_for_update().filter(pk=service.pk).values_list("pk").first()
    review = Review.objects.select_for_update().filter(service=service).not_concluded().first()
    created = review is None
    added: list[ItemPrefill] = []
    if review is None:
        review = Review.objects.create(
            service=service,
            state=Review.State.OPEN,
            raised_at=now,
            due_on=_today(now) + dt.timedelta(days=due_days(service.tier)),
            assignee_id=assignee_id,
        )
        _add_items(review, checklist, after=0)
        held: set[tuple[str, str]] = set()
    else:
        held = set(review.triggers.values_list("kind", "key"))
        # An item that applies only now (a tenant under quota pressure) joins the open
        # review's checklist after its items; those it has keep their facts and answers.
        positions = dict(review.items.values_list("key", "position"))
        added = [item for item in checklist if item.key not in positions]
        _add_items(review, added, after=max(positions.values(), default=0))
    fresh = [f for f in findings if (f.kind, f.key) not in held]
    triggers = ReviewTrigger.objects.bulk_create(
        ReviewTrigger(
            review=review,
            kind=f.kind,
            key=f.key,
            summary=f.summary,
            numbers=f.numbers,
            detected_at=now,
        )
        for f in fresh
    )
    if created:
        append_event(
            actor=actor,
            action="review.raised",
            subject=review,
            subject_label=f"review #{review.pk} of {service.slug}",
            payload={
                "service": service.slug,
                "tier": service.tier,
                "raised_at": now,
                "due_on": review.due_on,
                "assignee": review.assignee.get_username() if review.assignee else None,
                "triggers": [_trigger_json(t) for t in triggers],
                "checklist": [{"key": item.key, "flags": list(item.flags)} for item in checklist],
            },
        )
    elif triggers or added:
        payload: dict[str, Any] = {
            "service": service.slug,
            "triggers": [_trigger_json(t) for t in triggers],
        }
        if added:
            payload["checklist_added"] = [
                {"key": item.key, "flags": list(item.flags)} for item in added
            ]
        append_event(
            actor=actor,
            action="review.trigger_added",
            subject=review,
            subject_label=f"review #{review.pk} of {service.slug}",
            payload=payload,
        )
    return review, triggers, created


def _add_items(review: Review, items: Sequence[ItemPrefill], *, after: int) -> None:
    ReviewChecklistItem.objects.bulk_create(
        ReviewChecklistItem(
            review=review,
            key=item.key,
            position=position,
            facts=list(item.facts),
            flags=list(item.flags),
            suggestion=(
                ReviewChecklistItem.Suggestion.ATTENTION
                if item.flags
                else ReviewChecklistItem.Suggestion.CLEAR
            ),
        )
        for position, item in enumerate(items, start=after + 1)
    )


@transaction.atomic
def mark_overdue(review: Review, *, now: dt.datetime | None = None) -> bool:
    """Open or in progress past its due date → overdue (the sweep calls it). False when
    it is not (any more): concluded, already overdue, or not yet due."""
    now = now or timezone.now()
    review = _lock(review)
    if review.state not in (Review.State.OPEN, Review.State.IN_PROGRESS):
        return False
    if review.due_on >= _today(now):
        return False
    before = review.state
    review.state = Review.State.OVERDUE
    review.overdue_since = now
    review.save(update_fields=["state", "overdue_since"])
    append_event(
        actor=None,
        action="review.overdue",
        subject=review,
        subject_label=f"review #{review.pk} of {review.service.slug}",
        payload={
            "service": review.service.slug,
            "before": {"state": before},
            "after": {"state": review.state},
            "due_on": review.due_on,
            "days_late": (_today(now) - review.due_on).days,
            "assignee": review.assignee.get_username() if review.assignee else None,
        },
    )
    return True


def default_assignee(service: Service, context: review_facts.SweepContext) -> int | None:
    """The service's platform owner: a platform SRE of its team, else any platform SRE
    (by username), else nobody (the review page says so)."""
    of_team = [pk for pk, _, teams in context.platform_people if service.team_id in teams]
    if of_team:
        return of_team[0]
    return context.platform_people[0][0] if context.platform_people else None


@dataclass(frozen=True)
class Raised:
    service: str
    review: int | None  # None on a dry run
    new: bool
    findings: list[Finding]


@dataclass
class SweepReport:
    scanned: int = 0
    batches: int = 0
    raised: list[Raised] = field(default_factory=list)
    overdue: list[tuple[int, str, dt.date]] = field(default_factory=list)
    skipped: bool = False  # another sweep held the lock
    dry_run: bool = False


def sweep_reviews(
    *,
    now: dt.datetime | None = None,
    dry_run: bool = False,
    batch_size: int = SWEEP_BATCH,
    service_ids: Iterable[int] | None = None,
) -> SweepReport:
    """Mark reviews past due overdue, then raise (or add to) a review of every service
    whose triggers are new. `dry_run`: judge everything, write nothing."""
    now = now or timezone.now()
    report = SweepReport(dry_run=dry_run)
    context = review_facts.sweep_context(now=now)
    due = (
        Review.objects.filter(
            state__in=(Review.State.OPEN, Review.State.IN_PROGRESS), due_on__lt=context.today
        )
        .select_related("service")
        .order_by("due_on", "pk")
    )
    for review in due:
        if dry_run or mark_overdue(review, now=now):
            report.overdue.append((review.pk, review.service.slug, review.due_on))
    ids = list(service_ids) if service_ids is not None else review_facts.services_to_review()
    for start in range(0, len(ids), batch_size):
        with transaction.atomic():
            if not dry_run and not try_singleton_lock("raise_reviews"):
                report.skipped = True
                logger.info("raise_reviews: another sweep is running; leaving it the work")
                return report
            _sweep_batch(ids[start : start + batch_size], context, report)
        report.batches += 1
    return report


def _sweep_batch(ids: list[int], context: review_facts.SweepContext, report: SweepReport) -> None:
    facts = review_facts.gather(ids, context=context)
    report.scanned += len(facts)
    for service_facts in facts.values():
        found = [
            f
            for f in findings_of(service_facts, context)
            if (f.kind, f.key) not in service_facts.acknowledged
            and (f.kind, f.key) not in service_facts.open_triggers
        ]
        if not found:
            continue
        service = service_facts.service
        if report.dry_run:
            report.raised.append(
                Raised(service.slug, None, service_facts.open_review is None, found)
            )
            continue
        # Built even when a review is open (no query: pure functions of the facts): it may
        # be concluded before the service row is locked, and a new review needs its own.
        review, triggers, created = raise_review(
            service,
            actor=None,
            findings=found,
            checklist=checklist_of(service_facts, context),
            assignee_id=default_assignee(service, context),
            now=context.now,
        )
        if triggers:
            written = {(t.kind, t.key) for t in triggers}
            report.raised.append(
                Raised(
                    service.slug,
                    review.pk,
                    created,
                    [f for f in found if (f.kind, f.key) in written],
                )
            )


# ---------------------------------------------------------------- conducting


@transaction.atomic
def start_review(review: Review, *, actor: Actor) -> Review:
    """The reviewer takes it up: open → in progress (an overdue review stays overdue)."""
    permissions.ensure_can_conduct_review(actor, review)
    review = _lock(review)
    _refuse_concluded(review)
    if review.started_at is not None:
        raise TransitionRefused(
            f"Review #{review.pk} is already {review.get_state_display().lower()}, started "
            f"{review.started_at:%Y-%m-%d %H:%M %Z}.",
            state=review.state,
        )
    before = _start(review, actor)
    append_event(
        actor=actor,
        action="review.started",
        subject=review,
        subject_label=f"review #{review.pk} of {review.service.slug}",
        payload={"before": {"state": before}, "after": {"state": review.state}},
    )
    return review


def _start(review: Review, actor: Actor) -> str:
    before = review.state
    review.started_at = timezone.now()
    review.started_by = actor
    if review.state == Review.State.OPEN:
        review.state = Review.State.IN_PROGRESS
    review.save(update_fields=["started_at", "started_by", "state"])
    return before


def _answer_problems(
    items: dict[str, ReviewChecklistItem], answers: Sequence[Answer]
) -> dict[str, str]:
    problems: dict[str, str] = {}
    allowed = ReviewChecklistItem.Answer.values
    seen: set[str] = set()
    for given in answers:
        key = str(given.get("key") or "")
        answer = str(given.get("answer") or "")
        note = str(given.get("note") or "").strip()
        if key not in items:
            problems[f"{key or '?'}.key"] = (
                f"{key!r} is not an item of this checklist; expected one of {', '.join(items)}."
            )
            continue
        if key in seen:
            problems[f"{key}.key"] = f"{key} is answered twice."
        seen.add(key)
        if answer not in allowed:
            problems[f"{key}.answer"] = (
                f"{answer!r} is not an answer; give ok, action_needed or not_applicable."
            )
        elif answer != ReviewChecklistItem.Answer.OK and not note:
            label = ReviewChecklistItem.Answer(answer).label.lower()
            problems[f"{key}.note"] = f"Say why the answer is {label}: the next reviewer reads it."
        if len(note) > NOTE_MAX_CHARS:
            problems[f"{key}.note"] = (
                f"A note holds at most {NOTE_MAX_CHARS} characters; this has {len(note)}."
            )
    return problems


@transaction.atomic
def answer_checklist(
    review: Review, *, actor: Actor, answers: Sequence[Answer]
) -> list[ReviewChecklistItem]:
    """Record the reviewer's answers (ok / action needed / not applicable, with a note;
    a note is required unless ok). The first answers start the review. Answers equal to
    the stored ones change nothing (a retried post appends no event). Returns the items
    that changed."""
    permissions.ensure_can_conduct_review(actor, review)
    if actor is None:
        raise ValidationError({"answers": "A checklist is answered by a person."})
    review = _lock(review)
    _refuse_concluded(review)
    items = {item.key: item for item in review.items.select_for_update().order_by("position")}
    problems = _answer_problems(items, answers)
    if problems:
        raise ValidationError(problems)
    now = timezone.now()
    changed: list[ReviewChecklistItem] = []
    recorded = []
    for given in answers:
        item = items[str(given["key"])]
        answer, note = str(given.get("answer")), str(given.get("note") or "").strip()
        if (item.answer, item.note) == (answer, note):
            continue
        recorded.append(
            {
                "key": item.key,
                "answer": answer,
                "note": note,
                "before": {"answer": item.answer, "note": item.note},
            }
        )
        item.answer, item.note, item.answered_by, item.answered_at = answer, note, actor, now
        item.save(update_fields=["answer", "note", "answered_by", "answered_at"])
        changed.append(item)
    if not changed:
        return []
    before = review.state
    if review.started_at is None:
        _start(review, actor)
    append_event(
        actor=actor,
        action="review.checklist_answered",
        subject=review,
        subject_label=f"review #{review.pk} of {review.service.slug}",
        payload={
            "answers": recorded,
            "before": {"state": before},
            "after": {"state": review.state},
        },
    )
    return changed


def _owners(actions: Sequence[Action]) -> dict[str, Any]:
    names = {str(a.get("owner") or "") for a in actions} - {""}
    User = get_user_model()
    return {u.get_username(): u for u in User.objects.filter(username__in=names, is_active=True)}


def _conclusion_problems(
    review: Review,
    items: list[ReviewChecklistItem],
    *,
    outcome: str,
    conclusion: str,
    next_due_on: dt.date,
    actions: Sequence[Action],
    today: dt.date,
) -> tuple[dict[str, str], dict[str, Any]]:
    problems: dict[str, str] = {}
    unanswered = [item.get_key_display() for item in items if not item.answer]
    if unanswered:
        problems["checklist"] = (
            f"Answer every checklist item before concluding; {len(unanswered)} "
            f"{'is' if len(unanswered) == 1 else 'are'} unanswered: {'; '.join(unanswered)}."
        )
    if outcome not in Review.Outcome.values:
        problems["outcome"] = (
            f"{outcome!r} is not an outcome; give pass, pass_with_actions or fail."
        )
    needing = [
        item.get_key_display()
        for item in items
        if item.answer == ReviewChecklistItem.Answer.ACTION_NEEDED
    ]
    if outcome == Review.Outcome.PASS and needing:
        problems["outcome"] = (
            f"{'; '.join(needing)} {'is' if len(needing) == 1 else 'are'} answered "
            "“action needed”: conclude with pass with actions, or fail."
        )
    if outcome == Review.Outcome.PASS_WITH_ACTIONS and not actions:
        problems["actions"] = "Pass with actions needs at least one action: what, who, by when."
    if outcome == Review.Outcome.FAIL and not conclusion:
        problems["conclusion"] = "Say why the service fails its review: its team reads it."
    if len(conclusion) > NOTE_MAX_CHARS:
        problems["conclusion"] = (
            f"The conclusion holds at most {NOTE_MAX_CHARS} characters; this has {len(conclusion)}."
        )
    if next_due_on <= today:
        problems["next_due_on"] = (
            f"The next review must be due after today ({today:%Y-%m-%d}); "
            f"{next_due_on:%Y-%m-%d} is not."
        )
    owners = _owners(actions)
    for n, action in enumerate(actions):
        if not str(action.get("description") or "").strip():
            problems[f"actions[{n}].description"] = "Say what is to be done."
        owner = str(action.get("owner") or "")
        if owner not in owners:
            problems[f"actions[{n}].owner"] = (
                f"No active user {owner!r}: name the person who does it by username."
                if owner
                else "Name who does it (a username)."
            )
        due = action.get("due_on")
        if not isinstance(due, dt.date) or due < today:
            problems[f"actions[{n}].due_on"] = (
                f"An action is due today ({today:%Y-%m-%d}) or later."
            )
    return problems, owners


@transaction.atomic
def conclude_review(
    review: Review,
    *,
    actor: Actor,
    outcome: str,
    conclusion: str = "",
    next_due_on: dt.date | None = None,
    actions: Sequence[Action] = (),
) -> Review:
    """Conclude: pass, pass with actions or fail, with actions (owner, due date) and the
    next due date (default: the cadence from today). The conclusion, the whole checklist
    and the triggers go into the ledger as one Event; the review and its checklist become
    read-only."""
    permissions.ensure_can_conduct_review(actor, review)
    if actor is None:
        raise ValidationError({"outcome": "A review is concluded by a person."})
    review = _lock(review)
    _refuse_concluded(review)
    now = timezone.now()
    today = _today(now)
    conclusion = (conclusion or "").strip()
    next_due_on = next_due_on or today + dt.timedelta(days=review.service.review_cadence_days)
    items = list(
        review.items.select_for_update(of=("self",))
        .select_related("answered_by")
        .order_by("position")
    )
    problems, owners = _conclusion_problems(
        review,
        items,
        outcome=outcome,
        conclusion=conclusion,
        next_due_on=next_due_on,
        actions=actions,
        today=today,
    )
    if problems:
        raise ValidationError(problems)
    before = review.state
    review.state = Review.State.CONCLUDED
    review.outcome = outcome
    review.conclusion = conclusion
    review.next_due_on = next_due_on
    review.concluded_at = now
    review.concluded_by = actor
    if review.started_at is None:
        review.started_at, review.started_by = now, actor
    review.save(
        update_fields=[
            "state",
            "outcome",
            "conclusion",
            "next_due_on",
            "concluded_at",
            "concluded_by",
            "started_at",
            "started_by",
        ]
    )
    review.items.update(frozen=True)
    created = ReviewAction.objects.bulk_create(
        ReviewAction(
            review=review,
            service=review.service,
            description=str(action["description"]).strip(),
            owner=owners[str(action["owner"])],
            due_on=action["due_on"],
            created_at=now,
        )
        for action in actions
    )
    append_event(
        actor=actor,
        action="review.concluded",
        subject=review,
        subject_label=f"review #{review.pk} of {review.service.slug}",
        payload={
            "service": review.service.slug,
            "before": {"state": before},
            "after": {"state": review.state},
            "outcome": outcome,
            "conclusion": conclusion,
            "next_due_on": next_due_on,
            "due_on": review.due_on,
            "raised_at": review.raised_at,
            "triggers": [_trigger_json(t) for t in review.triggers.order_by("pk")],
            "checklist": [
                {
                    "key": item.key,
                    "title": item.get_key_display(),
                    "facts": item.facts,
                    "flags": item.flags,
                    "suggestion": item.suggestion,
                    "answer": item.answer,
                    "note": item.note,
                    "answered_by": item.answered_by.get_username() if item.answered_by else None,
                    "answered_at": item.answered_at,
                }
                for item in items
            ],
            "actions": [
                {
                    "id": action.pk,
                    "description": action.description,
                    "owner": action.owner.get_username(),
                    "due_on": action.due_on,
                }
                for action in created
            ],
        },
    )
    return review


@transaction.atomic
def reassign_review(review: Review, *, actor: Actor, assignee: Any) -> bool:
    """Give the review to someone else (platform or security & compliance decide)."""
    permissions.ensure_can_manage_reviews(actor)
    review = _lock(review)
    _refuse_concluded(review)
    refusal = permissions.assignee_refusal(assignee, review.service)
    if refusal:
        raise ValidationError({"assignee": refusal})
    if review.assignee_id == assignee.pk:
        return False
    before = review.assignee.get_username() if review.assignee else None
    review.assignee = assignee
    review.save(update_fields=["assignee"])
    append_event(
        actor=actor,
        action="review.reassigned",
        subject=review,
        subject_label=f"review #{review.pk} of {review.service.slug}",
        payload={"before": {"assignee": before}, "after": {"assignee": assignee.get_username()}},
    )
    return True


@transaction.atomic
def complete_review_action(action: ReviewAction, *, actor: Actor, note: str = "") -> ReviewAction:
    """An action of a conclusion is done: it leaves the service page."""
    permissions.ensure_can_complete_review_action(actor, action)
    if actor is None:
        raise ValidationError({"note": "An action is marked done by a person."})
    action = (
        ReviewAction.objects.select_for_update()
        .select_related("service", "owner")
        .get(pk=action.pk)
    )
    if action.done_at is not None:
        raise TransitionRefused(
            f"Action #{action.pk} was marked done on {action.done_at:%Y-%m-%d %H:%M %Z}.",
            state="done",
        )
    note = (note or "").strip()
    if len(note) > NOTE_MAX_CHARS:
        raise ValidationError(
            {"note": f"A note holds at most {NOTE_MAX_CHARS} characters; this has {len(note)}."}
        )
    action.done_at, action.done_by, action.done_note = timezone.now(), actor, note
    action.save(update_fields=["done_at", "done_by", "done_note"])
    append_event(
        actor=actor,
        action="review.action_done",
        subject=action,
        subject_label=f"action #{action.pk} of review #{action.review_id}",
        payload={
            "review": action.review_id,
            "description": action.description,
            "owner": action.owner.get_username(),
            "due_on": action.due_on,
            "note": note,
        },
    )
    return action
