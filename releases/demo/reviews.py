"""Demo reviews, so `make run` shows a review in each state, raised by the real sweep.

After the demo's releases, rollouts and 60 days of run evidence (`ledger.demo.run_evidence`
lets kb-assistant's p95 TTFT climb past its SLO):

- **kb-assistant**: *open*, raised by the sweep for its latency drift (the 7-day p95
  TTFT above the 800 ms SLO and well above what its load test measured at release);
- **support-summarizer**: *concluded* pass with actions: its rollback target's
  verification is 31 days old (internal services re-verify within 30); the action,
  re-verifying it, shows on its service page until done;
- **dataagent-sql**: *in progress*: its 60-day cadence is due (the demo's story: the
  service has been registered for 61 days) and the SRE answered part of the checklist;
- **support-faq**: *overdue*: its 90-day cadence review was raised 35 days ago (it has
  been registered for 130 days) and nobody took it up; the sweep marks it overdue.

The registration dates are the demo's story, set on the service rows before the sweep
runs; the overdue review is raised by the sweep as of 35 days ago (`now`), so its raised
date and due date are in the past while its events, like every event, carry the time the
demo was seeded. Idempotent: nothing is added when the demo services have reviews.
"""

from __future__ import annotations

import datetime as dt

from django.contrib.auth import get_user_model
from django.utils import timezone

from ledger.models import Service
from releases.models import Review
from releases.reviews.services import periodic_reviews as verbs

DEMO_SERVICES = (
    "kb-assistant",
    "support-summarizer",
    "dataagent-sql",
    "support-faq",
    "code-review-bot",
    "doc-translate",
)
# How long the demo says these services have been registered, in days.
REGISTERED_DAYS = {"dataagent-sql": 61, "support-faq": 130}
OVERDUE_RAISED_DAYS_AGO = 35


def seed_reviews() -> int:
    """Reviews in every state on the demo services; returns how many were raised."""
    services = {s.slug: s for s in Service.objects.filter(slug__in=DEMO_SERVICES)}
    if not services or Review.objects.filter(service__in=services.values()).exists():
        return 0
    now = timezone.now()
    for slug, days in REGISTERED_DAYS.items():
        if slug in services:
            Service.objects.filter(pk=services[slug].pk).update(
                created_at=now - dt.timedelta(days=days)
            )
    if "support-faq" in services:
        verbs.sweep_reviews(
            now=now - dt.timedelta(days=OVERDUE_RAISED_DAYS_AGO),
            service_ids=[services["support-faq"].pk],
        )
    verbs.sweep_reviews(service_ids=[s.pk for s in services.values()])
    people = get_user_model().objects.in_bulk(["sre", "owner"], field_name="username")
    sre = people.get("sre")
    reviews = {r.service.slug: r for r in Review.objects.select_related("service")}
    if sre is not None:
        _in_progress(reviews.get("dataagent-sql"), sre)
        _concluded(reviews.get("support-summarizer"), sre, people.get("owner") or sre)
    return len(reviews)


def _in_progress(review: Review | None, sre) -> None:
    if review is None:
        return
    verbs.answer_checklist(
        review,
        actor=sre,
        answers=[
            {"key": "versions", "answer": "ok", "note": "vLLM 0.6.3 is still patched upstream."},
            {
                "key": "license",
                "answer": "ok",
                "note": "Apache-2.0, approved; weights from the internal mirror.",
            },
            {
                "key": "sample_sets",
                "answer": "action_needed",
                "note": "No sample set is tagged sql or tool-use: the starter sets do not "
                "cover what this service does.",
            },
        ],
    )


def _concluded(review: Review | None, sre, owner) -> None:
    if review is None:
        return
    notes = {
        "rollback_target": "r1 was last verified 31 days ago; a replay of its verification set "
        "is due.",
    }
    verbs.answer_checklist(
        review,
        actor=sre,
        answers=[
            {
                "key": key,
                "answer": "action_needed" if key in notes else "ok",
                "note": notes.get(key, ""),
            }
            for key in review.items.values_list("key", flat=True)
        ],
    )
    today = timezone.now().date()
    verbs.conclude_review(
        review,
        actor=sre,
        outcome="pass_with_actions",
        conclusion="Fit to keep serving; the rollback target needs a fresh verification.",
        actions=[
            {
                "description": "Replay the verification set against support-summarizer r1 "
                "and record the run.",
                "owner": owner.get_username(),
                "due_on": today + dt.timedelta(days=7),
            }
        ],
    )
